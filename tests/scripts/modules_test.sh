#!/usr/bin/env bash
# Probe modules as a user runs them (API.md section 2): the samples of the kernel's documents
# (samples/) loaded into samples/target with `liveprobe insmod`, their `dmesg` lines checked
# against what the documents say they print, `lsmod`, `rmmod`; 100 load/unload cycles with the
# target's descriptors and mappings back where they were; the target's own output unchanged;
# and every error case with its message and exit status.
source "$(dirname "${BASH_SOURCE[0]}")/../support/script_common.sh" modules
target=$bin/samples/target
samples=$bin/samples
mods=$bin/tests/modules

# start NAME [ROUNDS [INTERVAL_MS]]: the target in the background, its output in $tmp/NAME.out.
start() {
    local name=$1; shift
    "${launch[@]}" "$target" "$@" >"$tmp/$name.out" 2>&1 &
    pid=$!
    pids+=("$pid")
    for _ in $(seq 500); do grep -q "^round 0" "$tmp/$name.out" 2>/dev/null && return 0; sleep 0.01; done
    fail "$name: the target did not start"; return 1
}
# expect DESCRIPTION EXIT_STATUS REGEX CMD...: runs CMD, checks its status and its output.
expect() {
    local what=$1 want=$2 re=$3 out rc; shift 3
    out=$("$@" 2>&1); rc=$?
    if [ "$rc" -eq "$want" ] && grep -Eq -- "$re" <<<"$out"; then pass "$what: $(echo "$out" | tail -1)"
    else fail "$what: exit $rc (want $want), output:"; echo "$out" | sed 's/^/    /'; fi
}
# until_log PID REGEX: waits (5 s at most) for a dmesg line matching REGEX.
until_log() {
    for _ in $(seq 250); do "$lp" dmesg -t -p "$1" 2>/dev/null | grep -Eq -- "$2" && return 0; sleep 0.02; done
    return 1
}
# the target's own output: every line as without modules, rounds consecutive
output_unchanged() {
    local name=$1 bad
    bad=$(grep -Evc '^round [0-9]+: open ok, missing -2(, fork ok)?$' "$tmp/$name.out")
    if [ "$bad" -eq 0 ] && awk -F'[ :]' '{ if ($2 != NR - 1) exit 1 }' "$tmp/$name.out"; then
        pass "$name: the target's output is unchanged ($(wc -l <"$tmp/$name.out") rounds)"
    else fail "$name: the target's output changed:"; grep -Ev '^round [0-9]+: open ok, missing -2(, fork ok)?$' "$tmp/$name.out" | head -5; fi
}

# 1. kretprobe_example, func=do_sys_open (the seed: "do_sys_open returned 3 and took 19732 ns to
# execute"): an fd, -2 for the missing file, then "Missed probing 0 instances" at rmmod.
start kret 0 20 || exit 1
expect "insmod kretprobe_example func=do_sys_open" 0 "loaded kretprobe_example" \
    "$lp" insmod -p "$pid" "$samples/kretprobe_example.so" func=do_sys_open
until_log "$pid" "^do_sys_open returned -2 and took" || fail "kretprobe_example: no line for the missing file"
log=$("$lp" dmesg -t -p "$pid" | grep -v '^liveprobe: audit: ')  # the module's lines (the agent's audit trail aside)
if grep -Eq '^do_sys_open returned [0-9]+ and took [0-9]+ ns to execute$' <<<"$log" &&
   grep -Eq '^do_sys_open returned -2 and took [0-9]+ ns to execute$' <<<"$log" &&
   ! grep -Ev '^do_sys_open returned -?[0-9]+ and took [0-9]+ ns to execute$' <<<"$log" | grep -q .; then
    pass "kretprobe_example dmesg: $(echo "$log" | head -1)"
else fail "kretprobe_example dmesg:"; echo "$log" | head -5 | sed 's/^/    /'; fi
"$lp" dmesg -p "$pid" | grep -v 'liveprobe: audit: ' | head -1 | grep -Eq '^\[ *[0-9]+\.[0-9]{6}\] do_sys_open returned' ||
    fail "dmesg: no [seconds.microseconds] time stamp: $("$lp" dmesg -p "$pid" | head -1)"
expect "lsmod shows the module and its kretprobe" 0 \
    "^  [0-9a-f]{16}  r  do_sys_open\+0x0  hits=[1-9][0-9]* nmissed=0( \[OPTIMIZED\])?$" "$lp" lsmod -p "$pid"
"$lp" lsmod -p "$pid" | grep -Eq "^kretprobe_example +[0-9]+ +1  /.*/kretprobe_example.so$" ||
    fail "lsmod module line: $("$lp" lsmod -p "$pid")"
expect "rmmod kretprobe_example, silently" 0 "^$" "$lp" rmmod -p "$pid" kretprobe_example
expect "exit printed the missed count" 0 "^Missed probing 0 instances of do_sys_open$" "$lp" dmesg -t -p "$pid"
expect "lsmod after rmmod: no module" 0 "^Module" "$lp" lsmod -p "$pid"
"$lp" lsmod -p "$pid" | grep -q kretprobe_example && fail "lsmod still lists kretprobe_example"
grep -q kretprobe_example.so /proc/"$pid"/maps && fail "kretprobe_example.so is still mapped after rmmod"

# 2. kretprobe_example with its default, do_fork: "do_fork returned PID".
expect "insmod kretprobe_example (func=do_fork)" 0 "loaded" "$lp" insmod -p "$pid" "$samples/kretprobe_example.so"
if until_log "$pid" "^do_fork returned [1-9][0-9]* and took [0-9]+ ns to execute$"; then
    pass "kretprobe_example on do_fork: $("$lp" dmesg -t -p "$pid" | grep '^do_fork returned' | head -1)"
else fail "kretprobe_example on do_fork: no 'do_fork returned PID' line"; fi
"$lp" rmmod -p "$pid" kretprobe_example || fail "rmmod kretprobe_example (do_fork)"

# 3. kprobe_example (old-style init_module/cleanup_module): pre handler, dump_stack, post handler.
expect "insmod kprobe_example" 0 "loaded kprobe_example" "$lp" insmod -p "$pid" "$samples/kprobe_example.so"
addr=$("$lp" lsmod -p "$pid" | awk '$2 == "k" && $3 == "do_fork+0x0" { print $1 }')
until_log "$pid" "^post_handler" || fail "kprobe_example: no post_handler line"
log=$("$lp" dmesg -t -p "$pid")
if grep -q "^kprobe registered$" <<<"$log" &&
   grep -Eq "^pre_handler: p->addr=0x$addr, eflags=0x[0-9a-f]+$" <<<"$log" &&
   grep -q "^Call Trace:$" <<<"$log" &&
   grep -Eq "^ handler_pre\+0x[0-9a-f]+/0x[0-9a-f]+ \[kprobe_example\]$" <<<"$log" &&
   grep -Eq "^ do_fork\+0x0/0x[0-9a-f]+$" <<<"$log" &&
   grep -Eq "^ main\+0x[0-9a-f]+/0x[0-9a-f]+$" <<<"$log" &&
   grep -Eq "^post_handler: p->addr=0x$addr, eflags=0x[0-9a-f]+ $" <<<"$log"; then
    pass "kprobe_example dmesg: $(echo "$log" | grep -m1 '^pre_handler')"
else fail "kprobe_example dmesg (probe at $addr):"; echo "$log" | grep -v do_sys_open | tail -12 | sed 's/^/    /'; fi
"$lp" rmmod -p "$pid" kprobe_example.so || fail "rmmod kprobe_example.so (by file name)"
grep -q "^kprobe unregistered$" <<<"$("$lp" dmesg -t -p "$pid")" || fail "kprobe_example: no 'kprobe unregistered'"

# 4. jprobe_example: do_fork's arguments, as the target passes them.
expect "insmod jprobe_example" 0 "loaded jprobe_example" "$lp" insmod -p "$pid" "$samples/jprobe_example.so"
if until_log "$pid" "^jprobe: clone_flags=0x11,  stack_size=0x0, pt_regs=0x0$" &&
   "$lp" dmesg -t -p "$pid" | grep -Eq "^plant jprobe at [0-9a-f]{16}, handler addr [0-9a-f]{16}$"; then
    pass "jprobe_example dmesg: $("$lp" dmesg -t -p "$pid" | grep -m1 '^jprobe:')"
else fail "jprobe_example dmesg:"; "$lp" dmesg -t -p "$pid" | grep jprobe | tail -3 | sed 's/^/    /'; fi
"$lp" rmmod -p "$pid" jprobe_example || fail "rmmod jprobe_example"
grep -q "^jprobe unregistered$" <<<"$("$lp" dmesg -t -p "$pid")" || fail "jprobe_example: no 'jprobe unregistered'"

# 5. Parameters of every type, and current.
expect "insmod params_module with a value of every type" 0 loaded "$lp" insmod -p "$pid" "$mods/params_module.so" \
    count=-12 ucount=0x20 big=-5000000000 ubig=18446744073709551615 small=-300 usmall=65535 byte=255 \
    huge=077 mask=0xff verbose loud=yes "label=two words" name=seven77 values=1,-2,3
log=$("$lp" dmesg -t -p "$pid")
want1="count=-12 ucount=32 big=-5000000000 ubig=18446744073709551615 small=-300 usmall=65535 byte=255 huge=63 mask=0xff"
want2="verbose=1 quiet=0 label=two words name=seven77 nvalues=3 values=1,-2,3,0"
want3="current: pid=[0-9]+ tgid=$pid comm=liveprobe mm=set"  # init runs on the agent's thread
want4="values: 1 -2 3"  # pr_info, then a pr_cont per value: one line
if grep -qx "$want1" <<<"$log" && grep -qx "$want2" <<<"$log" && grep -Eqx "$want3" <<<"$log" &&
   grep -qx "$want4" <<<"$log"; then
    pass "params_module: every value as given: $want2"
else fail "params_module: want '$want1' / '$want2' / '$want3' / '$want4', log:"; echo "$log" | grep -v do_ | tail -4 | sed 's/^/    /'; fi
"$lp" rmmod -p "$pid" params_module || fail "rmmod params_module"

# 6. Errors: a clear message, exit status 1, nothing loaded.
expect "a file that is not ELF" 1 "not a probe module: not an ELF file" \
    "$lp" insmod -p "$pid" "$LIVEPROBE_SOURCE_DIR/samples/kprobe_example.c"
expect "a shared object that is not a module" 1 "not a probe module: it was not built with liveprobe" \
    "$lp" insmod -p "$pid" "$(ls /usr/lib/x86_64-linux-gnu/libz.so.1 /lib/x86_64-linux-gnu/libc.so.6 2>/dev/null | head -1)"
expect "a missing file" 1 "No such file" "$lp" insmod -p "$pid" "$tmp/nothing.so"
expect "an unknown parameter" 1 "unknown parameter 'nosuch': module kretprobe_example has: func" \
    "$lp" insmod -p "$pid" "$samples/kretprobe_example.so" nosuch=1
expect "a parameter without '='" 1 "parameter 'func' has no value: write func=VALUE" \
    "$lp" insmod -p "$pid" "$samples/kretprobe_example.so" func
expect "a string too long for its buffer" 1 "bad value for parameter 'name' \(string\): 8 characters, and it holds at most 7" \
    "$lp" insmod -p "$pid" "$mods/params_module.so" name=12345678
expect "a bad int" 1 "bad value 'ten' for parameter 'count' \(int\): not a number" \
    "$lp" insmod -p "$pid" "$mods/params_module.so" count=ten
expect "an int out of range" 1 "bad value '4294967296' for parameter 'count' \(int\): out of range" \
    "$lp" insmod -p "$pid" "$mods/params_module.so" count=4294967296
expect "a negative uint" 1 "parameter 'ucount' \(uint\): negative" "$lp" insmod -p "$pid" "$mods/params_module.so" ucount=-1
expect "hexint as the kernel reads it (base 0: ff is not a number)" 1 "bad value 'ff' for parameter 'mask' \(hexint\): not a number" \
    "$lp" insmod -p "$pid" "$mods/params_module.so" mask=ff
expect "a value with a leading space" 1 "bad value ' -1' for parameter 'ubig' \(ulong\): not a number" \
    "$lp" insmod -p "$pid" "$mods/params_module.so" "ubig= -1"
long=$(head -c 100000 /dev/zero | tr "\\0" x)  # a request of 100 KB reaches the agent whole
expect "a charp value of 100,000 characters" 1 "bad value 'x{48}\.\.\.' \(100000 characters\) for parameter 'label' \(charp\): longer than 1024 characters" \
    "$lp" insmod -p "$pid" "$mods/params_module.so" "label=$long"
expect "a bad bool" 1 "parameter 'verbose' \(bool\): not a boolean" "$lp" insmod -p "$pid" "$mods/params_module.so" verbose=maybe
expect "too many array values" 1 "5 values, and it takes at most 4" \
    "$lp" insmod -p "$pid" "$mods/params_module.so" values=1,2,3,4,5
expect "a symbol the target lacks (init fails)" 1 "its init failed with -1 \(Operation not permitted\)" \
    "$lp" insmod -p "$pid" "$samples/kretprobe_example.so" func=no_such_function
expect "a module whose init fails" 1 "module failing_init: its init failed with -19 \(No such device\)" \
    "$lp" insmod -p "$pid" "$mods/failing_init.so"
grep -q "^failing_init: registered: 0; now failing with -ENODEV$" <<<"$("$lp" dmesg -t -p "$pid")" || fail "failing_init did not run"
left=$("$lp" lsmod -p "$pid" | grep -Ev "^Module" || true)
if [ -z "$left" ] && ! grep -Eq "params_module|failing_init|kretprobe_example" /proc/"$pid"/maps; then
    pass "after every failed insmod: no module loaded or mapped, no probe left"
else fail "after the failed insmods:"; echo "$left" | sed 's/^/    /'; grep -E "params_module|failing_init" /proc/"$pid"/maps; fi
expect "rmmod of a module not loaded" 1 "module nosuch is not loaded" "$lp" rmmod -p "$pid" nosuch
expect "a second insmod of a loaded module" 1 "module kretprobe_example is already loaded" \
    bash -c "'$lp' insmod -p $pid '$samples/kretprobe_example.so' func=sys_open && '$lp' insmod -p $pid '$samples/kretprobe_example.so'"
"$lp" rmmod -p "$pid" kretprobe_example
expect "a module that leaves its probe registered" 0 "" "$lp" insmod -p "$pid" "$mods/leaky_module.so"
expect "rmmod unregisters what the module left" 0 "module leaky_module left a probe registered at sys_open\+0x0: unregistered it" \
    bash -c "'$lp' rmmod -p $pid leaky_module && '$lp' dmesg -t -p $pid"
expect "insmod without -p or a program" 2 "either -p PID or a program" "$lp" insmod "$samples/kprobe_example.so"
expect "insmod into a nonexistent process" 1 "no process" "$lp" insmod -p 999999999 "$samples/kprobe_example.so"

# 6b. A module's init or exit that faults: the process lives on, nothing of the module stays.
expect "a module whose init faults" 1 "module faulting_init: its init faulted \(SIGSEGV at address 0x10\) and was abandoned" \
    "$lp" insmod -p "$pid" "$mods/faulting_init.so"
expect "a module whose exit faults: loaded" 0 loaded "$lp" insmod -p "$pid" "$mods/faulting_exit.so"
expect "... and unloaded all the same" 0 "its exit faulted \(SIGSEGV at address 0x10\) and was abandoned; it was unloaded anyway" \
    "$lp" rmmod -p "$pid" faulting_exit
if kill -0 "$pid" && ! grep -Eq "faulting_(init|exit)" /proc/"$pid"/maps && [ -z "$("$lp" lsmod -p "$pid" | grep -v '^Module')" ]; then
    pass "after the faulting init and exit: the target runs, no module, no probe left"
else fail "after the faulting init and exit:"; "$lp" lsmod -p "$pid"; fi

# 6c. lsmod shows [DISABLED], and [GONE] for a probe on a module that was unloaded.
"$lp" insmod -p "$pid" "$mods/params_module.so" >/dev/null 2>&1 || fail "insmod params_module (for states_module)"
expect "lsmod: a disabled probe" 0 "^  [0-9a-f]{16}  k  sys_open\+0x0  hits=0 nmissed=0 \[DISABLED\]$" \
    bash -c "'$lp' insmod -p $pid '$mods/states_module.so' && '$lp' lsmod -p $pid"
"$lp" rmmod -p "$pid" params_module || fail "rmmod params_module (under states_module's probe)"
expect "lsmod: a probe on an unloaded module" 0 "^  [0-9a-f]{16}  k  params_module:cleanup_module\+0x0  hits=1 nmissed=0 \[GONE\]" \
    "$lp" lsmod -p "$pid"
"$lp" rmmod -p "$pid" states_module || fail "rmmod states_module"

# 7. 100 insmod/rmmod cycles of each sample: the descriptors and mappings come back.
"$lp" insmod -p "$pid" "$samples/kprobe_example.so" >/dev/null 2>&1 && "$lp" rmmod -p "$pid" kprobe_example
"$lp" insmod -p "$pid" "$samples/jprobe_example.so" >/dev/null 2>&1 && "$lp" rmmod -p "$pid" jprobe_example
# Mappings of files (a module left mapped) and executable anonymous ones (liveprobe's code pages)
# must come back exactly; the whole count is reported (malloc may map and unmap on its own).
maps_of() { awk '$6 ~ /^\// { f++ } $6 == "" && $2 ~ /x/ { x++ } END { printf "%d files, %d anonymous code", f, x }' /proc/"$1"/maps; }
fds0=$(ls /proc/"$pid"/fd | wc -l); maps0=$(maps_of "$pid"); all0=$(wc -l </proc/"$pid"/maps)
t0=$(date +%s%N); cycles=0
for i in $(seq 100); do
    for m in kprobe_example jprobe_example "kretprobe_example func=do_sys_open"; do
        set -- $m
        "$lp" insmod -p "$pid" "$samples/$1.so" "${@:2}" >/dev/null 2>&1 || { fail "cycle $i: insmod $m"; break 2; }
        "$lp" rmmod -p "$pid" "$1" || { fail "cycle $i: rmmod $1"; break 2; }
        cycles=$((cycles + 1))
    done
done
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
fds1=$(ls /proc/"$pid"/fd | wc -l); maps1=$(maps_of "$pid"); all1=$(wc -l </proc/"$pid"/maps)
if [ "$cycles" -eq 300 ] && [ "$fds1" -eq "$fds0" ] && [ "$maps1" = "$maps0" ]; then
    pass "300 insmod/rmmod cycles in $ms ms: $fds1 descriptors, mappings of $maps1, as before ($all0 -> $all1 in all)"
else fail "after $cycles cycles: descriptors $fds0 -> $fds1, mappings of $maps0 -> $maps1 ($all0 -> $all1 in all)"; fi
kill -0 "$pid" 2>/dev/null || fail "the target died"
output_unchanged kret

# 7b. A module's own thread inside its code: rmmod waits until it has left, or fails (EBUSY)
# after 5 s, naming the thread, and the module stays loaded.
expect "insmod threaded_module (spinning in its code)" 0 loaded "$lp" insmod -p "$pid" "$mods/threaded_module.so" spin=1
expect "rmmod waits for the thread to leave" 0 "^$" "$lp" rmmod -p "$pid" threaded_module
grep -q threaded_module.so /proc/"$pid"/maps && fail "threaded_module is still mapped"
expect "insmod threaded_module (in usleep, never stopped)" 0 loaded "$lp" insmod -p "$pid" "$mods/threaded_module.so" stop=0
expect "rmmod of a module whose thread stays (a return address into it)" 1 \
    "module threaded_module: its exit ran, but a thread stayed inside its code for 5 s \(thread [0-9]+ has a return address into it on its stack \(loop\+0x[0-9a-f]+\)\); it stays loaded" \
    "$lp" rmmod -p "$pid" threaded_module
expect "lsmod still lists it" 0 "^threaded_module " "$lp" lsmod -p "$pid"
expect "a module with an init and no exit cannot be unloaded" 1 "module no_exit has an init and no exit: it cannot be unloaded" \
    bash -c "'$lp' insmod -p $pid '$mods/no_exit.so' && '$lp' rmmod -p $pid no_exit"
expect "a C++ module" 0 "^cxx_module: sorted 1 2 3, min 2, mm set$" \
    bash -c "'$lp' insmod -p $pid '$mods/cxx_module.so' && sleep 0.3 && '$lp' rmmod -p $pid cxx_module && '$lp' dmesg -t -p $pid"
"$lp" dmesg -t -p "$pid" | grep -Eq "^cxx_module: sys_open hit in target \(pid $pid\)$" || fail "cxx_module's handler line"
expect "a strict C11 module" 0 "^strict_c11: sys_open 1 -1 $pid 1$" \
    bash -c "'$lp' insmod -p $pid '$mods/strict_c11.so' && '$lp' rmmod -p $pid strict_c11 && '$lp' dmesg -t -p $pid"

# 8. The target exits while insmod waits for the module's init.
start dying 0 20 || exit 1
"$lp" insmod -p "$pid" "$mods/slow_init.so" >"$tmp/dying.insmod" 2>&1 &
ins=$!
sleep 1; { kill -9 "$pid" && wait "$pid"; } 2>/dev/null
wait "$ins"; rc=$?
if [ "$rc" -eq 1 ] && grep -q "process $pid exited during insmod" "$tmp/dying.insmod"; then pass "target killed during insmod: $(cat "$tmp/dying.insmod" | tail -1)"
else fail "target killed during insmod: exit $rc:"; sed 's/^/    /' "$tmp/dying.insmod"; fi

# 9. insmod -- CMD: the program started with the module loaded; the tool exits with its status.
out=$("${launch[@]}" "$lp" insmod "$samples/kretprobe_example.so" func=sys_open -- "$target" 12 5 2>&1); rc=$?
if [ "$rc" -eq 0 ] && grep -q "loaded kretprobe_example" <<<"$out" && grep -q "^round 11: open ok" <<<"$out"; then
    pass "insmod -- target: $(echo "$out" | grep loaded)"
else fail "insmod -- target: exit $rc:"; echo "$out" | sed 's/^/    /'; fi
expect "insmod -- a program, with a bad parameter" 1 "unknown parameter 'fn'" \
    "${launch[@]}" "$lp" insmod "$samples/kretprobe_example.so" fn=sys_open -- "$target" 1000 5

expect "insmod -- a program that ends at once (the module is in before main)" 0 "loaded params_module in .* ms, before main" \
    "${launch[@]}" "$lp" insmod "$mods/params_module.so" count=5 -- /bin/true

# 10. build-module: a sample built by the tool loads and runs.
cp "$LIVEPROBE_SOURCE_DIR/samples/kretprobe_example.c" "$tmp/"
expect "build-module kretprobe_example.c" 0 "built $tmp/kret_built.so" \
    "$lp" build-module "$tmp/kretprobe_example.c" -o "$tmp/kret_built.so"
start built 0 20 || exit 1
"$lp" insmod -p "$pid" "$tmp/kret_built.so" func=sys_open >/dev/null 2>&1 || fail "insmod of the built module"
until_log "$pid" "^sys_open returned" && pass "the built module runs: $("$lp" dmesg -t -p "$pid" | head -1)" ||
    fail "the built module printed nothing"
expect "build-module of a file that does not compile" 1 "did not compile" \
    "$lp" build-module "$LIVEPROBE_SOURCE_DIR/README.md" -o "$tmp/bad.so"

echo "$failures failure(s)"
[ "$failures" -eq 0 ]
