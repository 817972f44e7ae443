#!/usr/bin/env bash
# Installs the Debian 12 packages liveprobe needs to build and test, if any is missing.
# Run as root it installs them with apt-get; otherwise it names them and fails.
# The chaos suite's servers and load generators (tests/chaos/) come from Debian too: nginx with
# wrk, memcached with the suite's own loader in perl (memcslap's keys are new at each run, so
# memcached's memory grows until it evicts, and it checks no value), and ps. They are installed
# without their recommends and without starting the system's instances: the suite runs private
# ones on loopback ports of its own, and a system nginx or memcached left running would hold
# ports 80 and 11211 for nothing.
# The HTML report's test (tests/scripts/html_report_test.sh) opens its page in headless Chromium:
# installed the same way, without its recommends (a desktop's fonts and themes it does not need).
set -euo pipefail
pkgs=(build-essential cmake pkg-config libzydis-dev libzycore-dev libelf-dev libdw-dev
      libfmt-dev libcli11-dev googletest libgtest-dev libgmock-dev libbenchmark-dev libunwind-dev gdb
      libmicrohttpd-dev python3-prometheus-client curl  # trace --serve: its server; its tests scrape it
      clang libclang-rt-14-dev)  # make fuzz: libFuzzer
servers=(nginx-light wrk memcached perl procps
         chromium  # report --html's test: a browser, headless
         prometheus)  # trace --serve's test: a private Prometheus scrapes it
# ---- The real-program suite (tests/realprograms/, issue 31 item 8) -----------------------------
# Programs nobody here wrote, built from their Debian 12 source packages as Debian builds them
# (scripts/realprograms-fetch.sh fetches them with `apt-get source` and builds them into a cache):
# the tools to build Debian packages, and the build dependencies of each program (the source
# packages' Build-Depends and Build-Depends-Arch, as `apt-get build-dep --arch-only` installs
# them), named here so that tests find them installed and never install anything themselves.
# The sources need a deb-src entry: added below (liveprobe-src.sources) when apt has none.
realprograms=(dpkg-dev debhelper fakeroot
    autoconf automake libtool gettext autopoint po4a                      # xz-utils
    bison flex libonig-dev rake ruby-ronn valgrind                        # jq
    cmake googletest                                                      # fmtlib
    autotools-dev libmpfr-dev libreadline-dev libsigsegv-dev locales-all  # gawk
    help2man liblz4-dev liblzma-dev zlib1g-dev less python3)              # zstd (libzstd)
pkgs+=("${realprograms[@]}")
# ---- The Debian packages (make deb, tests/packaging/deb_test.sh in make torture) ---------------
# CPack's DEB generator runs file, dpkg-shlibdeps (dpkg-dev, above), objcopy and readelf
# (binutils); lintian checks the packages; mmdebstrap makes the scratch Debian 12 root the test
# installs them into (never the machine itself), fetching its packages from the mirrors apt uses.
pkgs+=(file binutils lintian mmdebstrap)
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }
missing=() missing_servers=()
for p in "${pkgs[@]}"; do installed "$p" || missing+=("$p"); done
for p in "${servers[@]}"; do installed "$p" || missing_servers+=("$p"); done
# `apt-get source` (scripts/realprograms-fetch.sh) needs a deb-src entry: the deb entries' URIs
# and suites, in a file of our own, when apt has no source index at all.
deb_src=
if ! grep -rqs -E '^(Types:.*deb-src|deb-src )' /etc/apt/sources.list /etc/apt/sources.list.d/; then
  deb_src=1
fi
[ ${#missing[@]} -eq 0 ] && [ ${#missing_servers[@]} -eq 0 ] && [ -z "$deb_src" ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  [ -z "$deb_src" ] || echo "liveprobe: apt has no deb-src entry (the real-program suite fetches Debian sources)" >&2
  echo "liveprobe: missing Debian packages: ${missing[*]} ${missing_servers[*]}" >&2
  echo "liveprobe: run as root, or: sudo apt-get install -y ${missing[*]}" \
       "&& sudo apt-get install -y --no-install-recommends ${missing_servers[*]}" >&2
  exit 1
fi
if [ -n "$deb_src" ]; then
  "$(dirname "${BASH_SOURCE[0]}")/add-deb-src.sh" ||
    echo "liveprobe: the real-program suite cannot fetch sources" >&2
fi
[ ${#missing[@]} -eq 0 ] && [ ${#missing_servers[@]} -eq 0 ] && { apt-get update -qq; exit 0; }
echo "liveprobe: installing ${missing[*]} ${missing_servers[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
# No service starts during the install: invoke-rc.d asks /usr/sbin/policy-rc.d, and 101 is
# "action forbidden". One already there (a container's) is left as it is; ours is removed after.
policy=/usr/sbin/policy-rc.d
own_policy=
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\n# scripts/deps.sh: no service starts while liveprobe installs its packages\nexit 101\n' >"$policy"
  chmod 755 "$policy"
  own_policy=1
fi
trap '[ -z "$own_policy" ] || rm -f "$policy"' EXIT
apt-get update -qq
[ ${#missing[@]} -eq 0 ] || apt-get install -y -qq "${missing[@]}"
[ ${#missing_servers[@]} -eq 0 ] || apt-get install -y -qq --no-install-recommends "${missing_servers[@]}"
# Where a service installed now started all the same (an init that does not ask policy-rc.d),
# stop it and keep it from starting at boot. A service that was there before this run is the
# machine owner's: left alone.
for svc in nginx memcached prometheus; do
  case " ${missing_servers[*]} " in *" $svc "*|*" $svc-light "*) ;; *) continue ;; esac
  if command -v systemctl >/dev/null && [ -d /run/systemd/system ]; then
    systemctl disable --now "$svc" >/dev/null 2>&1 || true
  else
    update-rc.d "$svc" disable >/dev/null 2>&1 || true
    if [ -x "/etc/init.d/$svc" ]; then "/etc/init.d/$svc" stop >/dev/null 2>&1 || true; fi
  fi
done
