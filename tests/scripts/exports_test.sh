#!/usr/bin/env bash
# The libraries' dynamic symbol tables against their version scripts, both ways: every name the
# script exports is defined and exported (nothing missing), nothing else is (nothing extra), and
# no symbol of the C++ standard library is among them (a program's instantiations of the same
# templates would otherwise bind to the library's, or the library's to the program's).
# src/liveprobe.map is the one list of libliveprobe.so's exports; docs/packaging.md says why
# each name is there.
# Usage: exports_test.sh [LIBRARY [MAP]] -- by default the build's libliveprobe.so.0 and
# libliveprobe-start.so (LIVEPROBE_BINARY_DIR) against src/liveprobe.map and
# src/preload/liveprobe-start.map (LIVEPROBE_SOURCE_DIR); a library given alone is checked
# against src/liveprobe.map (an installed or a packaged one: the check reads only .dynsym, which
# stripping keeps).
set -uo pipefail

src=${LIVEPROBE_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
bin=${LIVEPROBE_BINARY_DIR:-$PWD}
if [ $# -ge 1 ]; then
    pairs=("$1" "${2:-$src/src/liveprobe.map}")
else
    pairs=("$bin/src/libliveprobe.so.0" "$src/src/liveprobe.map"
           "$bin/src/libliveprobe-start.so" "$src/src/preload/liveprobe-start.map")
fi

failures=0
pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# The names of a version script's global: part, one a line, sorted.
script_names() {
    sed 's/#.*//' "$1" | tr -s ' \t\n' '\n' |
        awk '/^global:$/ {on = 1; next} /^local:$/ {on = 0} on && /;$/ {sub(/;$/, ""); print}' | sort -u
}
# The names a library defines in its dynamic symbol table (without @VERSION), one a line, sorted.
exported_names() { nm -D --defined-only "$1" | awk 'NF >= 3 {sub(/@.*/, "", $3); print $3}' | sort -u; }

check_library() {
    local lib=$1 map=$2 name
    name=$(basename "$lib")
    if [ ! -e "$lib" ]; then fail "$lib does not exist (build it first)"; return; fi
    if [ ! -f "$map" ]; then fail "$map does not exist"; return; fi
    local want got
    want=$(script_names "$map")
    got=$(exported_names "$lib")
    if [ -z "$want" ]; then fail "$map names no symbol"; return; fi
    if [ -z "$got" ]; then fail "nm -D --defined-only $lib gave no symbol"; return; fi

    # The C++ standard library, mangled (std:: is St, __gnu_cxx a plain name) or demangled.
    local std
    std=$(printf '%s\n' "$got" | grep -E '^_Z.*(St[0-9a-z_]|9__gnu_cxx|__cxx11)' ;
          printf '%s\n' "$got" | grep '^_Z' | c++filt | grep -E '(^|[^a-z_])(std|__gnu_cxx)::')
    std=$(printf '%s\n' "$std" | sed '/^$/d' | sort -u)
    if [ -z "$std" ]; then pass "$name exports no std:: or __gnu_cxx symbol"
    else
        fail "$name exports $(printf '%s\n' "$std" | grep -c '^_Z') C++ standard library symbols:"
        printf '%s\n' "$std" | grep '^_Z' | c++filt | cut -c1-160 | sed 's/^/    /' | head -50
    fi

    local missing extra
    missing=$(comm -23 <(printf '%s\n' "$want") <(printf '%s\n' "$got"))
    extra=$(comm -13 <(printf '%s\n' "$want") <(printf '%s\n' "$got"))
    if [ -z "$missing" ]; then pass "$name exports all $(printf '%s\n' "$want" | wc -l) names of $(basename "$map")"
    else fail "$name does not export, though $(basename "$map") names them:"; printf '    %s\n' $missing; fi
    if [ -z "$extra" ]; then pass "$name exports nothing $(basename "$map") does not name"
    else
        fail "$name exports $(printf '%s\n' "$extra" | wc -l) names $(basename "$map") does not have:"
        printf '%s\n' "$extra" | c++filt | cut -c1-160 | sed 's/^/    /' | head -50
    fi
}

for ((i = 0; i < ${#pairs[@]}; i += 2)); do check_library "${pairs[i]}" "${pairs[i + 1]}"; done
if [ "$failures" -eq 0 ]; then echo "exports test: OK"; exit 0; fi
echo "exports test: $failures FAILED"
exit 1
