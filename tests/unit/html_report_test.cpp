// The page of `liveprobe report FILE --html` (tools/liveprobe/html_report.hpp) for call trees
// made up here: it stays bounded however many call paths and functions a trace holds, says what
// it left out, escapes names, and names a frame too narrow for text in its tooltip only.
// (tests/scripts/html_report_test.sh opens real pages in a browser.)
#include <gtest/gtest.h>

#include <string>

#include <fmt/format.h>

#include "html_report.hpp"

using namespace liveprobe::tool;

namespace {

size_t count(const std::string &s, const std::string &what)
{
    size_t n = 0;
    for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + what.size())) ++n;
    return n;
}

// One thread's calls, each shown: `calls` as {probe, parent index, took}, laid out one after
// the other under their parent (the parent first, and its time enough for its callees').
struct Made {
    uint32_t probe;
    int32_t parent;
    uint64_t took;
};
CallTrees trees_of(std::vector<std::string> names, const std::vector<Made> &calls)
{
    CallTrees t;
    t.names = std::move(names);
    ThreadCalls thread{4242, 4242, {}};
    std::vector<uint64_t> next(calls.size());  // per call: where its next callee begins
    for (size_t i = 0; i < calls.size(); ++i) {
        const Made &m = calls[i];
        const uint64_t entry = m.parent < 0 ? 0 : next[m.parent];
        if (m.parent >= 0) next[m.parent] += m.took;
        next[i] = entry;
        const int32_t depth = m.parent < 0 ? 0 : thread.calls[m.parent].depth + 1;
        thread.calls.push_back(Call{entry, entry + m.took, m.probe, 0, m.parent, depth, true});
    }
    t.threads.push_back(std::move(thread));
    return t;
}

// main calling `n` functions once each, the i-th taking i + 1 ns: n + 1 call paths.
CallTrees fan_out(size_t n)
{
    std::vector<std::string> names{"main"};
    std::vector<Made> calls{{0, -1, n * (n + 1) / 2 + 1}};
    for (size_t i = 0; i < n; ++i) {
        names.push_back("f" + std::to_string(i));
        calls.push_back({static_cast<uint32_t>(i + 1), 0, i + 1});
    }
    return trees_of(names, calls);
}

}  // namespace

TEST(HtmlReport, ThePageIsBoundedHoweverManyCallPathsAndFunctions)
{
    const size_t n = 50000;
    const std::string page = html_report("many.lptrace", fan_out(n), CallFilter{}, "total");
    EXPECT_EQ(count(page, "<g class=\"fr\""), html_limits::kMaxFrames + 1);  // and "all"
    EXPECT_NE(page.find(fmt::format("{} of the {} call paths are not drawn", n + 1 - html_limits::kMaxFrames, n + 1)),
              std::string::npos);
    // The widest are drawn: main, then f49999 down.
    EXPECT_NE(page.find("<title>f49999\n"), std::string::npos);
    EXPECT_NE(page.find(fmt::format("<title>f{}\n", n - html_limits::kMaxFrames + 1)), std::string::npos);
    EXPECT_EQ(page.find(fmt::format("<title>f{}\n", n - html_limits::kMaxFrames)), std::string::npos);
    EXPECT_EQ(page.find("<title>f0\n"), std::string::npos);
    EXPECT_EQ(count(page, "<td class=\"fn\">"), html_limits::kMaxRows);
    EXPECT_NE(page.find(fmt::format("The first {} of {} functions", html_limits::kMaxRows, n + 1)), std::string::npos);
    EXPECT_NE(page.find(fmt::format("<button id=\"lp-more\" hidden>Show all {} functions</button>", html_limits::kMaxRows)),
              std::string::npos);
    EXPECT_EQ(count(page, "<figure class=\"hist\""), html_limits::kMaxHists);
    EXPECT_NE(page.find(fmt::format("The {} functions of most total time, of {}.", html_limits::kMaxHists, n + 1)),
              std::string::npos);
    EXPECT_LT(page.size(), 8u << 20) << "bytes";
}

TEST(HtmlReport, DeepRecursionIsDrawnToMaxDepthWithTooltipsOfBoundedSize)
{
    const int depth = 5000;
    std::vector<Made> calls;
    for (int i = 0; i < depth; ++i) calls.push_back({0, i - 1, static_cast<uint64_t>(depth - i) * 10});
    const std::string page = html_report("deep.lptrace", trees_of({"recurse"}, calls), CallFilter{}, "total");
    EXPECT_EQ(count(page, "<g class=\"fr\""), static_cast<size_t>(html_limits::kMaxDepth) + 1);
    EXPECT_NE(page.find(fmt::format("{} of the {} call paths are not drawn", depth - html_limits::kMaxDepth, depth)),
              std::string::npos);
    EXPECT_LT(page.size(), 1u << 20) << "bytes: a tooltip's path is cut, not 5000 names long";
}

TEST(HtmlReport, NamesAreEscapedEverywhere)
{
    const std::string name = "operator<<(std::ostream&, lp::Box<int> const&) \"q\" 'a'";
    const std::string page =
        html_report("a<b>&.lptrace", trees_of({"main", name}, {{0, -1, 100}, {1, 0, 60}}), CallFilter{}, "total");
    EXPECT_EQ(page.find("Box<int>"), std::string::npos);
    EXPECT_EQ(page.find("a<b>"), std::string::npos);
    const std::string escaped = "operator&lt;&lt;(std::ostream&amp;, lp::Box&lt;int&gt; const&amp;) &quot;q&quot; &#39;a&#39;";
    EXPECT_NE(page.find("<title>" + escaped + "\npath: main;" + escaped + "\n"), std::string::npos);  // flame graph
    EXPECT_NE(page.find("<td class=\"fn\">" + escaped + "</td>"), std::string::npos);                 // table
    EXPECT_NE(page.find("<figure class=\"hist\" data-fn=\"" + escaped + "\">"), std::string::npos);    // histogram
    EXPECT_NE(page.find("<h1>liveprobe report: a&lt;b&gt;&amp;.lptrace</h1>"), std::string::npos);
}

TEST(HtmlReport, AFrameTooNarrowForTextKeepsItsTitle)
{
    // wide takes 90% of main's time, narrow 0.01%: a fraction of a pixel.
    const std::string page = html_report(
        "t.lptrace", trees_of({"main", "wide", "narrow"}, {{0, -1, 100000}, {1, 0, 90000}, {2, 0, 10}}), CallFilter{},
        "total");
    const size_t wide = page.find("<title>wide\n"), narrow = page.find("<title>narrow\n");
    ASSERT_NE(wide, std::string::npos);
    ASSERT_NE(narrow, std::string::npos);
    const std::string wide_frame = page.substr(wide, page.find("</g>", wide) - wide);
    const std::string narrow_frame = page.substr(narrow, page.find("</g>", narrow) - narrow);
    EXPECT_NE(wide_frame.find("<text"), std::string::npos) << wide_frame;
    EXPECT_EQ(narrow_frame.find("<text"), std::string::npos) << narrow_frame;
    EXPECT_NE(narrow_frame.find("1 call, total 10 ns (0.01%), self 10 ns"), std::string::npos) << narrow_frame;
}

TEST(HtmlReport, AFrameOfALibrarysFunctionReadsItsNameWithoutTheLibrary)
{
    const std::string lib = "libjq.so.1:jv_free", cxx = "lp::Box<int>::get() const", both = "libx.so:ns::f(int)";
    const std::string page = html_report(
        "t.lptrace", trees_of({"main", lib, cxx, both}, {{0, -1, 3000}, {1, 0, 1000}, {2, 0, 1000}, {3, 0, 1000}}),
        CallFilter{}, "total");
    EXPECT_NE(page.find("data-l=\"jv_free\"><title>libjq.so.1:jv_free\n"), std::string::npos);
    EXPECT_NE(page.find(">jv_free</text>"), std::string::npos);
    EXPECT_NE(page.find("data-l=\"ns::f(int)\"><title>libx.so:ns::f(int)\n"), std::string::npos);
    EXPECT_NE(page.find("\"><title>lp::Box&lt;int&gt;::get() const\n"), std::string::npos);  // no data-l
    EXPECT_EQ(count(page, "data-l="), 2u);
    EXPECT_EQ(page.find("<button id=\"lp-more\""), std::string::npos);  // 4 rows: no button to show them all
}

TEST(HtmlReport, APageOfNoCallSaysSoAndKeepsItsScript)
{
    CallTrees trees = trees_of({"main"}, {{0, -1, 100}});
    trees.threads[0].calls[0].shown = false;  // as a filter hides it
    CallFilter filter;
    filter.exclude = {"main"};
    const std::string page = html_report("t.lptrace", trees, filter, "total");
    EXPECT_EQ(page.find("id=\"lp-flame\""), std::string::npos);
    EXPECT_NE(page.find("No call to draw"), std::string::npos);
    EXPECT_NE(page.find("<dd>-N main</dd>"), std::string::npos);
    EXPECT_NE(page.find("'ok'"), std::string::npos);
}

TEST(HtmlReport, AFrameIsColouredByItsName)
{
    const CallTrees a = trees_of({"main", "f"}, {{0, -1, 100}, {1, 0, 50}});
    const CallTrees b = trees_of({"f", "main"}, {{0, -1, 300}, {1, 0, 10}});
    const auto fill_of = [](const std::string &page, const std::string &name) {
        const size_t at = page.find("fill=\"", page.find("<title>" + name + "\n")) + 6;
        return page.substr(at, page.find('"', at) - at);
    };
    const std::string pa = html_report("a", a, CallFilter{}, "total"), pb = html_report("b", b, CallFilter{}, "total");
    EXPECT_EQ(fill_of(pa, "f"), fill_of(pb, "f"));
    EXPECT_EQ(fill_of(pa, "main"), fill_of(pb, "main"));
    EXPECT_NE(fill_of(pa, "f"), fill_of(pa, "main"));
}
