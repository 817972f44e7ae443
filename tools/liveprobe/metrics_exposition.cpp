// The exposition of `trace --serve`'s metrics (metrics_exposition.hpp). The two formats differ
// here: OpenMetrics names a counter's family without its _total (its samples keep it), says
// "# UNIT" for a unit in the name, and ends with "# EOF"; the text format does neither.
#include "metrics_exposition.hpp"

#include <cmath>
#include <cstring>

#include <fmt/format.h>

namespace liveprobe::tool {
namespace {

struct Family {
    const char *name;  // the sample's base name (a counter's with its _total)
    const char *type;
    const char *unit;  // "" or the unit its name ends with
    const char *help;
};

constexpr Family kCalls{"liveprobe_calls_total", "counter", "",
                        "Calls of a traced function (--count: entries; --hist: returns and calls that left "
                        "without returning)"};
constexpr Family kDuration{"liveprobe_call_duration_seconds", "histogram", "seconds",
                           "How long the calls of a traced function took, from entry to return"};
constexpr Family kMissed{"liveprobe_missed_total", "counter", "",
                         "Calls of a traced function not followed: more of them at once than --maxactive"};
constexpr Family kDropped{"liveprobe_events_dropped_total", "counter", "",
                          "Events the full rings of a traced process did not take (--by keys miss them)"};
constexpr Family kProcesses{"liveprobe_processes", "gauge", "",
                            "Processes served (--follow-name: those of the name attached now)"};
constexpr Family kProbes{"liveprobe_probes", "gauge", "",
                         "Probes placed in a traced process, by path: jump (optimized) or trap (breakpoint)"};

void family_head(std::string &out, const Family &f, MetricsFormat fmt)
{
    std::string name = f.name;
    if (fmt == MetricsFormat::openmetrics && std::strcmp(f.type, "counter") == 0) name.resize(name.size() - 6);
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, f.help, name, f.type);
    if (fmt == MetricsFormat::openmetrics && *f.unit) out += fmt::format("# UNIT {} {}\n", name, f.unit);
}

std::string target_labels(const MetricsTarget &t)
{
    return fmt::format("pid=\"{}\",comm=\"{}\"", t.pid, escape_label(t.comm));
}

// A row's labels; `key`: with --by's.
std::string row_labels(const MetricsTarget &t, const MetricsRow &r, const std::string &key_label)
{
    std::string l = fmt::format("{},object=\"{}\",function=\"{}\"", target_labels(t), escape_label(r.object),
                                escape_label(r.function));
    if (!key_label.empty()) l += fmt::format(",{}=\"{}\"", key_label, escape_label(r.key));
    return l;
}

// Bucket b's upper bound, in seconds: calls up to bucket b took less than 2^b ns.
std::string le_of(uint32_t b) { return fmt::format("{}", std::ldexp(1.0, static_cast<int>(b)) / 1e9); }

// No _sum: the target keeps no sum of durations (--hist's return adds one to one bucket, on one
// cache line). Without it OpenMetrics has no _count either (the +Inf bucket is the count); the
// text format's is kept, for rate(..._count) as its users write it.
void histogram(std::string &out, const std::string &labels, const MetricsRow &r, MetricsFormat f)
{
    uint64_t cumulative = 0;
    for (uint32_t b = 0; b + 1 < trace::kHistBuckets; ++b) {
        cumulative += r.hist[b];
        out += fmt::format("liveprobe_call_duration_seconds_bucket{{{},le=\"{}\"}} {}\n", labels, le_of(b), cumulative);
    }
    cumulative += r.hist[trace::kHistBuckets - 1];
    out += fmt::format("liveprobe_call_duration_seconds_bucket{{{},le=\"+Inf\"}} {}\n", labels, cumulative);
    if (f == MetricsFormat::prometheus)
        out += fmt::format("liveprobe_call_duration_seconds_count{{{}}} {}\n", labels, cumulative);
}

}  // namespace

MetricsFormat format_accepted(const char *accept)
{
    return accept && std::strstr(accept, "application/openmetrics-text") ? MetricsFormat::openmetrics
                                                                          : MetricsFormat::prometheus;
}

const char *content_type(MetricsFormat f)
{
    return f == MetricsFormat::openmetrics ? "application/openmetrics-text; version=1.0.0; charset=utf-8"
                                           : "text/plain; version=0.0.4; charset=utf-8";
}

std::string escape_label(const std::string &v)
{
    std::string out;
    out.reserve(v.size());
    for (char c : v) {
        if (c == '\\') out += "\\\\";
        else if (c == '"') out += "\\\"";
        else if (c == '\n') out += "\\n";
        else out += c;
    }
    return out;
}

std::string render_metrics(const MetricsSnapshot &s, MetricsFormat f)
{
    std::string out;
    family_head(out, kCalls, f);
    for (const MetricsTarget &t : s.targets)
        for (const MetricsRow &r : t.rows)
            out += fmt::format("liveprobe_calls_total{{{}}} {}\n", row_labels(t, r, s.key_label), r.calls);
    if (s.hist) {
        family_head(out, kDuration, f);
        for (const MetricsTarget &t : s.targets)
            for (const MetricsRow &r : t.rows) histogram(out, row_labels(t, r, s.key_label), r, f);
    }
    family_head(out, kMissed, f);
    for (const MetricsTarget &t : s.targets) {
        for (const auto &[fn, m] : t.missed)
            out += fmt::format("liveprobe_missed_total{{{},object=\"{}\",function=\"{}\"}} {}\n", target_labels(t),
                               escape_label(fn.first), escape_label(fn.second), m);
    }
    family_head(out, kDropped, f);
    for (const MetricsTarget &t : s.targets)
        out += fmt::format("liveprobe_events_dropped_total{{{}}} {}\n", target_labels(t), t.dropped);
    family_head(out, kProbes, f);
    for (const MetricsTarget &t : s.targets) {
        out += fmt::format("liveprobe_probes{{{},path=\"jump\"}} {}\n", target_labels(t), t.jump);
        out += fmt::format("liveprobe_probes{{{},path=\"trap\"}} {}\n", target_labels(t), t.trap);
    }
    family_head(out, kProcesses, f);
    out += fmt::format("liveprobe_processes {}\n", s.processes);
    if (f == MetricsFormat::openmetrics) out += "# EOF\n";
    return out;
}

}  // namespace liveprobe::tool
