#!/usr/bin/env bash
# `liveprobe trace -- CMD` follows exec (issue 31, part 4): the programs that the started program
# and its children execute are traced with the same specs from before their main, each call
# filed under the program and thread it returns in, with the programs' own counts exactly; their
# output is the same as untraced; when the tool dies, their probes go; --no-follow does not
# follow. Before this, `trace '*' -- sh -c ./app` traced sh only.
source "$(dirname "${BASH_SOURCE[0]}")/../support/script_common.sh" exec_follow
ft=$bin/tests/lp_fork_target   # forks; parent and child count their own calls (in_parent, in_child)
tt=$bin/tests/lp_trace_target  # calls of known counts (tests/programs/trace_target.c)

# check NAME FILE REGEX...: each REGEX matches a line of FILE.
check() {
    local name=$1 file=$2 missing=(); shift 2
    for re in "$@"; do grep -Eq -- "$re" "$file" || missing+=("$re"); done
    if [ ${#missing[@]} -eq 0 ]; then pass "$name"
    else fail "$name: no line matches: ${missing[*]}"; grep -v '^\[' "$file" | head -30 | sed 's/^/    /'; fi
}
# The program's own counts, from its output.
in_child() { sed -n 's/^child [0-9]* in_child \([0-9]*\)$/\1/p' "$1" | paste -sd+ | bc; }
in_parent() { sed -n 's/^parent in_parent \([0-9]*\) .*/\1/p' "$1" | paste -sd+ | bc; }

# 1. A shell (stripped: nothing of it is traced) runs two programs, one of which forks: each
# program's functions under its name, counted exactly.
"${launch[@]}" "$lp" trace --count 'in_*' 'lp_tr_*' main -- sh -c "'$tt' >/dev/null; '$ft' 0 0.5" >"$tmp/two.out" 2>"$tmp/two.err"
cat "$tmp/two.err" >>"$tmp/two.out"
check "a shell's two programs, each counted under its name" "$tmp/two.out" \
    "^lp_fork_target:in_child +$(in_child "$tmp/two.out")\$" "^lp_fork_target:in_parent +$(in_parent "$tmp/two.out")\$" \
    '^lp_trace_target:lp_tr_leaf +1000$' '^lp_trace_target:lp_tr_step +1000$' '^lp_trace_target:lp_tr_fib +177$' \
    '^lp_trace_target:main +1$' '^lp_fork_target:main +1$' '^liveprobe: followed exec: 2 runs of 2 programs traced$' \
    '^liveprobe: following PID [0-9]+ \(.*/lp_fork_target\): placed 3 probes' ' missed 0$'

# 2. Children's children, exec without fork (env), a program run twice: one program, its calls
# summed over its runs, under its plain name.
"${launch[@]}" "$lp" trace --count 'in_*' -- sh -c "sh -c 'exec env $ft 0 0.3' & '$ft' 0 0.3; wait" >"$tmp/deep.out" 2>&1
check "grandchildren, exec in place, two runs: summed exactly" "$tmp/deep.out" \
    "^in_child +$(in_child "$tmp/deep.out")\$" "^in_parent +$(in_parent "$tmp/deep.out")\$" \
    '^liveprobe: followed exec: 2 runs of 1 program traced, [0-9]+ ran untraced$' ' missed 0$'

# 3. --hist and per-event: every call of every run, timed.
"${launch[@]}" "$lp" trace --hist 'in_*' -- sh -c "'$ft' 0 0.3; '$ft' 0 0.3" >"$tmp/hist.out" 2>&1
check "--hist across exec" "$tmp/hist.out" "^@ns\[in_child\]: $(in_child "$tmp/hist.out") calls\$" \
    "^@ns\[in_parent\]: $(in_parent "$tmp/hist.out") calls\$"
"${launch[@]}" "$lp" trace 'in_child' -- sh -c "'$ft' 0 0.2; '$ft' 0 0.2" >"$tmp/ev.out" 2>&1
n=$(grep -c ' in_child returned ' "$tmp/ev.out")
[ "$n" = "$(in_child "$tmp/ev.out")" ] && pass "per-event across exec: each of the $n calls" ||
    { fail "per-event: $n lines, $(in_child "$tmp/ev.out") calls"; grep -v '^\[' "$tmp/ev.out" | sed 's/^/    /'; }

# 4. -o FILE: a trace file for each program run, FILE.PID, each read back whole.
"${launch[@]}" "$lp" trace -o "$tmp/t.lpt" 'in_*' -- sh -c "'$ft' 0 0.2; '$ft' 0 0.2" >"$tmp/o.out" 2>&1
sum=0
for f in "$tmp"/t.lpt.*; do
    n=$("$lp" trace -i "$f" --count 2>/dev/null | sed -n 's/^in_child  *\([0-9]*\)$/\1/p')
    sum=$((sum + ${n:-0}))
done
files=$(ls "$tmp"/t.lpt.* 2>/dev/null | wc -l)
[ "$files" -eq 2 ] && [ "$sum" = "$(in_child "$tmp/o.out")" ] && "$lp" trace -i "$tmp/t.lpt" >/dev/null 2>&1 &&
    pass "-o: one file a program run ($files), $sum calls of in_child in them" ||
    { fail "-o: $files files, $sum calls of $(in_child "$tmp/o.out")"; sed 's/^/    /' "$tmp/o.out"; }

# 5. The followed programs' own output (stdout and stderr, here into a file of theirs) is the
# same as untraced: nothing of liveprobe's in it.
"$tt" >"$tmp/plain.out" 2>&1
"${launch[@]}" "$lp" trace --count '*' -- sh -c "'$tt' >'$tmp/traced.out' 2>&1" >"$tmp/five.out" 2>&1
cmp -s "$tmp/plain.out" "$tmp/traced.out" && grep -Eq '^lp_tr_leaf +1000$|^lp_trace_target:lp_tr_leaf +1000$' "$tmp/five.out" &&
    pass "a followed program's output is its own" ||
    { fail "a followed program's output:"; diff "$tmp/plain.out" "$tmp/traced.out" | head; grep -v '^\[' "$tmp/five.out" | head; }

# 6. The tool killed (SIGKILL) while a followed program runs: its probes go (its agent sees the
# tool's connection close), it runs to its end, its output whole.
"${launch[@]}" "$lp" trace --count 'in_*' -- sh -c "'$ft' 0.5 3 >'$tmp/k.out'" >"$tmp/k.err" 2>&1 &
tool=$!
pids+=("$tool")
app=
for _ in $(seq 100); do
    sh=$(pgrep -P "$tool" | head -1)
    [ -n "$sh" ] && app=$(pgrep -P "$sh" | head -1)
    [ -n "$app" ] && grep -q 'trace session' <<<"$("$lp" status -p "$app" 2>&1)" && break
    app=
    sleep 0.1
done
if [ -z "$app" ]; then fail "tool killed: the followed program's session never showed"; else
    pids+=("$app")
    sleep 1
    kill -9 "$tool"; wait "$tool" 2>/dev/null
    gone=
    for _ in $(seq 50); do
        grep -q 'trace session' <<<"$("$lp" status -p "$app" 2>&1)" || { gone=1; break; }
        sleep 0.1
    done
    while kill -0 "$app" 2>/dev/null; do sleep 0.1; done
    [ -n "$gone" ] && grep -q '^parent in_parent [0-9]* child status 0$' "$tmp/k.out" &&
        pass "tool killed: the followed program's probes removed; it ran to its end" ||
        { fail "tool killed: session gone: ${gone:-no}"; sed 's/^/    /' "$tmp/k.out" "$tmp/k.err"; }
fi

# 7. --no-follow: the shell only (which has no in_*: it is not run).
out=$("${launch[@]}" "$lp" trace --no-follow --count 'in_*' -- sh -c "'$ft' 0 0.1" 2>&1); rc=$?
[ "$rc" -eq 1 ] && grep -q 'in_\*: no function matches' <<<"$out" && ! grep -q in_child <<<"$out" &&
    pass "--no-follow: the shell only" || fail "--no-follow: exit $rc: $out"

# 7b. A spec that waits for a library no program loads, with a shell's command substitutions
# (forked children that exit()): each child ended at once. Its copy of the watcher's condition
# variable counted the parent's watcher, waiting at the fork, and its exit() blocked for ever in
# pthread_cond_destroy: `make check` of jq hung at its first $(...).
start=$SECONDS
out=$(timeout 60 "$lp" trace --count main 'lp_never_loaded.so:*' -- bash -c 'for i in 1 2 3 4 5 6; do x=$(echo hi); sleep 0.05; done; echo "done $x"' 2>&1); rc=$?
[ "$rc" -eq 0 ] && grep -q '^done hi$' <<<"$out" && pass "a spec waiting for a library, forks that exit: ended in $((SECONDS - start)) s" ||
    fail "a spec waiting for a library, forks that exit: exit $rc (124: hung), $(tail -2 <<<"$out")"

# 8. A set-uid program (of another user) is not followed: the loader ignores LD_PRELOAD for it;
# the tool says so, once, and it runs as it would.
if [ "$(id -u)" -ne 0 ]; then echo "SKIP: a set-uid program: only root makes one of another user"
elif findmnt -no OPTIONS -T "$tmp" | grep -qw nosuid; then echo "SKIP: a set-uid program: $tmp is mounted nosuid"
else
    cp "$ft" "$tmp/suid_ft" && chown nobody "$tmp/suid_ft" && chmod 4755 "$tmp/suid_ft" && chmod 755 "$tmp"
    "${launch[@]}" "$lp" trace --count 'in_*' -- sh -c "'$tmp/suid_ft' 0 0.1; env '$tmp/suid_ft' 0 0.1; '$ft' 0 0.1" >"$tmp/suid.out" 2>&1
    check "a set-uid program: not followed, said once" "$tmp/suid.out" \
        "^liveprobe: PID [0-9]+ \($tmp/suid_ft\) runs untraced: a set-uid program is not followed" \
        "^in_child +$(sed -n 's/^child [0-9]* in_child \([0-9]*\)$/\1/p' "$tmp/suid.out" | tail -1)\$" \
        '^liveprobe: followed exec: 1 run of 1 program traced, 3 ran untraced$'
    [ "$(grep -c 'set-uid program is not followed' "$tmp/suid.out")" -eq 1 ] && [ "$(grep -c '^parent in_parent' "$tmp/suid.out")" -eq 3 ] &&
        pass "a set-uid program: each ran" || fail "a set-uid program: $(grep -c '^parent' "$tmp/suid.out") runs ended"
fi

# 9. -p: a process that executes a program: its probes went with the old image; the tool says
# that -p does not follow exec, and ends with what it read (not "liveprobe detach").
"${launch[@]}" "$ft" 0.5 1.5 exec "$ft" 0 1 >"$tmp/px.out" 2>&1 &
px=$!
pids+=("$px")
sleep 0.2
"$lp" trace -p "$px" --count 'in_*' >"$tmp/p.out" 2>&1; rc=$?
wait "$px"
[ "$rc" -eq 0 ] && grep -q "^liveprobe: process $px executed a program (.*/lp_fork_target): its probes went with the old one" "$tmp/p.out" &&
    grep -Eq "^in_parent +[0-9]+$" "$tmp/p.out" && ! grep -q detach "$tmp/p.out" &&
    pass "-p across exec: said that it does not follow" || { fail "-p across exec: exit $rc"; sed 's/^/    /' "$tmp/p.out"; }

echo "$failures failure(s)"
[ "$failures" -eq 0 ]
