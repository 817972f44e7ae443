#!/usr/bin/env bash
# make deb: the Debian packages of a built tree (docs/packaging.md), into BUILD/deb/:
# liveprobe_VERSION_amd64.deb, liveprobe-dev_VERSION_amd64.deb, liveprobe-dbgsym_VERSION_amd64.deb.
# CPack makes them (cmake/packaging.cmake); lintian, when installed, checks them.
# Usage: scripts/make-deb.sh BUILD
set -euo pipefail
build=$(cd "${1:?usage: make-deb.sh BUILD}" && pwd)
out=$build/deb
rm -rf "$out" "$build/_CPack_Packages"
log=$build/cpack-deb.log
if ! (cd "$build" && cpack -G DEB --config CPackConfig.cmake) >"$log" 2>&1; then
    cat "$log" >&2
    echo "liveprobe: cpack failed (log: $log)" >&2
    exit 1
fi
# CPack names the debug package .ddeb, Ubuntu's name for it; Debian's dbgsym packages are
# ordinary .deb files, which apt takes by that name only. CMake 3.25 writes its md5sums with the
# build's absolute paths: rewritten, relative to the root as dpkg expects. The debug sections
# are compressed, as Debian's dh_strip does (gdb and elfutils read them so): a third the size.
for f in "$out"/*.ddeb; do
    [ -e "$f" ] || continue
    tree=$build/_CPack_Packages/dbgsym-fix
    rm -rf "$tree"
    dpkg-deb -R "$f" "$tree"
    find "$tree/usr/lib/debug" -type f -name '*.debug' -exec objcopy --compress-debug-sections {} \;
    size=$(du -sk --exclude=DEBIAN "$tree" | cut -f1)
    sed -i "s/^Installed-Size: .*/Installed-Size: $size/" "$tree/DEBIAN/control"
    (cd "$tree" && find usr -type f -print0 | sort -z | xargs -0 md5sum) >"$tree/DEBIAN/md5sums"
    dpkg-deb --root-owner-group -Zxz -b "$tree" "${f%.ddeb}.deb" >/dev/null
    rm -rf "$tree" "$f"
done
ls "$out"/*.deb >/dev/null
if command -v lintian >/dev/null; then
    # Tags this project accepts, each with its reason (docs/packaging.md, "lintian").
    lintian --fail-on error --suppress-tags-from-file "$(dirname "$0")/lintian-overrides" \
        "$out"/*.deb || { echo "liveprobe: lintian found errors in the packages" >&2; exit 1; }
else
    echo "liveprobe: lintian is not installed (scripts/deps.sh installs it): packages not checked" >&2
fi
for f in "$out"/*.deb; do
    printf '%s  %s\n' "$(du -h "$f" | cut -f1)" "${f#"$PWD"/}"
done
