#!/usr/bin/env bash
# liveprobe leaves no child in the program (a trial on a threaded program found one): a
# threaded program traced from its start (-- CMD), and attached to (-p), asks for any child
# with waitpid(-1, __WALL|WNOHANG) and must find none (tests/programs/wall_target.c).
source "$(dirname "${BASH_SOURCE[0]}")/../support/script_common.sh" own_children
target=$bin/tests/lp_wall_target
for mode in --count --hist ''; do
    "${launch[@]}" "$lp" trace $mode work -- "$target" >"$tmp/out" 2>&1; rc=$?
    if [ "$rc" -eq 0 ] && grep -q 'waitpid(-1, __WALL|WNOHANG) = -1 (No child processes)' "$tmp/out"; then
        pass "trace ${mode:-(events)} -- CMD: the program finds no child"
    else fail "trace ${mode:-(events)} -- CMD: exit $rc:"; sed 's/^/    /' "$tmp/out"; fi
done
echo "$failures failure(s)"
[ "$failures" -eq 0 ]
