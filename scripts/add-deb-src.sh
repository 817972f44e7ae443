#!/usr/bin/env bash
# Adds a deb-src entry for the same URIs and suites as apt's deb entries, in a file of
# liveprobe's own, so that `apt-get source` works (scripts/deps.sh, scripts/realprograms-fetch.sh,
# bench/trace_vs_uftrace.sh call it when apt has no source index). Says which file it writes;
# fails, saying why, when there is no deb entry to make one from. Run as root. The argument, for
# a test, is apt's directory (default /etc/apt). It does not run apt-get update.
set -euo pipefail
apt=${1:-/etc/apt}
if [ -f "$apt/sources.list.d/debian.sources" ]; then
    echo "liveprobe: adding $apt/sources.list.d/liveprobe-src.sources (deb-src, from debian.sources)" >&2
    sed 's/^Types:.*/Types: deb-src/' "$apt/sources.list.d/debian.sources" >"$apt/sources.list.d/liveprobe-src.sources"
elif [ -f "$apt/sources.list" ] && grep -q '^deb ' "$apt/sources.list"; then
    echo "liveprobe: adding $apt/sources.list.d/liveprobe-src.list (deb-src, from sources.list)" >&2
    sed -n 's/^deb /deb-src /p' "$apt/sources.list" >"$apt/sources.list.d/liveprobe-src.list"
else
    echo "liveprobe: no $apt/sources.list.d/debian.sources nor deb lines in $apt/sources.list to make a deb-src entry from" >&2
    exit 1
fi
