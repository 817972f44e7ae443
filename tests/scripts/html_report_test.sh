#!/usr/bin/env bash
# liveprobe report FILE --html OUT.html (issue 34, item 3): one self-contained page, opened in
# headless Chromium (Debian's chromium, which scripts/deps.sh installs; the test fails without
# it). On tests/programs/calltree_target.c's trace: the page names no URL; its script runs
# without an error (it writes "ok" into #lp-status, read back with --dump-dom); the flame graph
# holds every function `report` lists, the table the same functions and calls as
# `report -s calls`, in report's order, and each histogram as many calls; clicks zoom, reset,
# search and sort (a script added to a copy of the page clicks, and says what it found). A
# script that fails says so in #lp-status. On tests/programs/throw_target.cpp's calls into
# libstdc++, C++ names with <, > and & are escaped in the file and read back whole, and the table
# of its 30-odd functions shows 25 until asked for all.
source "$(dirname "${BASH_SOURCE[0]}")/../support/script_common.sh" html_report
export LC_ALL=C  # sort, as the expected lists are
if ! chromium=$(command -v chromium); then
    fail "chromium is not installed: scripts/deps.sh installs it (Debian's chromium, as root)"
    echo "$failures failure(s)"
    exit 1
fi

# dom PAGE: the page's DOM once its scripts ran, from headless Chromium (time-limited; as root
# it runs only without its sandbox).
dom() {
    timeout 60 "$chromium" --headless --no-sandbox --disable-gpu --no-first-run --user-data-dir="$tmp/chromium" \
        --dump-dom "file://$1" 2>>"$tmp/chromium.err" || echo "chromium: exit $?"
}
# unescape: HTML text as it reads.
unescape() { sed "s/&lt;/</g; s/&gt;/>/g; s/&quot;/\"/g; s/&#39;/'/g; s/&amp;/\&/g"; }
# element ID FILE: the text of the element of that id (on one line).
element() { sed -n "s:.*<[a-z]* id=\"$1\"[^>]*>\([^<]*\)</[a-z]*>.*:\1:p" "$2" | unescape; }
# The flame graph's frames' names (a title's first line), the table's rows (calls, name: a row
# whose calls read otherwise than the number it sorts by is left out) and the histograms' calls
# (the sum of their bars, name), from a page or its DOM.
frames() { grep -o '<g class="fr"[^>]*><title>[^<]*' "$1" | sed 's/.*<title>//' | unescape | grep -vx all | sort -u; }
table_rows() { sed -n 's:.*<td class="calls" data-v="\([0-9]*\)">\1</td>.*<td class="fn">\(.*\)</td></tr>.*:\1 \2:p' "$1" | unescape; }
hist_calls() {
    awk '/<figure class="hist"/ { if (name != "") print sum, name; name = $0; sub(/.*data-fn="/, "", name);
                                  sub(/".*/, "", name); sum = 0 }
         { while (match($0, /data-count="[0-9]+"/)) { sum += substr($0, RSTART + 12, RLENGTH - 13); $0 = substr($0, RSTART + RLENGTH) } }
         END { if (name != "") print sum, name }' "$1" | unescape
}
# report_rows ARGS...: `liveprobe report ARGS` as "calls name" lines, in its order (the name is
# all after the columns: a C++ name holds spaces).
report_rows() { "$lp" report "$@" | tail -n +3 | awk '{ name = substr($0, 83); print $5, name }'; }

target=$bin/tests/lp_calltree_target
f=$tmp/c.lptrace
"${launch[@]}" "$lp" trace -o "$f" 'ct_*' main -- "$target" >"$tmp/trace.out" 2>&1 ||
    { fail "trace -o: exit $?"; sed 's/^/    /' "$tmp/trace.out"; }
page=$tmp/report.html
out=$("$lp" report "$f" --html "$page" 2>&1); rc=$?
[ "$rc" -eq 0 ] && [ -s "$page" ] && [ -z "$out" ] && pass "report --html: wrote $(wc -c <"$page") bytes, said nothing" ||
    fail "report --html: exit $rc: $out"

# Self-contained: no URL of any scheme, nothing loaded (src=, href=, url(), @import).
if grep -nEi '[a-z][a-z0-9+.-]*://|(src|href|action|srcset)=|url\(|@import' "$page" >"$tmp/urls"; then
    fail "the page names a URL or loads something:"; head -5 "$tmp/urls" | sed 's/^/    /'
else pass "the page names no URL and loads nothing"; fi
[ "$(element lp-status "$page")" = "script did not run" ] && pass "#lp-status before the script: 'script did not run'" ||
    fail "#lp-status before the script: '$(element lp-status "$page")'"

dom "$page" >"$tmp/page.dom"
st=$(element lp-status "$tmp/page.dom")
[ "$st" = ok ] && pass "chromium: the page's script ran: #lp-status '$st'" ||
    { fail "chromium: #lp-status '$st'"; tail -n 5 "$tmp/page.dom" "$tmp/chromium.err" | sed 's/^/    /'; }

# The functions the trace holds, as report lists them: calltree_target's nine.
report_rows "$f" | cut -d' ' -f2- | sort >"$tmp/functions"
want=$(printf '%s\n' ct_emit ct_eval ct_leaf ct_lex ct_neg ct_parse ct_wait ct_worker main)
[ "$(cat "$tmp/functions")" = "$want" ] && pass "report lists calltree_target's 9 functions" ||
    fail "report lists: $(tr '\n' ' ' <"$tmp/functions")"
frames "$tmp/page.dom" >"$tmp/frames"
diff -u "$tmp/functions" "$tmp/frames" >"$tmp/frames.diff" &&
    pass "the flame graph holds each function report lists ($(wc -l <"$tmp/frames"))" ||
    { fail "the flame graph's functions differ from report's:"; sed 's/^/    /' "$tmp/frames.diff"; }
n=$(grep -c '<g class="fr"' "$tmp/page.dom")
paths=$("$lp" report --folded "$f" | wc -l)
[ "$n" -eq $((paths + 1)) ] && ! grep -q 'id="lp-dropped"' "$tmp/page.dom" &&
    pass "the flame graph draws every call path of --folded ($paths) and \"all\"" ||
    fail "the flame graph draws $n frames for $paths call paths"
table_rows "$tmp/page.dom" >"$tmp/table"
report_rows -s calls "$f" | sort >"$tmp/report.calls"
sort "$tmp/table" | diff -u "$tmp/report.calls" - >"$tmp/table.diff" &&
    pass "the table holds report -s calls' functions and calls: $(sort -rn "$tmp/table" | paste -sd, | sed 's/,/, /g')" ||
    { fail "the table differs from report -s calls:"; sed 's/^/    /' "$tmp/table.diff"; }
[ "$(cut -d' ' -f2- "$tmp/table")" = "$(report_rows "$f" | cut -d' ' -f2-)" ] &&
    pass "the table is in report's order (by total time)" || fail "the table's order: $(cut -d' ' -f2- "$tmp/table" | tr '\n' ' ')"
hist_calls "$tmp/page.dom" | sort >"$tmp/hists"
diff -u "$tmp/report.calls" "$tmp/hists" >"$tmp/hists.diff" &&
    pass "a histogram per function, its bars adding up to its calls" ||
    { fail "the histograms' calls differ from report -s calls':"; sed 's/^/    /' "$tmp/hists.diff"; }
n=$(grep -c '<rect class="bar"' "$tmp/page.dom")
grep -q '<text class="bound"[^>]*>[0-9]*[KMG]\?</text>' "$tmp/page.dom" && [ "$n" -gt 8 ] &&
    pass "the histograms: $n bars, labelled with --hist's bucket bounds" || fail "the histograms: $n bars, or no labels"

# Clicks: a script appended to a copy of the page clicks as a user would and writes what it
# found into #lp-test ("ok", or the checks that failed).
cat >"$tmp/clicks.js" <<'EOF'
<p id="lp-test">clicks did not run</p><script>
(function () {
  var bad = [];
  function check(ok, what) { if (!ok) bad.push(what); }
  var svg = document.getElementById('lp-flame'), span = svg.dataset.width - 2 * svg.dataset.pad;
  var frames = Array.prototype.slice.call(svg.querySelectorAll('g.fr'));
  function at(path) {
    return frames.filter(function (g) { return g.querySelector('title').textContent.split('\n')[1] === 'path: ' + path; })[0];
  }
  function width(g) { return +g.querySelector('rect').getAttribute('width'); }
  function shown(g) { return g.style.display !== 'none'; }
  var parse = at('main;ct_parse'), lex = at('main;ct_parse;ct_lex'), main = at('main'), wait = at('main;ct_wait');
  var lexShare = lex.dataset.w / parse.dataset.w;
  parse.dispatchEvent(new MouseEvent('click', { bubbles: true }));
  check(Math.abs(width(parse) - span) < 0.05, 'zoom: ct_parse is ' + width(parse) + ' wide, not ' + span);
  check(Math.abs(width(lex) - lexShare * span) < 0.05, 'zoom: ct_lex is ' + width(lex) + ' wide');
  // Named when wide enough for its 6 characters (its share of ct_parse's time moves with the
  // machine's load: a busy machine once made it too narrow).
  var lexText = lex.querySelector('text'), room = Math.floor((width(lex) - 6) / +svg.dataset.char);
  check(room < 6 ? !lexText || lexText.textContent !== 'ct_lex' : lexText && lexText.textContent === 'ct_lex',
        'zoom: ct_lex is ' + width(lex) + ' wide, named ' + (lexText ? "'" + lexText.textContent + "'" : 'nothing'));
  check(!shown(wait) && !shown(at('ct_worker')), 'zoom: ct_wait or ct_worker still shown');
  check(main.classList.contains('lp-parent') && Math.abs(width(main) - span) < 0.05, 'zoom: main is not under it');
  check(!document.getElementById('lp-reset').disabled, 'zoom: reset disabled');
  document.getElementById('lp-reset').click();
  check(shown(wait) && !main.classList.contains('lp-parent') && width(parse) < span / 2, 'reset: not as before');
  var box = document.getElementById('lp-search');
  box.value = 'ct_le';
  box.dispatchEvent(new Event('input'));
  var hits = svg.querySelectorAll('g.lp-hit').length;
  var want = frames.filter(function (g) { return /^ct_le/.test(g.querySelector('title').textContent); }).length;
  check(hits === want && hits > 0, 'search: ' + hits + ' frames highlighted, not ' + want);
  check(/matched/.test(document.getElementById('lp-matched').textContent), 'search: no match said');
  var table = document.getElementById('lp-table');
  function first() { return table.tBodies[0].rows[0].querySelector('td.fn').textContent; }
  table.querySelector('th[data-k=calls]').click();
  check(first() === 'ct_lex', 'sort by calls: ' + first() + ' first');
  table.querySelector('th[data-k=calls]').click();
  check(table.tBodies[0].rows[0].querySelector('td.calls').textContent === '1', 'sort by calls, again: not fewest first');
  table.querySelector('th[data-k=name]').click();
  check(first() === 'ct_emit', 'sort by name: ' + first() + ' first');
  document.getElementById('lp-test').textContent = bad.length ? 'failed: ' + bad.join('; ') : 'ok';
})();
</script>
EOF
awk -v js="$tmp/clicks.js" '/^<\/body>/ { while ((getline line < js) > 0) print line } { print }' "$page" >"$tmp/clicks.html"
dom "$tmp/clicks.html" >"$tmp/clicks.dom"
res=$(element lp-test "$tmp/clicks.dom") st=$(element lp-status "$tmp/clicks.dom")
[ "$res" = ok ] && [ "$st" = ok ] && pass "clicks: zoom into main;ct_parse, reset, search 'ct_le', sort by calls and name" ||
    fail "clicks: '$res', #lp-status '$st'"

# A script that fails says so: a call of nothing, and a syntax error, put into copies.
sed "s/'use strict';/'use strict'; lpNoSuchFunction();/" "$page" >"$tmp/thrown.html"
sed "s/'use strict';/'use strict'; }}/" "$page" >"$tmp/syntax.html"
for kind in thrown syntax; do
    st=$(dom "$tmp/$kind.html" | tee "$tmp/$kind.dom" | element lp-status /dev/stdin)
    [[ "$st" == "error: "* ]] && pass "a page whose script fails ($kind): #lp-status '$st'" || fail "$kind: #lp-status '$st'"
done

# The filters apply: -F ct_parse draws ct_parse and its callees only, and says so.
"$lp" report "$f" --html "$tmp/F.html" -F ct_parse >/dev/null 2>&1
[ "$(frames "$tmp/F.html" | tr '\n' ' ')" = "ct_lex ct_parse " ] && grep -q '<dd>-F ct_parse</dd>' "$tmp/F.html" &&
    [ "$(table_rows "$tmp/F.html" | sort | tr '\n' ' ')" = "3 ct_parse 9 ct_lex " ] &&
    pass "report -F ct_parse --html: ct_parse and ct_lex only, the filter said" ||
    fail "report -F ct_parse --html: frames $(frames "$tmp/F.html" | tr '\n' ' '), rows $(table_rows "$tmp/F.html" | tr '\n' ' ')"

# Errors: an unwritable page, and --html with --folded.
out=$("$lp" report "$f" --html "$tmp/no/such/dir.html" 2>&1); rc=$?
[ "$rc" -eq 1 ] && grep -q "no/such/dir.html: No such file or directory" <<<"$out" &&
    pass "an unwritable page: exit 1 ($out)" || fail "an unwritable page: exit $rc: $out"
out=$("$lp" report "$f" --html "$tmp/x.html" --folded 2>&1); rc=$?
[ "$rc" -eq 2 ] && grep -q -- "--folded excludes --html" <<<"$out" && [ ! -e "$tmp/x.html" ] &&
    pass "--html with --folded: refused, exit 2 ($(head -1 <<<"$out"))" || fail "--html with --folded: exit $rc: $out"

# C++ names hold <, > and &: throw_target's calls into libstdc++ (std::runtime_error's
# constructor of a std::string const&, among them), of more functions than a table shows before
# it is asked for all.
"${launch[@]}" "$lp" trace -o "$tmp/x.lptrace" leaf 'libstdc++.so.6:*' -- "$bin/tests/lp_throw_target" 30 \
    >"$tmp/xtrace.out" 2>&1 || { fail "trace -o of throw_target: exit $?"; sed 's/^/    /' "$tmp/xtrace.out"; }
"$lp" report "$tmp/x.lptrace" --html "$tmp/x.html" >/dev/null 2>&1
report_rows "$tmp/x.lptrace" | cut -d' ' -f2- | sort >"$tmp/xfunctions"
name=$(grep -F -m1 'std::runtime_error::runtime_error(std::__cxx11::basic_string<' "$tmp/xfunctions")
esc=$(sed 's/&/\&amp;/g; s/</\&lt;/g; s/>/\&gt;/g' <<<"$name")
if [ -z "$name" ]; then fail "report of throw_target: no std::runtime_error(std::string const&): $(head -5 "$tmp/xfunctions")"
elif grep -qF 'basic_string<' "$tmp/x.html" || ! grep -qF "<td class=\"fn\">$esc</td>" "$tmp/x.html"; then
    fail "the C++ names are not escaped in the page: $(grep -F 'basic_string<' "$tmp/x.html" | head -2)"
else pass "C++ names are escaped in the page ($(cut -c1-70 <<<"$esc")...)"; fi
dom "$tmp/x.html" >"$tmp/x.dom"
[ "$(element lp-status "$tmp/x.dom")" = ok ] && diff -q "$tmp/xfunctions" <(frames "$tmp/x.dom") >/dev/null &&
    diff -q "$tmp/xfunctions" <(table_rows "$tmp/x.dom" | cut -d' ' -f2- | sort) >/dev/null &&
    pass "the $(wc -l <"$tmp/xfunctions") names (C++ ones among them) read back whole from the flame graph and the table" ||
    fail "C++ names: #lp-status '$(element lp-status "$tmp/x.dom")'; frames or rows differ from report's:" \
        "$(diff "$tmp/xfunctions" <(frames "$tmp/x.dom") | head -4)"
# The table shows its first 25 rows until asked: a click on "Show all" shows all (sorted too),
# another the first 25 again.
n=$(wc -l <"$tmp/xfunctions")
cat >"$tmp/more.js" <<'EOF'
<p id="lp-test">clicks did not run</p><script>
(function () {
  var rows = document.getElementById('lp-table').tBodies[0].rows, more = document.getElementById('lp-more');
  function hidden() { return Array.prototype.filter.call(rows, function (r) { return r.hidden; }).length; }
  var seen = [hidden(), more.textContent];
  more.click();
  seen.push(hidden());
  document.querySelector('#lp-table th[data-k=calls]').click();
  seen.push(hidden());
  more.click();
  seen.push(hidden());
  document.getElementById('lp-test').textContent = seen.join(', ');
})();
</script>
EOF
awk -v js="$tmp/more.js" '/^<\/body>/ { while ((getline line < js) > 0) print line } { print }' "$tmp/x.html" >"$tmp/more.html"
res=$(dom "$tmp/more.html" | element lp-test /dev/stdin)
want="$((n - 25)), Show all $n functions, 0, 0, $((n - 25))"
[ "$n" -gt 25 ] && [ "$res" = "$want" ] &&
    pass "a table of $n functions shows 25 until asked (hidden rows, the button's text, ...: $res)" ||
    fail "a table of $n functions: '$res', not '$want'"
echo "$failures failure(s)"
[ "$failures" -eq 0 ]
