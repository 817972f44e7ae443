#!/usr/bin/env bash
# Installs liveprobe into a temporary prefix and uses it as an outside program would:
# headers and library in place, pkg-config (cflags, libs, compatdir), a C11 program built with
# `cc $(pkg-config --cflags --libs liveprobe)`, and a CMake project using find_package(liveprobe).
# The program is examples/first_probe.c, README.md's "A first probe"; it exits 0 when its handler
# ran. Run by ctest with LIVEPROBE_SOURCE_DIR and LIVEPROBE_BINARY_DIR set.
set -uo pipefail

src=${LIVEPROBE_SOURCE_DIR:?LIVEPROBE_SOURCE_DIR is not set}
bin=${LIVEPROBE_BINARY_DIR:?LIVEPROBE_BINARY_DIR is not set}
cc=${CC:-cc}
cxx=${CXX:-c++}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/liveprobe-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
work=$tmp/work
mkdir -p "$work"

failures=0
pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
# check "what" command...: runs the command, output to a log shown on failure.
check() {
    local what=$1; shift
    local log=$work/log.$RANDOM
    if "$@" >"$log" 2>&1; then pass "$what"; else fail "$what"; sed 's/^/    /' "$log"; fi
}

# 1. Install.
if ! cmake --install "$bin" --prefix "$prefix" >"$work/install.log" 2>&1; then
    fail "cmake --install $bin --prefix $prefix"; sed 's/^/    /' "$work/install.log"
    echo "install test: FAILED"; exit 1
fi
pass "cmake --install into $prefix"

# 2. Files. The library directory is lib with a custom prefix; GNUInstallDirs may choose
# lib/<multiarch> or lib64 when the build was configured for /usr.
libdir=
for d in lib lib64 lib/x86_64-linux-gnu; do
    [ -e "$prefix/$d/libliveprobe.so" ] && { libdir=$prefix/$d; break; }
done
if [ -n "$libdir" ]; then pass "libliveprobe.so in ${libdir#"$prefix"/}"; else
    fail "libliveprobe.so not installed"; find "$prefix" | sed 's/^/    /'; echo "install test: FAILED"; exit 1
fi
check "libliveprobe.so.0 (soname link) installed" test -e "$libdir/libliveprobe.so.0"
check "include/liveprobe/kprobes.h installed" test -f "$prefix/include/liveprobe/kprobes.h"
check "include/liveprobe/compat/ installed" test -d "$prefix/include/liveprobe/compat"
check "include/liveprobe/liveprobe.hpp (C++ API) installed" test -f "$prefix/include/liveprobe/liveprobe.hpp"
check "no private header installed" bash -c "! find '$prefix/include' -name '*.hpp' | grep -vE '/liveprobe/(liveprobe|cxx/[a-z_]+)\.hpp$' | grep -q ."
check "liveprobeConfig.cmake installed" test -f "$libdir/cmake/liveprobe/liveprobeConfig.cmake"
# The man pages (one per command; man_pages_test.sh checks them) and the bash completion.
check "man pages installed, compressed (man1/liveprobe.1.gz, liveprobe-trace.1.gz)" \
    test -f "$prefix/share/man/man1/liveprobe.1.gz" -a -f "$prefix/share/man/man1/liveprobe-trace.1.gz"
check "bash completion installed (bash-completion/completions/liveprobe)" \
    bash -c "source '$prefix/share/bash-completion/completions/liveprobe' && complete -p liveprobe"

# 3. pkg-config.
export PKG_CONFIG_PATH=$libdir/pkgconfig
compatdir=$(pkg-config --variable=compatdir liveprobe 2>&1)
if [ "$compatdir" = "$prefix/include/liveprobe/compat" ]; then pass "pkg-config compatdir = $compatdir"
else fail "pkg-config --variable=compatdir liveprobe: got '$compatdir', want '$prefix/include/liveprobe/compat'"; fi
version=$(pkg-config --modversion liveprobe 2>&1)
want=$(sed -n 's/^project(liveprobe VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
if [ "$version" = "$want" ]; then pass "pkg-config --modversion = $version"
else fail "pkg-config --modversion liveprobe: got '$version', want '$want'"; fi
flags=$(pkg-config --cflags --libs liveprobe)

# Running what was built: in a sanitizer build the installed library is instrumented, and an
# uninstrumented program needs the sanitizer runtime loaded first.
run=()
if [ -n "${LIVEPROBE_SANITIZER_PRELOAD:-}" ]; then
    run=(env "LD_PRELOAD=${LIVEPROBE_SANITIZER_PRELOAD% }" ASAN_OPTIONS=detect_leaks=0)
fi

# 4. A C11 program built with pkg-config, then run: the handler must run.
example=$src/examples/first_probe.c
# shellcheck disable=SC2086
check "cc -std=c11 first_probe.c \$(pkg-config --cflags --libs liveprobe)" \
    "$cc" -std=c11 "$example" $flags -o "$work/first_probe"
check "first_probe (pkg-config build) runs, its handler ran" "${run[@]}" "$work/first_probe"
# shellcheck disable=SC2086
check "cc -std=c11 -O2 first_probe.c \$(pkg-config --cflags --libs liveprobe)" \
    "$cc" -std=c11 -O2 "$example" $flags -o "$work/first_probe_O2"
check "first_probe -O2 (pkg-config build) runs, its handler ran" "${run[@]}" "$work/first_probe_O2"

# 5. The public header is clean in strict C11 and in C++.
printf '#include <liveprobe/kprobes.h>\nint main(void) { struct kprobe kp = {0}; return kp.flags; }\n' \
    >"$work/header.c"
# shellcheck disable=SC2086
check "kprobes.h: cc -std=c11 -Wall -Wextra -pedantic -Werror" \
    "$cc" -std=c11 -Wall -Wextra -pedantic -Werror "$work/header.c" $flags -o "$work/header_c"
printf '#include <liveprobe/kprobes.h>\nint main() { kprobe kp{}; return static_cast<int>(kp.flags); }\n' \
    >"$work/header.cpp"
# shellcheck disable=SC2086
check "kprobes.h: c++ -std=c++17 -Wall -Wextra -Werror" \
    "$cxx" -std=c++17 -Wall -Wextra -Werror "$work/header.cpp" $flags -o "$work/header_cxx"

# 5b. README.md's C++ example, built with pkg-config as a C++20 program, then run: it times two
# calls and exits 0 when both were timed.
cxx_example=$src/examples/typed_probe.cpp
# shellcheck disable=SC2086
check "c++ -std=c++20 -Wall -Wextra -Werror typed_probe.cpp \$(pkg-config --cflags --libs liveprobe)" \
    "$cxx" -std=c++20 -Wall -Wextra -Werror "$cxx_example" $flags -o "$work/typed_probe"
check "typed_probe (pkg-config build) runs, both calls timed" "${run[@]}" "$work/typed_probe"
# shellcheck disable=SC2086
check "c++ -std=c++20 -O2 typed_probe.cpp \$(pkg-config --cflags --libs liveprobe)" \
    "$cxx" -std=c++20 -O2 "$cxx_example" $flags -o "$work/typed_probe_O2"
check "typed_probe -O2 (pkg-config build) runs, both calls timed" "${run[@]}" "$work/typed_probe_O2"

# 6. A CMake project: find_package(liveprobe REQUIRED) + liveprobe::liveprobe.
mkdir -p "$work/cmake-project"
cp "$example" "$work/cmake-project/first_probe.c"
cat >"$work/cmake-project/CMakeLists.txt" <<'EOF'
cmake_minimum_required(VERSION 3.16)
project(uses_liveprobe C)
find_package(liveprobe 0.1 REQUIRED)
add_executable(first_probe first_probe.c)
set_target_properties(first_probe PROPERTIES C_STANDARD 11 C_STANDARD_REQUIRED ON)
target_link_libraries(first_probe PRIVATE liveprobe::liveprobe)
liveprobe_add_module(kretprobe_example kretprobe_example.c)
EOF
cp "$src/samples/kretprobe_example.c" "$work/cmake-project/"
check "cmake configure with find_package(liveprobe) and -DCMAKE_PREFIX_PATH" \
    env -u PKG_CONFIG_PATH cmake -S "$work/cmake-project" -B "$work/cmake-build" -DCMAKE_PREFIX_PATH="$prefix"
check "cmake build against liveprobe::liveprobe" cmake --build "$work/cmake-build"
check "first_probe (CMake build) runs, its handler ran" "${run[@]}" "$work/cmake-build/first_probe"
check "liveprobe_add_module built kretprobe_example.so" test -f "$work/cmake-build/kretprobe_example.so"

# 7. A probe module built against the installed tree, with API.md's command and with the
# installed tool's build-module, then loaded into a running program by the installed tool.
export LIVEPROBE_RUNTIME_DIR=$work/run
# shellcheck disable=SC2086
check "cc -shared -fPIC kretprobe_example.c \$(pkg-config --cflags --libs liveprobe) -I\$(compatdir)" \
    "$cc" -shared -fPIC -o "$work/kretprobe_example.so" "$src/samples/kretprobe_example.c" $flags -I"$compatdir"
check "installed liveprobe build-module kprobe_example.c" \
    "$prefix/bin/liveprobe" build-module "$src/samples/kprobe_example.c" -o "$work/kprobe_example.so"
check "cc -O2 samples/target.c" "$cc" -O2 "$src/samples/target.c" -o "$work/target"
"${run[@]}" "$work/target" 0 20 >/dev/null 2>&1 &
target_pid=$!
trap 'kill -9 $target_pid 2>/dev/null || true; rm -rf "$tmp"' EXIT
sleep 0.3
check "installed liveprobe insmod -p PID kretprobe_example.so func=do_sys_open" \
    "$prefix/bin/liveprobe" insmod -p "$target_pid" "$work/kretprobe_example.so" func=do_sys_open
check "installed liveprobe insmod -p PID kprobe_example.so (built by build-module)" \
    "$prefix/bin/liveprobe" insmod -p "$target_pid" "$work/kprobe_example.so"
sleep 0.5
check "dmesg shows both modules' lines" bash -c "'$prefix/bin/liveprobe' dmesg -t -p $target_pid | grep -q '^do_sys_open returned' &&
    '$prefix/bin/liveprobe' dmesg -t -p $target_pid | grep -q '^pre_handler: p->addr=0x'"
check "installed liveprobe rmmod of both" bash -c "'$prefix/bin/liveprobe' rmmod -p $target_pid kretprobe_example &&
    '$prefix/bin/liveprobe' rmmod -p $target_pid kprobe_example"
{ kill -9 "$target_pid" && wait "$target_pid"; } 2>/dev/null
runq=; [ ${#run[@]} -gt 0 ] && runq=$(printf '%q ' "${run[@]}")
check "installed liveprobe insmod ... -- target: loaded before main" bash -c "$runq '$prefix/bin/liveprobe' insmod '$work/kretprobe_example.so' func=sys_open -- '$work/target' 3 5 2>&1 | grep -q 'loaded kretprobe_example in .* ms, before main'"

if [ "$failures" -eq 0 ]; then echo "install test: PASSED"; exit 0; fi
echo "install test: FAILED ($failures failure(s))"
exit 1
