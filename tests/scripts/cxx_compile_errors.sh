#!/usr/bin/env bash
# The C++ API refuses at compile time what it cannot do right, with a message that says why and
# what to do: each snippet below must fail to compile, and its error must carry the message.
# A control snippet must compile, so that a broken include path cannot pass as "refused".
set -uo pipefail
src=${LIVEPROBE_SOURCE_DIR:?LIVEPROBE_SOURCE_DIR is not set}
cxx=${CXX:-c++}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/liveprobe-cxxerr.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
failures=0

prelude='#include <liveprobe/liveprobe.hpp>
namespace lp = liveprobe;
struct Point { int x, y; };
struct Slot { long t; };
int f(int a, int b);
long double g(long double x);
int h(Point p);
int r(int &out);
void use(lp::Result<lp::Probe>);
'

compile() {  # compile NAME BODY: 0 if it compiles; its errors in $tmp/NAME.log
    printf '%s\nvoid test() {\n%s\n}\n' "$prelude" "$2" >"$tmp/$1.cpp"
    "$cxx" -std=c++20 -fsyntax-only -I"$src/include" "$tmp/$1.cpp" >"$tmp/$1.log" 2>&1
}

refused() {  # refused NAME MESSAGE BODY
    if compile "$1" "$3"; then
        echo "FAIL: $1 compiled"; failures=$((failures + 1))
    elif grep -qF -- "$2" "$tmp/$1.log"; then
        echo "PASS: $1 refused: $2"
    else
        echo "FAIL: $1 refused without \"$2\":"; grep -m5 error "$tmp/$1.log" | sed 's/^/    /'
        failures=$((failures + 1))
    fi
}

if compile control 'use(lp::probe(&f).on_entry([](int, int) {}).attach());
use(lp::probe(&g).on_return([](long double) {}).attach());
use(lp::probe(&r).on_entry([](auto &c) { c.template arg<0>() = 1; }).attach());'; then
    echo "PASS: control compiles"
else
    echo "FAIL: control does not compile:"; sed 's/^/    /' "$tmp/control.log" | head -20; exit 1
fi

refused undeclared_small_class "declare them with liveprobe::sysv::Eightbytes<T>" \
    'use(lp::probe(&h).on_entry([](Point) {}).attach());'
refused slot_without_return "with_slot is for return probes" \
    'use(lp::probe(&f).with_slot<Slot>().on_entry([](auto &, Slot &) {}).attach());'
refused no_handler "a typed probe needs on_entry or on_return" \
    'use(lp::probe(&f).attach());'
refused wrong_entry_handler "on_entry's handler must be callable" \
    'use(lp::probe(&f).on_entry([](const char *) {}).attach());'
refused wrong_return_handler "on_return's handler must be callable" \
    'use(lp::probe(&f).on_return([](const char *) {}).attach());'
refused skip_long_double "skip() cannot return a long double" \
    'use(lp::probe(&g).on_entry([](auto &c) { c.skip(1.0L); }).attach());'
refused set_reference_arg "a reference argument is changed through arg<I>()" \
    'int x = 0; use(lp::probe(&r).on_entry([&](auto &c) { c.template set_arg<0>(x); }).attach());'
refused arg_out_of_range "argument index out of range" \
    'use(lp::probe(&f).on_entry([](auto &c) { (void)c.template arg<2>(); }).attach());'
refused slot_too_big "a slot holds at most 4096 bytes" \
    'struct Huge { char b[5000]; }; use(lp::probe(&f).with_slot<Huge>().on_return([](int) {}).attach());'
refused untyped_pre_signature "pre handler is f(pt_regs&)" \
    'use(lp::kprobe("f").pre([](int) {}).attach());'

if [ "$failures" -eq 0 ]; then echo "C++ compile errors: PASSED"; exit 0; fi
echo "C++ compile errors: FAILED ($failures)"
exit 1
