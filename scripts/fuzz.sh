#!/usr/bin/env bash
# make fuzz (issue 32, item 4): builds each fuzz harness (tests/fuzz/fuzz_NAME.cpp) with clang's
# libFuzzer, AddressSanitizer and UndefinedBehaviorSanitizer, from the sources it exercises
# only, and runs it for FUZZ_SECONDS (60) on its corpus, tests/fuzz/corpus/NAME, which grows
# there (commit what it adds: `make test` replays it). A crash stops that harness; its input is
# left in build/fuzz/crashes/NAME, to be fixed and then added to the corpus.
#   scripts/fuzz.sh [NAME ...]      (the names: spec filter trace_file printk request module_params relocate; all by default)
set -euo pipefail
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${FUZZ_BUILD:-$src/build/fuzz}
secs=${FUZZ_SECONDS:-60}
cxx=${FUZZ_CXX:-clang++}
if [ "${1:-}" = -h ] || [ "${1:-}" = --help ]; then sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 0; fi
command -v "$cxx" >/dev/null || { echo "fuzz: $cxx is missing (scripts/deps.sh installs clang)" >&2; exit 1; }
declare -A sources=(
    [spec]="src/trace/spec.cpp src/trace/value_type.cpp src/arch/x86_64/value_home.cpp"
    [filter]="src/trace/filter.cpp src/trace/spec.cpp src/trace/value_type.cpp src/arch/x86_64/value_home.cpp"
    [printk]="src/agent/printk_format.cpp"
    [module_params]="src/agent/module_params.cpp"
    [request]="src/agent/channel.cpp src/os/linux/runtime_dir.cpp src/agent/door.cpp src/os/linux/high_fd.cpp"
    [trace_file]="tools/liveprobe/trace_output.cpp tools/liveprobe/trace_codec.cpp tools/liveprobe/progress_line.cpp tools/liveprobe/pipe_lines.cpp src/trace/spec.cpp src/trace/value_type.cpp src/arch/x86_64/value_home.cpp src/symbols/names.cpp"
    [relocate]="src/arch/x86_64/region.cpp src/arch/x86_64/relocate.cpp src/arch/x86_64/insn.cpp src/arch/x86_64/jump_table.cpp"
)
declare -A libs=([relocate]="-lZydis")
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(spec filter trace_file printk request module_params relocate)
mkdir -p "$out"
status=0
for name in "${names[@]}"; do
    [ -n "${sources[$name]:-}" ] || { echo "fuzz: no harness '$name' (spec filter trace_file printk request module_params relocate)" >&2; exit 2; }
    bin=$out/fuzz_$name
    files=("$src/tests/fuzz/fuzz_$name.cpp")
    for f in ${sources[$name]}; do files+=("$src/$f"); done
    echo "fuzz: building $name" >&2
    "$cxx" -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
        -I"$src/src" -I"$src/include" -I"$src/tools/liveprobe" "${files[@]}" -lfmt ${libs[$name]:-} -o "$bin"
    corpus=$src/tests/fuzz/corpus/$name
    crashes=$out/crashes/$name
    mkdir -p "$corpus" "$crashes"
    before=$(ls "$corpus" | wc -l)
    echo "fuzz: running $name for $secs s on $corpus ($before inputs)" >&2
    if ! "$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=1024 -malloc_limit_mb=256 -max_len=4096 \
        -artifact_prefix="$crashes/" "$corpus" 2>"$out/$name.log"; then
        echo "fuzz: $name found a crash: $(ls -t "$crashes" | head -1) (log: $out/$name.log)" >&2
        status=1
    fi
    grep -E '^#[0-9]+.*(DONE|pulse)' "$out/$name.log" | tail -1 >&2 || true
    # The corpus kept small: only the inputs that add coverage (libFuzzer's merge), so that the
    # committed one stays a few hundred files and `make test` replays it in a second.
    rm -rf "$out/merged-$name" && mkdir -p "$out/merged-$name"
    if "$bin" -merge=1 -rss_limit_mb=1024 "$out/merged-$name" "$corpus" 2>>"$out/$name.log"; then
        find "$corpus" -type f ! -name 'regression-*' ! -name 'seed-*' -delete
        cp -n "$out/merged-$name"/* "$corpus"/ 2>/dev/null || true
    fi
    echo "fuzz: $name: $(ls "$corpus" | wc -l) inputs in its corpus ($before before the run, then merged)" >&2
done
exit $status
