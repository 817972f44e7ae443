#!/usr/bin/env bash
# The bash completion (tools/completion/liveprobe.bash) with the built tool on PATH, called as
# bash calls it: COMP_LINE, COMP_POINT, COMP_WORDS and COMP_CWORD set, COMPREPLY checked. The
# commands, a command's options (every one its --help names), PIDs by number and by name,
# function names of a running program (-p PID) and of one given after "--" or to list -x, the
# modules loaded in a process for rmmod, file names after -o and for insmod, the choices of
# report --sort. Run by ctest with
# LIVEPROBE_SOURCE_DIR and LIVEPROBE_BINARY_DIR set.
set -uo pipefail

src=${LIVEPROBE_SOURCE_DIR:?LIVEPROBE_SOURCE_DIR is not set}
bin=${LIVEPROBE_BINARY_DIR:?LIVEPROBE_BINARY_DIR is not set}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/liveprobe-completion.XXXXXX")
pids=()
cleanup() {
    local p
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
    rm -rf "$tmp"
}
trap cleanup EXIT
export PATH=$bin/tools/liveprobe:$PATH
export LIVEPROBE_RUNTIME_DIR=$tmp/run

failures=0
pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# shellcheck source=/dev/null
if ! source "$src/tools/completion/liveprobe.bash" || [[ $(complete -p liveprobe 2>/dev/null) != *_liveprobe* ]]; then
    echo "FAIL: the completion file does not define a completion for liveprobe"
    exit 1
fi

# complete LINE [POINT]: the completion of LINE with the cursor at POINT (its end by default),
# COMP_WORDS split as bash splits them (at spaces and at COMP_WORDBREAKS' ':' and '=').
complete_line() {
    COMP_LINE=$1
    COMP_POINT=${2:-${#1}}
    local before=${COMP_LINE:0:COMP_POINT}
    local spaced=${before//:/ : }
    spaced=${spaced//=/ = }
    read -ra COMP_WORDS <<<"$spaced"
    [[ $before == *' ' ]] && COMP_WORDS+=("")
    COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
    COMPREPLY=()
    _liveprobe liveprobe "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]-}"
}
# expect_reply WHAT LINE WORD...: LINE's completion offers each WORD.
expect_reply() {
    local what=$1 line=$2 w missing=
    shift 2
    complete_line "$line"
    for w; do
        printf '%s\n' "${COMPREPLY[@]}" | grep -qxF -- "$w" || missing+=" $w"
    done
    if [[ -z $missing ]]; then pass "$what"; else
        fail "$what: '$line' did not offer$missing (offered: ${COMPREPLY[*]:0:20})"
    fi
}
# expect_only WHAT LINE [POINT] WORD: LINE's completion is WORD alone (what TAB inserts).
expect_only() {
    local what=$1 line=$2 point=$3 word=$4
    complete_line "$line" "$point"
    if [[ ${#COMPREPLY[@]} -eq 1 && ${COMPREPLY[0]} == "$word" ]]; then pass "$what"; else
        fail "$what: '$line' offered '${COMPREPLY[*]:0:20}' (${#COMPREPLY[@]}), not '$word' alone"
    fi
}
# expect_none WHAT LINE WORD: LINE's completion does not offer WORD.
expect_none() {
    complete_line "$2"
    if printf '%s\n' "${COMPREPLY[@]}" | grep -qxF -- "$3"; then fail "$1: '$2' offered '$3'"; else pass "$1"; fi
}

# 1. Commands and options, as the tool has them.
expect_only "a command: liveprobe tr<TAB>" "liveprobe tr" "" trace
commands=$(liveprobe --help | sed -n '/^Subcommands:/,/^$/p' | awk 'NF > 1 {print $1}')
# shellcheck disable=SC2086  # a list of words
expect_reply "every command of --help" "liveprobe " $commands
expect_only "an option: liveprobe trace --cou<TAB>" "liveprobe trace --cou" "" --count
expect_only "a short option's long name: liveprobe list --ex<TAB>" "liveprobe list --ex" "" --exec
# Every long option trace --help names, and not another command's.
trace_options=$(liveprobe trace --help | grep -oE '^ +(-[a-z], *)?--[a-z][a-z-]*' | grep -oE -- '--[a-z-]+')
# shellcheck disable=SC2086
expect_reply "every option of trace --help" "liveprobe trace --" $trace_options
expect_none "no option of another command" "liveprobe trace --" --params
expect_reply "the choices of report --sort" "liveprobe report --sort " total self calls name
expect_only "a choice after --sort=" "liveprobe report --sort=se" "" self

# 2. PIDs after -p: a process of ours, by its PID's first digits and by its name.
sleep 300 &
sleeper=$!
pids+=("$sleeper")
expect_reply "a PID after -p" "liveprobe trace -p " "$sleeper"
expect_reply "a PID from its first digits" "liveprobe status --pid ${sleeper:0:2}" "$sleeper"
expect_reply "a PID from its process's name" "liveprobe trace -p slee" "$sleeper"
expect_reply "a PID after --pid=" "liveprobe lsmod --pid=${sleeper:0:2}" "$sleeper"
expect_none "no PID that does not start so" "liveprobe trace -p 0" "$sleeper"
expect_reply "a process's name after --follow-name" "liveprobe trace --follow-name sle" sleep

# 3. Function names, through liveprobe list: a running program's (-p PID), a program's given
# after -- (the cursor before it), a file's for list -x.
cat >"$tmp/target.c" <<'EOF'
#include <unistd.h>
__attribute__((noinline)) int lp_completion_target_fn(int x) { return x + 1; }
__attribute__((noinline)) int lp_completion_other_fn(int x) { return x * 2; }
int main(void) { for (int i = 0;; ++i) { lp_completion_target_fn(i); lp_completion_other_fn(i); sleep(1); } }
EOF
if ! ${CC:-cc} -O1 -o "$tmp/lp_completion_target" "$tmp/target.c"; then
    fail "cannot build the target program"
else
    "$tmp/lp_completion_target" &
    target=$!
    pids+=("$target")
    sleep 0.2
    expect_only "a function of -p PID: trace -p PID lp_completion_t<TAB>" \
        "liveprobe trace -p $target lp_completion_t" "" lp_completion_target_fn
    expect_reply "every function the prefix names" "liveprobe trace -p $target lp_compl" \
        lp_completion_target_fn lp_completion_other_fn
    # Bash replaces the word after its ':': the reply is the rest of the name.
    expect_only "a function after p:" "liveprobe trace -p $target p:lp_completion_t" "" lp_completion_target_fn
    expect_only "a function as OBJECT:NAME" "liveprobe trace --pid=$target lp_completion_target:lp_completion_t" "" \
        lp_completion_target_fn
    before="liveprobe trace lp_completion_t"
    expect_only "a function of the program after -- (the cursor before it)" \
        "$before -- $tmp/lp_completion_target" ${#before} lp_completion_target_fn
    expect_only "a function of list -x FILE" "liveprobe list -x $tmp/lp_completion_target lp_completion_o" "" \
        lp_completion_other_fn
    expect_only "a function of list -p PID" "liveprobe list -p $target lp_completion_o" "" lp_completion_other_fn
    # Each process its own list (cached by PID).
    expect_none "no function of another process" "liveprobe trace -p $sleeper lp_compl" lp_completion_target_fn
fi

# 4. The modules loaded in a process, for rmmod (through liveprobe lsmod): params_module of
# tests/modules, loaded into a program insmod starts.
module=$bin/tests/modules/params_module.so
mkdir -m 700 "$LIVEPROBE_RUNTIME_DIR"
liveprobe insmod "$module" -- sleep 300 >"$tmp/insmod.log" 2>&1 &
insmod_tool=$!
pids+=("$insmod_tool")
loaded=
for _ in $(seq 100); do
    loaded=$(pgrep -P "$insmod_tool")
    [[ -n $loaded ]] && liveprobe lsmod -p "$loaded" 2>/dev/null | grep -q '^params_module ' && break
    loaded=
    sleep 0.1
done
if [[ -z $loaded ]]; then
    fail "params_module was not loaded into a program"; sed 's/^/    /' "$tmp/insmod.log"
else
    pids+=("$loaded")
    expect_only "a loaded module for rmmod" "liveprobe rmmod -p $loaded par" "" params_module
    expect_none "not lsmod's heading" "liveprobe rmmod -p $loaded " Module
fi

# 5. Files: after -o, --chrome; modules (.so) for insmod; the program after --.
mkdir -p "$tmp/files/subdir"
touch "$tmp/files/calls.lptrace" "$tmp/files/probe_module.so" "$tmp/files/notes.txt"
cd "$tmp/files" || exit 1
expect_only "a file after -o" "liveprobe trace -o call" "" calls.lptrace
expect_only "a file after --chrome" "liveprobe trace --chrome not" "" notes.txt
expect_only "a file after the tool's --config" "liveprobe --config not" "" notes.txt
expect_only "the command after --config FILE" "liveprobe --config notes.txt tr" "" trace
expect_only "a file after trace --config (the tool's, after the command)" "liveprobe trace --config not" "" notes.txt
expect_only "a file after report's positional" "liveprobe report cal" "" calls.lptrace
expect_reply "a module for insmod" "liveprobe insmod " probe_module.so subdir
expect_none "only modules for insmod" "liveprobe insmod " notes.txt
expect_reply "a program on PATH after --" "liveprobe run -- sle" sleep
expect_none "no file after --duration" "liveprobe trace --duration " calls.lptrace

if ((failures)); then
    echo "completion test: $failures FAILED"
    exit 1
fi
echo "completion test: all passed"
