// `trace --serve`'s metrics, written in Prometheus's text exposition format (version 0.0.4) or in
// OpenMetrics 1.0.0 (metrics_exposition.cpp). What is written is a snapshot the server takes of
// every traced process at a scrape (metrics_serve.cpp): nothing here reads a process.
//
//   liveprobe_calls_total{pid,comm,object,function[,key]}                 counter
//   liveprobe_call_duration_seconds_bucket{...,le}, _count (--hist)       histogram
//   liveprobe_missed_total{pid,comm,object,function}                      counter
//   liveprobe_events_dropped_total{pid,comm}                              counter
//   liveprobe_probes{pid,comm,path="jump"|"trap"}                         gauge
//   liveprobe_processes                                                   gauge
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "trace/rings.hpp"

namespace liveprobe::tool {

enum class MetricsFormat { prometheus, openmetrics };

// The format a scrape's Accept header asks for: OpenMetrics when it names
// application/openmetrics-text, as Prometheus asks when it prefers it; else the text format.
MetricsFormat format_accepted(const char *accept);
const char *content_type(MetricsFormat f);

// One function of one process (and one key of --by).
struct MetricsRow {
    std::string object;    // the executable's or library's file name ("nginx", "libz.so.1")
    std::string function;  // demangled; FUNC+0xOFF for an instruction
    std::string key;       // --by's key as printed ("" without --by)
    uint64_t calls = 0;    // --count: entries; --hist: returns and calls that left without one
    // --hist: the calls that returned, by log2 bucket of nanoseconds (rings.hpp kHistBuckets:
    // bucket b holds [2^(b-1), 2^b) ns, the last one everything longer).
    std::array<uint64_t, trace::kHistBuckets> hist{};
};

struct MetricsTarget {
    int pid = 0;
    std::string comm;
    uint64_t dropped = 0;  // events the full rings did not take (and of threads without a ring)
    uint32_t jump = 0, trap = 0;  // probes jump-optimized, and on the breakpoint path
    std::vector<MetricsRow> rows;
    // Calls not followed (more at once than maxactive), by (object, function): a probe's, not
    // a key's.
    std::map<std::pair<std::string, std::string>, uint64_t> missed;
};

struct MetricsSnapshot {
    bool hist = false;      // histograms of durations (--hist), beside the calls
    // liveprobe_processes: how many are served (targets holds those whose session is set up).
    size_t processes = 0;
    std::string key_label;  // --by: the label its key is given ("" without)
    std::vector<MetricsTarget> targets;
};

// The snapshot in format f, whole (OpenMetrics' ends with "# EOF").
std::string render_metrics(const MetricsSnapshot &s, MetricsFormat f);

// A label's value escaped as both formats want it (\\, \", \n).
std::string escape_label(const std::string &v);

}  // namespace liveprobe::tool
