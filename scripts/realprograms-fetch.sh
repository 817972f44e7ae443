#!/usr/bin/env bash
# The set-up of the real-program suite (tests/realprograms/): for each program (all of
# tests/realprograms/programs/*.sh, or those named), its Debian 12 source package fetched with
# `apt-get source` (a deb-src entry of our own is added when apt has none:
# /etc/apt/sources.list.d/liveprobe-src.sources, the deb entries' URIs and suites), its build
# dependencies installed (`apt-get build-dep --arch-only`), and the package built as Debian
# builds it (`debian/rules build-arch`, DEB_BUILD_OPTIONS from the program's file), in a cache
# outside the checkout: LIVEPROBE_REALPROGRAMS_CACHE, default /var/cache/liveprobe/realprograms
# (src/ the source packages, build/NAME the built trees). A build already there is kept (its
# stamp names the source version and options); RP_REBUILD=1 builds again.
#
#   scripts/realprograms-fetch.sh              # every program
#   scripts/realprograms-fetch.sh jq gawk      # these
# Needs root for apt (fetching works as any user once the packages and deb-src entry are there).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${LIVEPROBE_REALPROGRAMS_CACHE:-/var/cache/liveprobe/realprograms}
progdir=$root/tests/realprograms/programs
say() { printf 'realprograms-fetch: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

names=("$@")
if [ ${#names[@]} -eq 0 ]; then
    for f in "$progdir"/*.sh; do names+=("$(basename "$f" .sh)"); done
fi
mkdir -p "$cache/src" "$cache/build" "$cache/logs" || die "cannot create $cache"

as_root() { [ "$(id -u)" = 0 ] || die "$1: run as root (or have an administrator run scripts/realprograms-fetch.sh once)"; }
apt_updated=
apt_update() {
    [ -n "$apt_updated" ] && return 0
    say "apt-get update"
    apt-get update -q >"$cache/logs/apt-update.log" 2>&1 || die "apt-get update failed (see $cache/logs/apt-update.log)"
    apt_updated=1
}
# A deb-src entry for the same URIs and suites as the deb ones, when apt knows no source package.
ensure_deb_src() {
    local src=$1
    [ -n "$(apt-cache showsrc "$src" 2>/dev/null)" ] && return 0
    as_root "apt has no source index (no deb-src entry)"
    "$root/scripts/add-deb-src.sh" || die "apt has no source index, and none could be added"
    apt_updated=
    apt_update
    [ -n "$(apt-cache showsrc "$src" 2>/dev/null)" ] || die "still no source package $src after adding deb-src"
}
# The unpacked tree of source package SRC in $cache/src (fetched when missing).
source_tree() {
    local src=$1 dir log
    dir=$(find "$cache/src" -mindepth 1 -maxdepth 1 -type d -name "$src-[0-9]*" | sort -V | tail -n 1)
    if [ -z "$dir" ]; then
        ensure_deb_src "$src"
        log=$cache/logs/apt-source-$src.log
        say "apt-get source $src (in $cache/src)"
        if ! (cd "$cache/src" && apt-get source -q "$src") >"$log" 2>&1; then
            # The newest version's files may be missing on the mirror (a security update not
            # there yet): the other versions apt knows of, newest first.
            for v in $(apt-cache showsrc "$src" | awk '/^Version:/ { print $2 }' | sort -r -V); do
                say "apt-get source $src=$v"
                (cd "$cache/src" && apt-get source -q "$src=$v") >>"$log" 2>&1 && break
            done
        fi
        dir=$(find "$cache/src" -mindepth 1 -maxdepth 1 -type d -name "$src-[0-9]*" | sort -V | tail -n 1)
        [ -n "$dir" ] || die "apt-get source $src failed: $(grep -E '^(E|W):' "$log" | tail -n 3)"
    fi
    echo "$dir"
}

for name in "${names[@]}"; do
    f=$progdir/$name.sh
    [ -f "$f" ] || die "no program '$name' (no $f)"
    RP_SOURCE='' RP_DEB_OPTIONS='' RP_BUILT=''
    unset -f rp_build_extra
    # shellcheck source=/dev/null
    . "$f"
    src=$(source_tree "$RP_SOURCE")
    version=$(dpkg-parsechangelog -l "$src/debian/changelog" -S Version)
    stamp="$RP_SOURCE $version DEB_BUILD_OPTIONS=$RP_DEB_OPTIONS"
    out=$cache/build/$name
    if [ -z "${RP_REBUILD:-}" ] && [ -e "$out/$RP_BUILT" ] && [ "$(cat "$out/.rp-stamp" 2>/dev/null)" = "$stamp" ]; then
        say "$name: built ($stamp)"
        continue
    fi
    if ! (cd "$src" && dpkg-checkbuilddeps -B) >"$cache/logs/checkbuilddeps-$name.log" 2>&1; then
        as_root "$name's build dependencies are missing ($(sed -n 's/.*Unmet build dependencies: //p' "$cache/logs/checkbuilddeps-$name.log"))"
        ensure_deb_src "$RP_SOURCE"
        apt_update
        say "apt-get build-dep --arch-only $RP_SOURCE"
        DEBIAN_FRONTEND=noninteractive apt-get build-dep --arch-only -y -q "$RP_SOURCE" \
            >"$cache/logs/build-dep-$name.log" 2>&1 ||
            die "apt-get build-dep $RP_SOURCE failed: $(tail -n 3 "$cache/logs/build-dep-$name.log")"
    fi
    log=$cache/logs/build-$name.log
    say "$name: building $RP_SOURCE $version in $out (debian/rules build-arch, DEB_BUILD_OPTIONS=$RP_DEB_OPTIONS; log: $log)"
    rm -rf "$out"
    cp -a "$src" "$out"
    t0=$(date +%s)
    (cd "$out" && DEB_BUILD_OPTIONS="$RP_DEB_OPTIONS" debian/rules build-arch) >"$log" 2>&1 ||
        die "$name: the build failed: $(tail -n 5 "$log") (full log: $log)"
    # What Debian's test run would build besides (the program's file says, where it does).
    if declare -F rp_build_extra >/dev/null; then
        (cd "$out" && rp_build_extra) >>"$log" 2>&1 || die "$name: building its tests failed: $(tail -n 5 "$log") (full log: $log)"
    fi
    [ -e "$out/$RP_BUILT" ] || die "$name: no $RP_BUILT after the build (see $log)"
    echo "$stamp" >"$out/.rp-stamp"
    say "$name: built in $(($(date +%s) - t0)) s"
done
