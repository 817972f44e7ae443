// liveprobe report FILE --html OUT.html: a trace file's calls as one self-contained page, which
// a browser opens from disk with no network: a flame graph of the call paths (CallPaths, all
// threads merged, as --folded merges them) drawn as inline SVG, report's per-function table,
// and the log2 histograms of the functions' durations (trace --hist's buckets) as SVG bar
// charts. Inline CSS and script only: the script zooms the flame graph, searches it, sorts the
// table and shows a long one's first rows until asked for all (without the script, all show),
// and says in the page (#lp-status) whether it ran ("ok") or failed ("error: ...").
// The page is bounded whatever the trace: the flame graph draws the kMaxFrames widest call paths
// at most (a narrow one is still there to zoom into: none is left out for its width alone),
// the table kMaxRows functions, and kMaxHists histograms; the page says what it left out.
#pragma once

#include <cstddef>
#include <string>

#include "call_tree.hpp"

namespace liveprobe::tool {

namespace html_limits {
constexpr size_t kMaxFrames = 8000;
constexpr int kMaxDepth = 200;  // flame graph levels above "all"
constexpr size_t kMaxRows = 10000;
constexpr size_t kMaxHists = 20;
}  // namespace html_limits

// The page for `trees` (loaded from trace_file with `filter`), its table sorted by `sort_by`
// (report's -s column).
std::string html_report(const std::string &trace_file, const CallTrees &trees, const CallFilter &filter,
                        const std::string &sort_by);

// Writes html_report's page to `out`: false with *why when it cannot.
bool write_html_report(const std::string &out, const std::string &trace_file, const CallTrees &trees,
                       const CallFilter &filter, const std::string &sort_by, std::string *why);

}  // namespace liveprobe::tool
