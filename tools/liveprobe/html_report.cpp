// The HTML report of a trace file (html_report.hpp): the page's text, and writing it.
#include "html_report.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <map>
#include <queue>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "trace_output.hpp"

namespace liveprobe::tool {
namespace {

using namespace html_limits;

// The flame graph's geometry, in the SVG's units (it scales to the page's width).
constexpr double kWidth = 1200, kPad = 10, kFrameH = 16;
constexpr double kCharW = 6.7;           // of the 11px monospace text, a little over its 0.6 em
constexpr size_t kMaxTitleName = 500;   // bytes of a name in a tooltip (C++ names run to thousands)
constexpr size_t kMaxTitlePath = 300;
constexpr size_t kShortTable = 25;  // rows the script shows until asked for all

// Text for HTML and SVG, in an element or an attribute's quotes: C++ names hold <, > and &.
std::string escape(std::string_view s)
{
    std::string out;
    out.reserve(s.size());
    for (char c : s) {
        switch (c) {
        case '&': out += "&amp;"; break;
        case '<': out += "&lt;"; break;
        case '>': out += "&gt;"; break;
        case '"': out += "&quot;"; break;
        case '\'': out += "&#39;"; break;
        default: out += c;
        }
    }
    return out;
}

// The first `bytes` of s, or fewer: never half a UTF-8 character.
std::string_view cut(std::string_view s, size_t bytes)
{
    if (s.size() <= bytes) return s;
    while (bytes > 0 && (static_cast<unsigned char>(s[bytes]) & 0xc0) == 0x80) --bytes;
    return s.substr(0, bytes);
}

// A name in `chars` columns, ".." where it is cut (as the script fits it after a zoom); empty
// when fewer than 3 fit: such a frame is a bare box, named by its tooltip.
std::string fitted(std::string_view name, double width)
{
    const auto chars = static_cast<size_t>(std::max(0.0, std::floor((width - 6) / kCharW)));
    if (chars < 3) return "";
    if (name.size() <= chars) return std::string(name);
    return std::string(cut(name, chars - 2)) + "..";
}

// A frame's text: its name without the "OBJECT:" a library's function is named with, which its
// tooltip keeps ("libjq.so.1:jv_free" reads "jv_free"). A C++ name's "::" is no such colon.
std::string_view label_of(std::string_view name)
{
    for (size_t i = 0; i < name.size() && name[i] != '(' && name[i] != '<' && name[i] != ' '; ++i)
        if (name[i] == ':') return i + 1 < name.size() && name[i + 1] == ':' ? name : name.substr(i + 1);
    return name;
}

// A warm colour, the same for a name in every page, as flame graphs colour frames.
std::string colour_of(std::string_view name)
{
    uint64_t h = 1469598103934665603ull;  // FNV-1a
    for (char c : name) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
    const auto v = [&](int shift) { return static_cast<double>((h >> shift) & 0xff) / 255.0; };
    return fmt::format("rgb({},{},{})", 205 + static_cast<int>(50 * v(40)), static_cast<int>(230 * v(8)),
                       static_cast<int>(55 * v(24)));
}

std::string percent(uint64_t part, uint64_t all)
{
    return fmt::format("{:.2f}%", all ? 100.0 * static_cast<double>(part) / static_cast<double>(all) : 0.0);
}

// ---- The header ------------------------------------------------------------------------------

std::string filters_text(const CallFilter &f)
{
    std::string s;
    for (const std::string &g : f.include) s += " -F " + g;
    for (const std::string &g : f.exclude) s += " -N " + g;
    if (f.depth != CallFilter{}.depth) s += fmt::format(" -D {}", f.depth);
    if (f.min_duration) s += fmt::format(" --min-duration {}", f.min_duration);
    if (f.tid) s += fmt::format(" --tid {}", f.tid);
    return s.empty() ? "none" : s.substr(1);
}

void header(std::string &out, const std::string &trace_file, const CallTrees &trees, const CallFilter &filter)
{
    std::map<int, size_t> threads;  // per process
    size_t calls = 0, shown = 0;
    for (const ThreadCalls &t : trees.threads) {
        ++threads[t.pid];
        calls += t.calls.size();
        for (const Call &c : t.calls) shown += c.shown;
    }
    std::string processes;
    for (const auto &[pid, n] : threads)
        processes += fmt::format("{}{} ({} thread{})", processes.empty() ? "" : ", ", pid, n, n == 1 ? "" : "s");
    auto out_it = std::back_inserter(out);
    fmt::format_to(out_it, "<header>\n<h1>liveprobe report: {}</h1>\n<dl>\n", escape(trace_file));
    fmt::format_to(out_it, "<dt>Process{}</dt><dd>{}</dd>\n", threads.size() == 1 ? "" : "es",
                   processes.empty() ? "none" : processes);
    fmt::format_to(out_it, "<dt>Calls</dt><dd id=\"lp-calls\">{} shown, of {} in the trace</dd>\n", shown, calls);
    fmt::format_to(out_it, "<dt>Filters</dt><dd>{}</dd>\n</dl>\n</header>\n", escape(filters_text(filter)));
}

// ---- The flame graph -------------------------------------------------------------------------

struct Frame {
    int32_t node;
    int depth;
    double x, w;  // of all the time: where the frame starts, and its width
};

// The call paths drawn: the kMaxFrames widest (a callee is never wider than its caller, so each
// frame's caller is drawn), none deeper than kMaxDepth. A frame's callees lie on it left to
// right by name, as flame graphs order them; one not drawn leaves its gap.
std::vector<Frame> choose_frames(const CallPaths &paths, const CallTrees &trees, uint64_t all)
{
    struct Candidate {
        uint64_t total;
        Frame f;
        bool operator<(const Candidate &o) const { return total < o.total; }
    };
    std::priority_queue<Candidate> next;
    std::vector<Frame> kept;
    const auto push_callees = [&](const Frame &f) {
        std::vector<int32_t> callees = paths.nodes[f.node].children;
        std::stable_sort(callees.begin(), callees.end(), [&](int32_t a, int32_t b) {
            return trees.names[paths.nodes[a].probe] < trees.names[paths.nodes[b].probe];
        });
        double x = f.x;
        const double end = f.x + f.w;
        for (int32_t c : callees) {
            const uint64_t total = paths.nodes[c].total;
            const double w = std::min(static_cast<double>(total) / static_cast<double>(all), std::max(0.0, end - x));
            if (f.depth < kMaxDepth) next.push({total, Frame{c, f.depth + 1, x, w}});
            x += w;
        }
    };
    kept.push_back(Frame{0, 0, 0.0, 1.0});
    push_callees(kept[0]);
    while (!next.empty() && kept.size() <= kMaxFrames) {
        kept.push_back(next.top().f);
        next.pop();
        push_callees(kept.back());
    }
    return kept;
}

std::string frame_title(const CallPaths &paths, const CallTrees &trees, const Frame &f, uint64_t all)
{
    const PathNode &n = paths.nodes[f.node];
    if (f.node == 0) return fmt::format("all\nevery shown call\ntotal {} (100%)", time_text(all));
    const std::string &name = trees.names[n.probe];
    std::string path = paths.path_of(trees, f.node, ";");
    if (path.size() > kMaxTitlePath) {
        size_t from = path.size() - kMaxTitlePath;
        while (from < path.size() && (static_cast<unsigned char>(path[from]) & 0xc0) == 0x80) ++from;
        path = "..." + path.substr(from);
    }
    std::string shown_name(cut(name, kMaxTitleName));
    if (shown_name.size() < name.size()) shown_name += "...";
    return fmt::format("{}\npath: {}\n{} call{}, total {} ({}), self {}", shown_name, path, n.calls, n.calls == 1 ? "" : "s",
                       time_text(n.total), percent(n.total, all), time_text(n.self));
}

// A frame as SVG: its box, its tooltip, and its label when it fits. `top`: the deepest frame's
// depth (the root is drawn at the bottom).
void frame_svg(std::string &out, const CallPaths &paths, const CallTrees &trees, const Frame &f, uint64_t all, int top)
{
    const std::string_view name = f.node == 0 ? "all" : std::string_view(trees.names[paths.nodes[f.node].probe]);
    const double span = kWidth - 2 * kPad, x = kPad + f.x * span, w = f.w * span, y = kPad + (top - f.depth) * kFrameH;
    const std::string_view label = label_of(name);
    const std::string label_attr = label.size() < name.size() ? fmt::format(" data-l=\"{}\"", escape(label)) : "";
    auto out_it = std::back_inserter(out);
    fmt::format_to(out_it, "<g class=\"fr\" data-x=\"{:.12g}\" data-w=\"{:.12g}\" data-d=\"{}\"{}><title>{}</title>"
                           "<rect x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" height=\"{}\" fill=\"{}\"/>",
                   f.x, f.w, f.depth, label_attr, escape(frame_title(paths, trees, f, all)), x, y, w, kFrameH - 1,
                   f.node == 0 ? "rgb(200,200,190)" : colour_of(name));
    const std::string text = fitted(label, w);
    if (!text.empty())
        fmt::format_to(out_it, "<text x=\"{:.2f}\" y=\"{:.2f}\">{}</text>", x + 3, y + kFrameH - 4.5, escape(text));
    out += "</g>\n";
}

void flame_graph(std::string &out, const CallTrees &trees)
{
    CallPaths paths;
    for (const ThreadCalls &t : trees.threads) paths.add(t, [](const Call &) { return true; });
    uint64_t all = 0;
    for (int32_t c : paths.nodes[0].children) all += paths.nodes[c].total;
    out += "<section id=\"flame\">\n<h2>Flame graph</h2>\n";
    if (all == 0) {
        out += "<p>No call to draw: the filters hide them all, or the shown calls took no time.</p>\n</section>\n";
        return;
    }
    out += "<p class=\"help\">Each box is a call path, as wide as its calls' total time, above its caller; "
           "all threads merged. Click a box to zoom into it; <button id=\"lp-reset\" disabled>Reset zoom</button> "
           "or Esc zooms out. <label>Search <input id=\"lp-search\" size=\"30\" "
           "placeholder=\"a name or a regular expression\"></label> <span id=\"lp-matched\"></span></p>\n";
    const std::vector<Frame> frames = choose_frames(paths, trees, all);
    int top = 0;
    for (const Frame &f : frames) top = std::max(top, f.depth);
    const double height = (top + 1) * kFrameH + 2 * kPad;
    auto out_it = std::back_inserter(out);
    fmt::format_to(out_it, "<svg id=\"lp-flame\" viewBox=\"0 0 {} {}\" data-width=\"{}\" data-pad=\"{}\" "
                           "data-char=\"{}\" role=\"img\">\n",
                   kWidth, height, kWidth, kPad, kCharW);
    for (const Frame &f : frames) frame_svg(out, paths, trees, f, all, top);
    out += "</svg>\n";
    const size_t paths_count = paths.nodes.size() - 1, drawn = frames.size() - 1;
    if (drawn < paths_count)
        fmt::format_to(out_it, "<p class=\"note\" id=\"lp-dropped\">{} of the {} call paths are not drawn: the graph "
                               "holds the {} widest at most, {} calls deep at most.</p>\n",
                       paths_count - drawn, paths_count, kMaxFrames, kMaxDepth);
    out += "</section>\n";
}

// ---- The table -------------------------------------------------------------------------------

void table(std::string &out, const std::map<std::string, FunctionRow> &by_name, const std::string &sort_by)
{
    out += "<section id=\"functions\">\n<h2>Functions</h2>\n";
    if (by_name.empty()) {
        out += "<p>No call is shown.</p>\n</section>\n";
        return;
    }
    const std::vector<std::pair<std::string, FunctionRow>> rows = sorted_rows(by_name, sort_by);
    out += "<p class=\"help\">As <code>liveprobe report</code> shows them: self time is a call's time less that of the "
           "shown calls it made; a recursive function's total is its outermost calls'. Click a heading to sort.</p>\n";
    fmt::format_to(std::back_inserter(out), "<table id=\"lp-table\" data-short=\"{}\">\n<thead><tr>", kShortTable);
    const char *heads[][2] = {{"total", "Total time"}, {"self", "Self time"}, {"calls", "Calls"}, {"min", "Min"},
                              {"avg", "Avg"},          {"max", "Max"},        {"name", "Function"}};
    for (const auto &h : heads)
        fmt::format_to(std::back_inserter(out), "<th data-k=\"{}\"{}>{}</th>", h[0],
                       sort_by == h[0] ? " class=\"lp-sorted\"" : "", h[1]);
    out += "</tr></thead>\n<tbody>\n";
    for (size_t i = 0; i < rows.size() && i < kMaxRows; ++i) {
        const auto &[name, r] = rows[i];
        const uint64_t avg = r.avg();
        std::string cells;
        for (uint64_t ns : {r.total, r.self}) cells += fmt::format("<td data-v=\"{}\">{}</td>", ns, time_text(ns));
        cells += fmt::format("<td class=\"calls\" data-v=\"{}\">{}</td>", r.calls, r.calls);
        for (uint64_t ns : {r.min, avg, r.max}) cells += fmt::format("<td data-v=\"{}\">{}</td>", ns, time_text(ns));
        fmt::format_to(std::back_inserter(out), "<tr>{}<td class=\"fn\">{}</td></tr>\n", cells, escape(name));
    }
    out += "</tbody>\n</table>\n";
    const size_t listed = std::min(rows.size(), kMaxRows);
    if (listed > kShortTable)  // shown by the script, which shortens the table
        fmt::format_to(std::back_inserter(out), "<p><button id=\"lp-more\" hidden>Show all {} functions</button></p>\n",
                       listed);
    if (rows.size() > kMaxRows)
        fmt::format_to(std::back_inserter(out), "<p class=\"note\">The first {} of {} functions (by {}): "
                                                "<code>liveprobe report</code> lists them all.</p>\n",
                       kMaxRows, rows.size(), sort_by);
    out += "</section>\n";
}

// ---- The histograms --------------------------------------------------------------------------

using Buckets = std::array<uint64_t, trace::kHistBuckets>;

// Per name of `names`: its shown calls' durations in trace --hist's buckets.
std::vector<Buckets> buckets_of(const CallTrees &trees, const std::vector<std::string> &names)
{
    std::vector<int> index(trees.names.size(), -1);  // per probe: its name's in `names`
    for (size_t p = 0; p < trees.names.size(); ++p) {
        const auto it = std::find(names.begin(), names.end(), trees.names[p]);
        if (it != names.end()) index[p] = static_cast<int>(it - names.begin());
    }
    std::vector<Buckets> hists(names.size(), Buckets{});
    for (const ThreadCalls &t : trees.threads)
        for (const Call &c : t.calls)
            if (c.shown && index[c.probe] >= 0) ++hists[index[c.probe]][hist_bucket(c.took())];
    return hists;
}

// One function's histogram as a bar chart: a bar per bucket from the first to the last that
// holds calls, as tall as its count (linear, as --hist draws it), its lower bound below it.
void hist_chart(std::string &out, const std::string &name, const Buckets &b, uint64_t calls)
{
    constexpr double w = 380, h = 170, base = 140, tallest = 115, left = 8;
    uint32_t lo = 0, hi = trace::kHistBuckets - 1;
    while (lo < hi && b[lo] == 0) ++lo;
    while (hi > lo && b[hi] == 0) --hi;
    const uint64_t peak = std::max<uint64_t>(1, *std::max_element(b.begin(), b.end()));
    const double bw = std::min(40.0, (w - 2 * left) / (hi - lo + 1));
    const int label_every = static_cast<int>(std::ceil(26 / bw));
    auto out_it = std::back_inserter(out);
    fmt::format_to(out_it, "<figure class=\"hist\" data-fn=\"{}\"><figcaption>{} <span>{} call{}</span></figcaption>\n"
                           "<svg viewBox=\"0 0 {} {}\" role=\"img\"><line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"/>\n",
                   escape(name), escape(name), calls, calls == 1 ? "" : "s", w, h, left, base, w - left, base);
    for (uint32_t k = lo; k <= hi; ++k) {
        const double x = left + (k - lo) * bw, bar = static_cast<double>(b[k]) / static_cast<double>(peak) * tallest;
        const std::string range = k == 0 ? "[0]" : fmt::format("[{}, {})", hist_bound(k), hist_bound(k + 1));
        fmt::format_to(out_it, "<rect class=\"bar\" data-count=\"{}\" x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" "
                               "height=\"{:.2f}\"><title>{} ns: {} call{}</title></rect>",
                       b[k], x + 1, base - bar, bw - 2, bar, range, b[k], b[k] == 1 ? "" : "s");
        const std::string count = fmt::format("{}", b[k]);
        if (b[k] && count.size() * 5.5 + 3 <= bw)  // else in its title only
            fmt::format_to(out_it, "<text class=\"count\" x=\"{:.2f}\" y=\"{:.2f}\">{}</text>", x + bw / 2, base - bar - 3,
                           count);
        if ((k - lo) % label_every == 0)
            fmt::format_to(out_it, "<text class=\"bound\" x=\"{:.2f}\" y=\"{}\">{}</text>", x + 1, base + 13, hist_bound(k));
        out += "\n";
    }
    fmt::format_to(out_it, "<text class=\"unit\" x=\"{}\" y=\"{}\">ns, log2 buckets (1K = 1024)</text>\n</svg></figure>\n",
                   w - left, h - 2);
}

void histograms(std::string &out, const CallTrees &trees, const std::map<std::string, FunctionRow> &by_name)
{
    out += "<section id=\"histograms\">\n<h2>Latency histograms</h2>\n";
    if (by_name.empty()) {
        out += "<p>No call is shown.</p>\n</section>\n";
        return;
    }
    const std::vector<std::pair<std::string, FunctionRow>> rows = sorted_rows(by_name, "total");
    std::vector<std::string> names;
    for (size_t i = 0; i < rows.size() && i < kMaxHists; ++i) names.push_back(rows[i].first);
    out += "<p class=\"help\">Each function's call durations in the log2 buckets of <code>liveprobe trace --hist</code>: "
           "a bar labelled 1K counts the calls of 1024 to 2047 ns.";
    if (rows.size() > names.size())
        fmt::format_to(std::back_inserter(out), " The {} functions of most total time, of {}.", names.size(), rows.size());
    out += "</p>\n<div class=\"hists\">\n";
    const std::vector<Buckets> hists = buckets_of(trees, names);
    for (size_t i = 0; i < names.size(); ++i) hist_chart(out, names[i], hists[i], by_name.at(names[i]).calls);
    out += "</div>\n</section>\n";
}

// ---- The style and the script ----------------------------------------------------------------

constexpr const char *kStyle = R"CSS(
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em 2em; color: #222; background: #fff; }
h1 { font-size: 1.4em; margin: 0 0 .4em; word-break: break-all; }
h2 { font-size: 1.15em; margin: 1.6em 0 .4em; border-bottom: 1px solid #ddd; }
dl { display: grid; grid-template-columns: max-content auto; gap: .1em 1em; margin: 0; }
dt { font-weight: 600; } dd { margin: 0; }
.help, .note, #lp-status { color: #555; font-size: .9em; }
.note { color: #8a4b00; }
#lp-status { position: absolute; top: .5em; right: 1em; margin: 0; }
#lp-status::before { content: "page script: "; }
#lp-status.error { color: #b00; font-weight: 600; }
#lp-flame { width: 100%; height: auto; display: block; background: #fafaf5; }
#lp-flame text { font: 11px monospace; fill: #000; pointer-events: none; }
#lp-flame g.fr { cursor: pointer; }
#lp-flame g.fr:hover rect { stroke: #000; stroke-width: .7; }
#lp-flame g.lp-parent rect { opacity: .55; }
#lp-flame g.lp-hit rect { fill: rgb(230,0,230); }
table { border-collapse: collapse; font-variant-numeric: tabular-nums; }
th, td { padding: .15em .7em; text-align: right; border-bottom: 1px solid #eee; white-space: nowrap; }
th { cursor: pointer; background: #f3f3ee; user-select: none; }
th.lp-sorted::after { content: " \25BC"; } th.lp-sorted.lp-up::after { content: " \25B2"; }
td.fn, th[data-k=name] { text-align: left; font-family: monospace; white-space: normal; word-break: break-all; }
.hists { display: grid; grid-template-columns: repeat(auto-fill, minmax(360px, 1fr)); gap: 1em; }
figure.hist { margin: 0; padding: .4em; border: 1px solid #e4e4dc; }
figcaption { font-family: monospace; font-size: .85em; word-break: break-all; }
figcaption span { font-family: system-ui, sans-serif; color: #666; }
figure.hist svg { width: 100%; height: auto; display: block; }
figure.hist line { stroke: #999; }
figure.hist rect.bar { fill: rgb(225,110,30); } figure.hist rect.bar:hover { fill: rgb(180,60,10); }
figure.hist text { font: 9px sans-serif; fill: #444; }
figure.hist text.count { text-anchor: middle; } figure.hist text.unit { text-anchor: end; fill: #888; }
)CSS";

// Set before anything else can fail, so that a failure of the script below (a syntax error
// included) is written into the page, where a headless browser's --dump-dom reads it.
constexpr const char *kGuard = R"JS(
window.onerror = function (message) {
  var s = document.getElementById('lp-status');
  if (s) { s.textContent = 'error: ' + message; s.className = 'error'; }
};
)JS";

constexpr const char *kScript = R"JS(
(function () {
  'use strict';
  var EPS = 1e-10;  // the tool writes 12 digits
  var svg = document.getElementById('lp-flame');
  var frames = [], root = null;

  // A frame at x, w of the zoomed-to width: its box, and its label fitted as the tool fits it.
  function place(f, x, w) {
    var span = f.lp.width - 2 * f.lp.pad, px = f.lp.pad + x * span, pw = w * span;
    f.style.display = '';
    f.lp.rect.setAttribute('x', px.toFixed(2));
    f.lp.rect.setAttribute('width', pw.toFixed(2));
    var chars = Math.floor((pw - 6) / f.lp.charW), name = f.lp.label;
    var text = chars < 3 ? '' : name.length <= chars ? name : name.slice(0, chars - 2) + '..';
    if (!f.lp.text && text) {
      f.lp.text = document.createElementNS(svg.namespaceURI, 'text');
      f.lp.text.setAttribute('y', (+f.lp.rect.getAttribute('y') + +f.lp.rect.getAttribute('height') - 3.5).toFixed(2));
      f.appendChild(f.lp.text);
    }
    if (f.lp.text) {
      f.lp.text.setAttribute('x', (px + 3).toFixed(2));
      f.lp.text.textContent = text;
    }
  }

  // Zooms to frame z: it and its callees take the whole width, its callers stay under it
  // (faded), the rest is hidden.
  function zoom(z) {
    var zx = z.lp.x, zw = z.lp.w, zd = z.lp.d;
    frames.forEach(function (f) {
      var p = f.lp;
      var inside = p.x >= zx - EPS && p.x + p.w <= zx + zw + EPS;
      var under = p.x <= zx + EPS && p.x + p.w >= zx + zw - EPS;
      if (p.d >= zd && inside) {
        place(f, (p.x - zx) / zw, p.w / zw);
        f.classList.remove('lp-parent');
      } else if (p.d < zd && under) {
        place(f, 0, 1);
        f.classList.add('lp-parent');
      } else {
        f.style.display = 'none';
      }
    });
    document.getElementById('lp-reset').disabled = z === root;
  }

  // Highlights the frames whose name matches q (a regular expression, else the text itself)
  // and says how much of all the time they take, each nested match counted once.
  function search(q) {
    var re = null;
    if (q) {
      try { re = new RegExp(q); } catch (e) { re = new RegExp(q.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')); }
    }
    var spans = [];
    frames.forEach(function (f) {
      var hit = !!re && f !== root && re.test(f.lp.name);
      f.classList.toggle('lp-hit', hit);
      if (hit) spans.push([f.lp.x, f.lp.x + f.lp.w]);
    });
    spans.sort(function (a, b) { return a[0] - b[0] || b[1] - a[1]; });
    var sum = 0, end = -1;
    spans.forEach(function (s) {
      if (s[0] >= end - EPS) { sum += s[1] - s[0]; end = s[1]; }
    });
    document.getElementById('lp-matched').textContent =
        re ? spans.length + ' frames matched, ' + (100 * sum).toFixed(2) + '% of all the time' : '';
  }

  function setUpFlameGraph() {
    if (!svg) return;
    var width = +svg.dataset.width, pad = +svg.dataset.pad, charW = +svg.dataset.char;
    frames = Array.prototype.slice.call(svg.querySelectorAll('g.fr'));
    frames.forEach(function (f) {
      var title = f.querySelector('title').textContent;
      f.lp = { x: +f.dataset.x, w: +f.dataset.w, d: +f.dataset.d, name: title.split('\n')[0],
               label: f.dataset.l || title.split('\n')[0],
               rect: f.querySelector('rect'), text: f.querySelector('text'), width: width, pad: pad, charW: charW };
      if (f.lp.d === 0) root = f;
      f.addEventListener('click', function () { if (f.lp.w > 0) zoom(f); });
    });
    if (!root) throw new Error('the flame graph has no root frame');
    var reset = document.getElementById('lp-reset'), box = document.getElementById('lp-search');
    reset.addEventListener('click', function () { zoom(root); });
    box.addEventListener('input', function () { search(box.value); });
    document.addEventListener('keydown', function (e) {
      if (e.key === 'Escape') { box.value = ''; search(''); zoom(root); }
    });
  }

  // Sorts the table by a column when its heading is clicked: numbers largest first, names in
  // order; a second click reverses. A long table shows its first rows until asked for all.
  function setUpTable() {
    var table = document.getElementById('lp-table');
    if (!table) return;
    var heads = Array.prototype.slice.call(table.tHead.rows[0].cells);
    var more = document.getElementById('lp-more'), shortRows = +table.dataset.short, whole = false;
    function shorten() {
      Array.prototype.forEach.call(table.tBodies[0].rows, function (r, i) { r.hidden = !whole && i >= shortRows; });
    }
    if (more) {
      var showAll = more.textContent;
      more.hidden = false;
      more.addEventListener('click', function () {
        whole = !whole;
        more.textContent = whole ? 'Show the first ' + shortRows : showAll;
        shorten();
      });
      shorten();
    }
    heads.forEach(function (th, col) {
      th.addEventListener('click', function () {
        var up = th.classList.contains('lp-sorted') && !th.classList.contains('lp-up');
        var isName = th.dataset.k === 'name', body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (a, b) {
          var c = isName ? a.cells[col].textContent.localeCompare(b.cells[col].textContent)
                         : b.cells[col].dataset.v - a.cells[col].dataset.v;
          return up ? -c : c;
        });
        rows.forEach(function (r) { body.appendChild(r); });
        shorten();
        heads.forEach(function (h) { h.classList.remove('lp-sorted', 'lp-up'); });
        th.classList.add('lp-sorted');
        th.classList.toggle('lp-up', up);
      });
    });
  }

  setUpFlameGraph();
  setUpTable();
  document.getElementById('lp-status').textContent = 'ok';
})();
)JS";

}  // namespace

std::string html_report(const std::string &trace_file, const CallTrees &trees, const CallFilter &filter,
                        const std::string &sort_by)
{
    const std::map<std::string, FunctionRow> rows = function_rows(trees);
    std::string out = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
    fmt::format_to(std::back_inserter(out), "<title>liveprobe report: {}</title>\n", escape(trace_file));
    out += "<style>";
    out += kStyle;
    out += "</style>\n</head>\n<body>\n<p id=\"lp-status\">script did not run</p>\n<script>";
    out += kGuard;
    out += "</script>\n";
    header(out, trace_file, trees, filter);
    flame_graph(out, trees);
    table(out, rows, sort_by);
    histograms(out, trees, rows);
    out += "<script>";
    out += kScript;
    out += "</script>\n</body>\n</html>\n";
    return out;
}

bool write_html_report(const std::string &out, const std::string &trace_file, const CallTrees &trees,
                       const CallFilter &filter, const std::string &sort_by, std::string *why)
{
    const std::string page = html_report(trace_file, trees, filter, sort_by);
    FILE *f = std::fopen(out.c_str(), "we");
    if (!f) {
        *why = fmt::format("{}: {}", out, std::strerror(errno));
        return false;
    }
    const bool written = std::fwrite(page.data(), 1, page.size(), f) == page.size();
    const int err = errno;
    if (std::fclose(f) != 0 || !written) {
        *why = fmt::format("{}: {}", out, std::strerror(written ? errno : err));
        return false;
    }
    return true;
}

}  // namespace liveprobe::tool
