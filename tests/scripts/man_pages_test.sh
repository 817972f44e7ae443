#!/usr/bin/env bash
# The man pages the build writes from the tool's --help text (build/man, tools/liveprobe/
# man_page.cpp): liveprobe(1) and one per command the tool has, no other; each as the tool
# writes it now (not stale); without a groff warning; with a NAME line that lexgrog (mandb,
# apropos, whatis) reads; naming every option of the command's --help; and, for trace, its
# footer as sections (the specs' grammar a list, the examples one a paragraph). Run by ctest
# with LIVEPROBE_BINARY_DIR set.
set -uo pipefail

bin=${LIVEPROBE_BINARY_DIR:?LIVEPROBE_BINARY_DIR is not set}
tool=$bin/tools/liveprobe/liveprobe
man=$bin/man
failures=0
pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# The page as man shows it, 80 columns wide, without bold or underlining.
render() { MANWIDTH=80 man -P cat -l "$1" 2>/dev/null | col -bx; }

commands=$("$tool" --help | sed -n '/^Subcommands:/,/^$/p' | awk 'NF > 1 {print $1}')
[[ $(wc -w <<<"$commands") -ge 10 ]] || fail "the commands of liveprobe --help: '$commands'"
expected="liveprobe.1"
for c in $commands; do expected+=$'\n'"liveprobe-$c.1"; done
found=$(cd "$man" 2>/dev/null && ls)
if [[ $(sort <<<"$found") == $(sort <<<"$expected") ]]; then pass "a page for the tool and for each command, no other"; else
    fail "the pages in $man: $(tr '\n' ' ' <<<"$found")(expected: $(tr '\n' ' ' <<<"$expected"))"
fi

for c in "" $commands; do
    page=liveprobe${c:+-$c}
    f=$man/$page.1
    [[ -f $f ]] || { fail "$page.1 is missing"; continue; }
    # shellcheck disable=SC2086  # no command: the tool's page
    if cmp -s "$f" <("$tool" --man-page $c); then pass "$page.1 is up to date"; else fail "$page.1 is stale"; fi
    warnings=$(groff -man -ww -z -Tutf8 "$f" 2>&1)
    [[ -z $warnings ]] && warnings=$(MANWIDTH=80 man --warnings -P cat -l "$f" 2>&1 >/dev/null)
    if [[ -z $warnings ]]; then pass "$page.1: no groff warning"; else fail "$page.1: $warnings"; fi
    whatis=$(lexgrog "$f" 2>&1)
    if [[ $whatis == *": \"$page - "?* ]]; then pass "$page.1: lexgrog reads '${whatis#*: }'"; else
        fail "$page.1: lexgrog: $whatis"
    fi
    text=$(render "$f")
    missing=
    # shellcheck disable=SC2086
    for o in $("$tool" ${c:+$c} --help | grep -oE '^ +(-[a-zA-Z], *)?--[a-z][a-z-]*' | grep -oE -- '--[a-z-]+'); do
        grep -qE -- "(^| )$o( |,|\$)" <<<"$text" || missing+=" $o"
    done
    if [[ -z $missing ]]; then pass "$page.1 names every option of its --help"; else fail "$page.1 lacks$missing"; fi
done

# trace's footer: the specs' grammar as a list (each form a tag on its own line), the examples
# each on a line of its own under EXAMPLES, the exit status and the other pages.
text=$(render "$man/liveprobe-trace.1")
check_text() {
    if grep -qE -- "$2" <<<"$text"; then pass "$1"; else fail "$1: no line matching '$2' in"; sed 's/^/    /' <<<"$text"; fi
}
check_text "trace: SYNOPSIS with the program after --" '^ +liveprobe trace \[OPTIONS\] \[specs\.\.\.\] \[-- CMD \[ARGS\.\.\.\]\]$'
check_text "trace: the specs' forms as a list" '^ +FUNC \[\$retval\[:TYPE\]\]$'
check_text "trace: an item's text under its tag" "^ {10,}each call's return value \\(typed by DWARF\\) and duration$"
check_text "trace: the footer's headings as subsections" '^   How a trace ends$'
check_text "trace: an EXAMPLES section" '^EXAMPLES$'
check_text "trace: each example on its own line" '^ +liveprobe trace -p 1234 do_sys_open$'
check_text "trace: the tool's exit status" '^EXIT STATUS$'
check_text "trace: SEE ALSO the pages its text names" 'liveprobe\(1\), .*liveprobe-list\(1\)'
check_text "trace: quotes as typed, for pasting" "liveprobe trace --count '\\*' -- \\./server"
main=$(render "$man/liveprobe.1")
if grep -q '^ENVIRONMENT$' <<<"$main" && grep -qE '^ +LIVEPROBE_RUNTIME_DIR$' <<<"$main"; then
    pass "liveprobe.1: ENVIRONMENT names LIVEPROBE_RUNTIME_DIR"
else
    fail "liveprobe.1: no ENVIRONMENT naming LIVEPROBE_RUNTIME_DIR"
fi

if ((failures)); then
    echo "man pages test: $failures FAILED"
    exit 1
fi
echo "man pages test: all passed"
