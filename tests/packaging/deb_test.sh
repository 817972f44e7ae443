#!/usr/bin/env bash
# The Debian packages of `make deb` installed, used and removed in a scratch Debian 12 root,
# never on this machine (where an installed libliveprobe.so.0 would then shadow the build's):
#  1. a minimal bookworm root (mmdebstrap, variant apt, with gcc and pkgconf to build programs
#     against liveprobe-dev), made once and cached as a tarball;
#  2. the root's file list; liveprobe and liveprobe-dev installed with apt-get, which fetches
#     their dependencies (the Depends dpkg-shlibdeps computed must be enough);
#  3. the installed files: ELF files stripped, the library's exports those of
#     src/liveprobe.map (tests/scripts/exports_test.sh), liveprobe-dev's files there;
#  4. liveprobe --version; trace --count of a program built in the root; attach, status and
#     detach of a running one (the injector finds the agent's entry in the stripped library);
#     README.md's first probe built with `cc $(pkg-config --cflags --libs liveprobe)` and run;
#     then liveprobe-dbgsym installed, its debug files at the build IDs, and the same again;
#  5. apt-get purge of the three and autoremove of what they pulled in: the root's file list
#     must be the one of step 2, apt's and dpkg's own records aside.
# Usage (as root): deb_test.sh DEBDIR -- DEBDIR holds liveprobe_*.deb, liveprobe-dev_*.deb and
# liveprobe-dbgsym_*.deb. The base root is cached in LIVEPROBE_DEB_ROOT_CACHE (default
# $LIVEPROBE_REALPROGRAMS_CACHE, else /var/cache/liveprobe); the Debian mirror is the one apt
# uses here (/etc/apt/sources.list.d/debian.sources), or LIVEPROBE_DEB_MIRROR.
set -uo pipefail

debdir=$(cd "${1:?usage: deb_test.sh DEBDIR}" && pwd) || exit 1
src=${LIVEPROBE_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
if [ "$(id -u)" -ne 0 ]; then
    echo "deb test: FAILED: needs root (chroot, mount); run it as root (make torture-deb)" >&2
    exit 1
fi
for tool in mmdebstrap chroot mount readelf; do
    command -v "$tool" >/dev/null || { echo "deb test: FAILED: $tool is missing (scripts/deps.sh)" >&2; exit 1; }
done
debs=()
for p in liveprobe liveprobe-dev liveprobe-dbgsym; do
    f=$(ls "$debdir/${p}_"*_amd64.deb 2>/dev/null | head -1)
    [ -n "$f" ] || { echo "deb test: FAILED: no ${p}_*_amd64.deb in $debdir (make deb)" >&2; exit 1; }
    debs+=("$f")
done
version=$(dpkg-deb -f "${debs[0]}" Version)

failures=0
pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# ---- 1. The base root, cached --------------------------------------------------------------
cache=${LIVEPROBE_DEB_ROOT_CACHE:-${LIVEPROBE_REALPROGRAMS_CACHE:-/var/cache/liveprobe}}
include=gcc,libc6-dev,pkgconf
base=$cache/deb-test-bookworm-apt-$(echo "$include" | tr ',' '-').tar
mkdir -p "$cache"
if [ ! -s "$base" ]; then
    mirror=${LIVEPROBE_DEB_MIRROR:-/etc/apt/sources.list.d/debian.sources}
    echo "deb test: making the base root (once; cached as $base)"
    # No device nodes in the tarball (a container may not allow mknod): /dev is bind-mounted.
    # Made under another name (mmdebstrap takes the format from the extension), then renamed:
    # an interrupted run leaves no partial base behind to be taken for a whole one.
    part=${base%.tar}.part.tar
    if ! mmdebstrap --quiet --variant=apt --include="$include" --skip=output/mknod bookworm \
            "$part" "$mirror" >"$cache/deb-test-mmdebstrap.log" 2>&1; then
        cat "$cache/deb-test-mmdebstrap.log" >&2
        rm -f "$part"
        echo "deb test: FAILED: mmdebstrap could not make the base root" >&2
        exit 1
    fi
    mv "$part" "$base"
fi

root=$(mktemp -d "${TMPDIR:-/tmp}/liveprobe-deb-root.XXXXXX")
before=$root.before  # the root's file list before the install
# Unmounted before anything is removed; a root still holding a mount is left in place (and
# named) rather than removed through it.
cleanup() {
    for m in proc dev; do
        if mountpoint -q "$root/$m"; then umount "$root/$m" 2>/dev/null || umount -l "$root/$m"; fi
    done
    if grep -q " $root/" /proc/self/mounts; then
        echo "deb test: $root still holds mounts: left in place" >&2
    else
        rm -rf --one-file-system "$root"
    fi
    rm -f "$before"
}
trap cleanup EXIT
tar -C "$root" -xf "$base" || { echo "deb test: FAILED: cannot unpack $base" >&2; exit 1; }
mount -t proc proc "$root/proc" && mount --bind /dev "$root/dev" ||
    { echo "deb test: FAILED: cannot mount /proc and /dev in $root" >&2; exit 1; }
cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
in_root() { chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
    LIVEPROBE_RUNTIME_DIR=/tmp/lp-run DEBIAN_FRONTEND=noninteractive "$@"; }
log=$root/tmp/step.log
# check "what" command...: run in the root, its output shown on failure.
check() {
    local what=$1; shift
    if in_root "$@" >"$log" 2>&1; then pass "$what"; else fail "$what"; sed 's/^/    /' "$log"; fi
}

# The root's files, apt's and dpkg's records and caches aside (they change with any install).
file_list() {
    (cd "$root" && find . -xdev \( -path ./proc -o -path ./dev -o -path ./tmp -o -path ./root \
        -o -path ./var/cache -o -path ./var/lib/apt -o -path ./var/lib/dpkg -o -path ./var/log \
        -o -path ./etc/ld.so.cache \) -prune -o -print) | sort
}

# ---- 2. Install (without the debug package first: a user's usual install) -------------------
file_list >"$before"
mkdir -p "$root/tmp/debs"
mkdir -m 700 "$root/tmp/lp-run"  # the runtime directory must be private to its user
cp "${debs[@]}" "$root/tmp/debs/"
if ! in_root apt-get update -qq >"$log" 2>&1; then
    fail "apt-get update in the root"; sed 's/^/    /' "$log"; echo "deb test: FAILED"; exit 1
fi
# install_debs DEB...: apt-get install of local packages, in the root; fatal when it fails.
install_debs() {
    local names=() f
    for f in "$@"; do names+=("./tmp/debs/$(basename "$f")"); done
    if in_root sh -c "cd / && apt-get install -y -q --no-install-recommends ${names[*]}" >"$log" 2>&1; then
        pass "apt-get install ${names[*]##*/} (dependencies from the archive)"
    else
        fail "apt-get install ${names[*]##*/}"; sed 's/^/    /' "$log"; echo "deb test: FAILED"; exit 1
    fi
}
install_debs "${debs[0]}" "${debs[1]}"

# ---- 3. The installed files ----------------------------------------------------------------
elves=$(in_root dpkg -L liveprobe | while read -r f; do
    [ -f "$root$f" ] && [ ! -L "$root$f" ] && head -c4 "$root$f" | grep -q 'ELF' && echo "$f"; done)
[ -n "$elves" ] && pass "liveprobe installs ELF files: $(echo $elves)" || fail "liveprobe installs no ELF file"
for f in $elves; do
    if readelf -S "$root$f" | grep -qE ' \.(symtab|debug_info) '; then fail "$f is not stripped"
    else pass "$f stripped (no .symtab, no .debug_info)"; fi
done
lib=$(in_root dpkg -L liveprobe | grep '/libliveprobe\.so\.0$' | head -1)
if [ -n "$lib" ] && bash "$src/tests/scripts/exports_test.sh" "$root$lib" "$src/src/liveprobe.map" >"$log" 2>&1; then
    pass "$lib exports what src/liveprobe.map says"
else fail "$lib's exports"; sed 's/^/    /' "$log"; fi
check "liveprobe-dev has the headers, the .so link, liveprobe.pc and the CMake package" sh -c \
    'dpkg -L liveprobe-dev | grep -q /usr/include/liveprobe/kprobes.h &&
     dpkg -L liveprobe-dev | grep -q "/libliveprobe\.so$" &&
     dpkg -L liveprobe-dev | grep -q "/pkgconfig/liveprobe\.pc$" &&
     dpkg -L liveprobe-dev | grep -q "/cmake/liveprobe/liveprobeConfig\.cmake$"'
check "liveprobe has the man pages, the bash completion, the metrics service and its example" sh -c \
    'dpkg -L liveprobe | grep -q "/man1/liveprobe-trace\.1\(\.gz\)\?$" &&
     dpkg -L liveprobe | grep -q "/bash-completion/completions/liveprobe$" &&
     dpkg -L liveprobe | grep -q "/examples/metrics-nginx\.toml$" &&
     grep -q "^ExecStart=/usr/bin/liveprobe trace --config /etc/liveprobe/metrics/%i.toml$" \
         /usr/lib/systemd/system/liveprobe-metrics@.service /lib/systemd/system/liveprobe-metrics@.service 2>/dev/null'

# ---- 4. Use, without the debug files, then with them ---------------------------------------
if in_root liveprobe --version >"$log" 2>&1 && grep -q "$version" "$log"; then
    pass "liveprobe --version: $(head -1 "$log")"
else fail "liveprobe --version (want $version)"; sed 's/^/    /' "$log"; fi

cat >"$root/tmp/counted.c" <<'PROGRAM'
#include <unistd.h>
__attribute__((noinline)) int counted_leaf(int i) { return i * 3; }
int main(int argc, char **argv) {
    volatile int sum = 0;
    for (int i = 0; i < 1000; ++i) sum += counted_leaf(i);
    if (argc > 1) for (;;) { sum += counted_leaf(1); usleep(1000); }   /* for attach */
    (void)argv;
    return sum == 1498500 ? 0 : 1;
}
PROGRAM
check "a program built in the root" gcc -O1 -g -o /tmp/counted /tmp/counted.c
cp "$src/examples/first_probe.c" "$root/tmp/first_probe.c"
check "examples/first_probe.c built against liveprobe-dev with pkg-config" \
    sh -c 'cc -O1 -o /tmp/first_probe /tmp/first_probe.c $(pkg-config --cflags --libs liveprobe)'

# uses WHEN: trace --count of a program it starts, attach/status/detach of a running one (the
# injector looks the agent's entry up in the stripped library), and the first probe.
uses() {
    local when=$1 runner pid
    if in_root liveprobe trace --count 'counted_*' -- /tmp/counted >"$log" 2>&1 &&
            grep -qE '^counted_leaf +1000$' "$log"; then
        pass "liveprobe trace --count ($when): counted_leaf 1000"
    else fail "liveprobe trace --count 'counted_*' -- /tmp/counted ($when)"; sed 's/^/    /' "$log"; fi

    in_root /tmp/counted forever >/dev/null 2>&1 &
    runner=$!
    sleep 0.3
    pid=$(pgrep -n -f '^/tmp/counted forever$')
    if [ -n "$pid" ]; then
        check "liveprobe attach -p PID ($when)" liveprobe attach -p "$pid"
        if in_root liveprobe status -p "$pid" >"$log" 2>&1 && grep -q "$version" "$log"; then
            pass "liveprobe status -p PID names the agent's version ($when)"
        else fail "liveprobe status -p PID ($when)"; sed 's/^/    /' "$log"; fi
        check "liveprobe detach -p PID ($when)" liveprobe detach -p "$pid"
        kill "$pid" 2>/dev/null
    else fail "the program to attach to did not start ($when)"; fi
    wait "$runner" 2>/dev/null
    check "examples/first_probe runs its handler ($when)" /tmp/first_probe
}
uses "no debug files"

install_debs "${debs[2]}"
for f in $elves; do
    id=$(readelf -n "$root$f" 2>/dev/null | sed -n 's/.*Build ID: \([0-9a-f]*\).*/\1/p')
    dbg=/usr/lib/debug/.build-id/${id:0:2}/${id:2}.debug
    if [ -n "$id" ] && [ -f "$root$dbg" ] && readelf -S "$root$dbg" 2>/dev/null | grep -q ' \.debug_info '; then
        pass "$f's debug information in liveprobe-dbgsym ($dbg)"
    else fail "$f has no debug file at its build ID ($dbg)"; fi
done
uses "with liveprobe-dbgsym"

# ---- 5. Remove -----------------------------------------------------------------------------
check "apt-get purge liveprobe liveprobe-dev liveprobe-dbgsym" \
    apt-get purge -y -q liveprobe liveprobe-dev liveprobe-dbgsym
check "apt-get autoremove --purge (the dependencies they pulled in)" apt-get autoremove --purge -y -q
rm -rf "$root/tmp/"* 2>/dev/null
left=$(diff "$before" <(file_list) | grep '^[<>]')
if [ -z "$left" ]; then pass "the root's $(wc -l <"$before") files are those before the install"
else fail "the root's files differ from those before the install (> left, < gone):"; echo "$left" | sed 's/^/    /' | head -40; fi

if [ "$failures" -eq 0 ]; then echo "deb test: OK"; exit 0; fi
echo "deb test: $failures FAILED"
exit 1
