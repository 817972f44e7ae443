#!/usr/bin/env bash
# Typed values from DWARF (issue 33, item 1), against tests/programs/typed_target.cpp: each
# output compared whole with a golden file in tests/golden/, times, thread ids and addresses
# masked as uftrace's tests mask them.
#   1. FUNC: the return value of every kind (void, bool, char, integers, enums, pointers,
#      strings, float, double, long double, structs in each register class and in memory,
#      references, a method), as text and as JSON (which Python's json module reads back).
#   2. p:/r: parameters by name, typed as declared, and the places they cannot be read from.
#   3. The fetch-arg syntax still overrides ($retval:x32, NAME:x64, $retval:f64), and --raw.
#   4. Without DWARF (the program's debug information stripped), the raw value, marked so.
#   5. Source lines as probe points (FUNC:RELLINE, SRCFILE:LINE) with variables by name, and
#      `list --params` and `--lines` on the file and on a running process.
#   6. The same in a library the program links, built -O2 (tests/programs/typed_lib.c).
source "$(dirname "${BASH_SOURCE[0]}")/../support/script_common.sh" typed
target=$bin/tests/lp_typed_target
golden=$LIVEPROBE_SOURCE_DIR/tests/golden
# The lines the golden files hold: the tool's output (stdout), then its messages (stderr),
# masked; the program's own line is checked apart (its output goes when it exits).
mask() {
    grep -Ev '^liveprobe: (started PID|placed )|^typed_target done' |
        sed -E 's/^\[ *[0-9]+\.[0-9]{6}\] [0-9]+ /[T] TID /; s/took [0-9]+ ns/took N ns/; s/after [0-9]+ ns/after N ns/;
                s/0x[0-9a-f]{12}\b/ADDR/g; s/"time_ns":[0-9]+/"time_ns":T/; s/"pid":[0-9]+/"pid":PID/; s/"tid":[0-9]+/"tid":TID/;
                s/"duration_ns":[0-9]+/"duration_ns":D/; s/at \/.*\/tests\/programs\//at SRC\//'
}
# run NAME ARGS...: the tool's run, into $tmp/NAME (stdout) and $tmp/NAME.err.
run() {
    local name=$1; shift
    "${launch[@]}" "$lp" "$@" >"$tmp/$name" 2>"$tmp/$name.err"
}
# compare WHAT GOLDEN NAME: the run NAME, masked, is GOLDEN.
compare() {
    { mask <"$tmp/$3"; echo "--- stderr"; mask <"$tmp/$3.err"; } >"$tmp/$3.masked"
    if diff -u "$golden/$2" "$tmp/$3.masked" >"$tmp/$3.diff"; then pass "$1 ($2)"; else fail "$1: differs from $2:"; sed 's/^/    /' "$tmp/$3.diff" | head -40; fi
}

# 1. Every kind of return value.
run ret trace 'lp_ty_*' 'shop::Cart::total*' -- "$target"
compare "FUNC: return values typed by DWARF" typed_returns.txt ret
untraced=$("$target")
[ "$(grep '^typed_target done' "$tmp/ret")" = "$untraced" ] && pass "the program's output is its untraced run's: $untraced" ||
    fail "the program's output changed: $(grep typed_target "$tmp/ret"), untraced: $untraced"
# Kept in a trace file and shown later, the same values (the file keeps the types).
run ret.file trace -o "$tmp/ret.lptrace" 'lp_ty_*' 'shop::Cart::total*' -- "$target"
run ret.i trace -i "$tmp/ret.lptrace"
if diff <(mask <"$tmp/ret") <(mask <"$tmp/ret.i") >"$tmp/ret.i.diff"; then pass "-o FILE, then -i FILE: the same typed values"
else fail "-o then -i differs from the live trace:"; sed 's/^/    /' "$tmp/ret.i.diff" | head -10; fi
run ret.json trace --json 'lp_ty_*' 'shop::Cart::total*' -- "$target"
compare "FUNC --json: return values as JSON values" typed_returns.json ret.json
grep '^{' "$tmp/ret.json" | python3 -c 'import json, sys; [json.loads(l) for l in sys.stdin]' 2>"$tmp/py.err" &&
    pass "--json: every line is JSON" || { fail "--json: not JSON:"; sed 's/^/    /' "$tmp/py.err"; }

# 2. Parameters by name, and where they cannot be read.
run params trace 'p:lp_ty_mix a b c d' 'p:lp_ty_sum_point p c' 'p:lp_ty_first s' 'p:lp_ty_s8 v' \
    'p:lp_ty_read_ref p n' 'p:lp_ty_make_big a' 'r:lp_ty_pick k ret=$retval' 'p:lp_ty_is_even n' \
    'p:lp_ty_third x' 'r:lp_ty_scale f' 'p:lp_ty_seat_of t' -- "$target"
compare "p:/r: parameters typed by DWARF, and refused where unknown" typed_params.txt params

# 3. Overrides.
run over trace 'lp_ty_neg $retval:x32' 'p:lp_ty_half_of x:x64' 'p:lp_ty_scale f:f32' 'lp_ty_pick $retval:u8' \
    'r:lp_ty_scale $retval:f32' 'lp_ty_half_of $retval:f64' -- "$target"
compare "the fetch-arg syntax overrides the DWARF type" typed_overrides.txt over

# 4. No DWARF: raw.
cp "$target" "$tmp/stripped" && strip --strip-debug "$tmp/stripped"
run raw trace 'lp_ty_neg' 'lp_ty_u16' 'lp_ty_ll' -- "$tmp/stripped"
compare "without DWARF: the raw value, marked raw" typed_raw.txt raw
# --raw: the same bare values with DWARF there (the cheapest events).
run rawflag trace --raw lp_ty_neg lp_ty_u16 lp_ty_pick -- "$target"
compare "--raw: the bare values though DWARF is there" typed_rawflag.txt rawflag
run rawp trace 'p:lp_ty_neg v' -- "$tmp/stripped"
grep -q "lp_ty_neg: .*has no DWARF" "$tmp/rawp.err" && pass "without DWARF: a parameter by name is refused, saying why" ||
    { fail "a parameter by name without DWARF:"; sed 's/^/    /' "$tmp/rawp.err"; }

# 5. Source lines: FUNC:RELLINE and SRCFILE:LINE, with variables by name, and list on the file.
run lines trace 'p:lp_ty_loop:4 i total first=+0(label):u8' 'typed_target.cpp:76 total label n' -- "$target"
compare "source lines as probe points, their variables by name" typed_lines.txt lines
run badline trace 'typed_target.cpp:68' -- "$target"
run badvar trace 'p:lp_ty_loop:4 nope' -- "$target"
run badrel trace 'lp_ty_nosuch:3' -- "$target"
cat "$tmp/badline.err" "$tmp/badvar.err" "$tmp/badrel.err" >"$tmp/bad" && : >"$tmp/bad.err"
compare "a line without code, a variable not there, no such function: clear errors" typed_line_errors.txt bad
run list.params list -x "$target" --params -d 'lp_ty_m*'
run list.lines list -x "$target" --lines lp_ty_loop
cat "$tmp/list.lines" >>"$tmp/list.params"
compare "list -x FILE --params, --lines FUNC" typed_list.txt list.params
# The same of a running process (its objects read from their files: it is not touched).
"${launch[@]}" "$bin/tests/lp_nap_target" 1000 30 >/dev/null 2>&1 &
pids+=($!)
for _ in $(seq 100); do grep -q nap_target "/proc/$!/maps" 2>/dev/null && break; sleep 0.05; done
run list.proc list -p "$!" --params 'lp_nap_target:nap*'
run list.proc.lines list -p "$!" --lines nap
cat "$tmp/list.proc.lines" >>"$tmp/list.proc"
compare "list -p PID --params, --lines FUNC" typed_list_process.txt list.proc

# 6. A library the program links (-O2, its soname not its file's name): a source line of it with
# a copy inlined into each of two functions, a function in a hot and a cold part, a char array in
# a union through a reference, and a type DWARF gives no size (raw).
run lib trace 'p:typed_lib.c:11' 'p:lp_tl_checked:8 total limit' 'liblp_typed_lib.so.1:lp_tl_sum*' lp_ty_labelled \
    lp_ty_nullptr -- "$target"
compare "a library's lines, inlined copies, a cold part, nested arrays, no size" typed_library.txt lib
run lib.list list -x "$bin/tests/liblp_typed_lib.so.1.0.0" --params 'lp_tl_*'
run lib.lines list -x "$bin/tests/liblp_typed_lib.so.1.0.0" --lines lp_tl_checked
run lib.lines2 list -x "$bin/tests/liblp_typed_lib.so.1.0.0" --lines lp_tl_sum  # its own lines, not lp_tl_step's
cat "$tmp/lib.lines" "$tmp/lib.lines2" >>"$tmp/lib.list"
compare "list on a library: named by its soname, a cold part's function whole" typed_library_list.txt lib.list

echo "$failures failure(s)"
[ "$failures" -eq 0 ]
