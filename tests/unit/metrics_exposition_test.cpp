// trace --serve's exposition (tools/liveprobe/metrics_exposition.cpp), whole, in both formats:
// the families and their order, the labels escaped, le in seconds and cumulative, OpenMetrics'
// differences (a counter's family without _total, # UNIT, no _count without a _sum, # EOF).
#include <gtest/gtest.h>

#include <algorithm>

#include "metrics_exposition.hpp"

using namespace liveprobe::tool;

namespace {

MetricsSnapshot snapshot()
{
    MetricsSnapshot s;
    s.hist = true;
    s.processes = 1;
    MetricsTarget t;
    t.pid = 42;
    t.comm = "srv";
    t.dropped = 7;
    t.jump = 2;
    t.trap = 1;
    MetricsRow r;
    r.object = "libfoo.so.1";
    r.function = "ns::f(char const*, \"q\")\\";
    r.calls = 6;
    r.hist[0] = 1;  // 0 ns
    r.hist[3] = 2;  // [4, 8) ns
    r.hist[38] = 2;
    r.hist[39] = 1;  // 2^38 ns and longer: only in +Inf
    t.rows.push_back(r);
    t.missed[{r.object, r.function}] = 3;
    s.targets.push_back(t);
    return s;
}

// The lines that name `metric` (a bucket's by its le).
std::string lines_of(const std::string &text, const std::string &start)
{
    std::string out;
    for (size_t at = 0; at < text.size();) {
        const size_t nl = text.find('\n', at);
        const std::string line = text.substr(at, nl - at);
        if (line.rfind(start, 0) == 0) out += line + "\n";
        at = nl + 1;
    }
    return out;
}

const char *kLabels = "pid=\"42\",comm=\"srv\",object=\"libfoo.so.1\",function=\"ns::f(char const*, \\\"q\\\")\\\\\"";

}  // namespace

TEST(MetricsExposition, TextFormat)
{
    const std::string text = render_metrics(snapshot(), MetricsFormat::prometheus);
    const std::string l = kLabels;
    EXPECT_EQ(lines_of(text, "liveprobe_calls_total"), "liveprobe_calls_total{" + l + "} 6\n");
    EXPECT_EQ(lines_of(text, "# TYPE"),
              "# TYPE liveprobe_calls_total counter\n# TYPE liveprobe_call_duration_seconds histogram\n"
              "# TYPE liveprobe_missed_total counter\n# TYPE liveprobe_events_dropped_total counter\n"
              "# TYPE liveprobe_probes gauge\n# TYPE liveprobe_processes gauge\n");
    const std::string buckets = lines_of(text, "liveprobe_call_duration_seconds_bucket");
    EXPECT_EQ(std::count(buckets.begin(), buckets.end(), '\n'), 40);  // 2^0 .. 2^38 ns, +Inf
    EXPECT_NE(buckets.find("{" + l + ",le=\"1e-09\"} 1\n"), std::string::npos);
    EXPECT_NE(buckets.find("{" + l + ",le=\"4e-09\"} 1\n"), std::string::npos);  // < 4 ns: the 0
    EXPECT_NE(buckets.find("{" + l + ",le=\"8e-09\"} 3\n"), std::string::npos);
    EXPECT_NE(buckets.find("{" + l + ",le=\"1.024e-06\"} 3\n"), std::string::npos);
    EXPECT_NE(buckets.find("{" + l + ",le=\"274.877906944\"} 5\n"), std::string::npos);  // 2^38 ns
    EXPECT_NE(buckets.find("{" + l + ",le=\"+Inf\"} 6\n"), std::string::npos);
    EXPECT_EQ(lines_of(text, "liveprobe_call_duration_seconds_count"),
              "liveprobe_call_duration_seconds_count{" + l + "} 6\n");
    EXPECT_EQ(lines_of(text, "liveprobe_missed_total"), "liveprobe_missed_total{" + l + "} 3\n");
    EXPECT_EQ(lines_of(text, "liveprobe_events_dropped_total"),
              "liveprobe_events_dropped_total{pid=\"42\",comm=\"srv\"} 7\n");
    EXPECT_EQ(lines_of(text, "liveprobe_probes"), "liveprobe_probes{pid=\"42\",comm=\"srv\",path=\"jump\"} 2\n"
                                                  "liveprobe_probes{pid=\"42\",comm=\"srv\",path=\"trap\"} 1\n");
    EXPECT_EQ(lines_of(text, "liveprobe_processes"), "liveprobe_processes 1\n");
    EXPECT_EQ(lines_of(text, "# EOF"), "");
}

TEST(MetricsExposition, OpenMetrics)
{
    const std::string text = render_metrics(snapshot(), MetricsFormat::openmetrics);
    EXPECT_EQ(lines_of(text, "# TYPE"),
              "# TYPE liveprobe_calls counter\n# TYPE liveprobe_call_duration_seconds histogram\n"
              "# TYPE liveprobe_missed counter\n# TYPE liveprobe_events_dropped counter\n"
              "# TYPE liveprobe_probes gauge\n# TYPE liveprobe_processes gauge\n");
    EXPECT_EQ(lines_of(text, "# UNIT"), "# UNIT liveprobe_call_duration_seconds seconds\n");
    EXPECT_EQ(lines_of(text, "liveprobe_calls_total"), std::string("liveprobe_calls_total{") + kLabels + "} 6\n");
    EXPECT_EQ(lines_of(text, "liveprobe_call_duration_seconds_count"), "");
    EXPECT_EQ(text.substr(text.size() - 6), "# EOF\n");
}

TEST(MetricsExposition, ByKeyAndNoHist)
{
    MetricsSnapshot s = snapshot();
    s.hist = false;
    s.key_label = "tid";
    s.targets[0].rows[0].key = "43";
    const std::string text = render_metrics(s, MetricsFormat::prometheus);
    EXPECT_EQ(lines_of(text, "liveprobe_calls_total{"), std::string("liveprobe_calls_total{") + kLabels + ",tid=\"43\"} 6\n");
    EXPECT_EQ(lines_of(text, "liveprobe_call_duration_seconds"), "");
    EXPECT_EQ(lines_of(text, "liveprobe_missed_total{"), std::string("liveprobe_missed_total{") + kLabels + "} 3\n");
}

TEST(MetricsExposition, AcceptHeader)
{
    EXPECT_EQ(format_accepted(nullptr), MetricsFormat::prometheus);
    EXPECT_EQ(format_accepted("text/plain;version=0.0.4;q=0.5,*/*;q=0.1"), MetricsFormat::prometheus);
    // What Prometheus 2.42 asks.
    EXPECT_EQ(format_accepted("application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;"
                              "q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"),
              MetricsFormat::openmetrics);
    EXPECT_EQ(escape_label("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
}
