#!/usr/bin/env bash
# Installs the Debian 12 packages liveprobe needs to build and test, if any is missing.
# Run as root it installs them with apt-get; otherwise it names them and fails.
set -euo pipefail
pkgs=(build-essential cmake pkg-config libzydis-dev libzycore-dev libelf-dev libdw-dev
      libfmt-dev libcli11-dev googletest libgtest-dev libgmock-dev libbenchmark-dev libunwind-dev gdb)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "liveprobe: missing Debian packages: ${missing[*]}" >&2
  echo "liveprobe: run as root, or: sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
echo "liveprobe: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq "${missing[@]}"
