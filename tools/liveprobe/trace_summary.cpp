// What `liveprobe trace` says on stderr at the end (trace_summary.hpp).
#include "trace_summary.hpp"

#include <algorithm>
#include <cinttypes>
#include <cstdio>

#include <fmt/format.h>

namespace liveprobe::tool {

// `events`: what the reading took out of the rings (per-event modes), and `read`, the words
// for it (" (N events read)"), or empty (--count, --hist: the calls are the counters' sum). In
// the per-event modes the target counts no calls, only what the full rings dropped: the calls
// are what was read and what was dropped.
void print_summary(const Folded &f, uint64_t events, const std::string &read)
{
    uint64_t calls = 0, left = 0;
    for (uint64_t n : f.count) calls += n;
    for (uint64_t n : f.left) left += n;
    if (!read.empty()) calls = events + f.dropped;
    // --hist and per event: the calls that left without returning are calls too (--count
    // counts them at their entry), though they have no duration and no event.
    calls += left;
    std::string of_which = left ? fmt::format(" ({} left without returning)", left) : std::string();
    std::string miss = f.unknown_missed == 0 ? std::to_string(f.missed)
                       : f.images == 1       ? std::string("unknown (the process ended abruptly)")
                                             : fmt::format("{}, and unknown in {} of {} processes (ended abruptly, or "
                                                           "executed another program)",
                                                           f.missed, f.unknown_missed, f.images);
    std::fprintf(stderr, "liveprobe: %zu functions traced, %" PRIu64 " calls%s, %" PRIu64 " dropped (ring full), %" PRIu64
                         " without a ring, missed %s\n",
                 f.keys.size(), calls, (read + of_which).c_str(), f.dropped, f.unringed, miss.c_str());
}

// --verbose, --count or --hist: which of the functions that were called took the breakpoint
// path (a signal a hit), the most called first, each with its reason (the verbose list at the
// start names every one, called or not). Probes whose reason the target could not publish
// count as on the jump path.
void print_breakpoint_calls(const Folded &f, const TraceProbes &names)
{
    std::vector<std::pair<uint64_t, uint32_t>> slow;  // (calls, key)
    size_t called = 0;
    for (uint32_t k = 0; k < f.count.size(); ++k) {
        const uint64_t n = f.count[k] + f.left[k];
        if (n == 0) continue;
        ++called;
        if (f.slow.count(k)) slow.emplace_back(n, k);
    }
    std::sort(slow.begin(), slow.end(), [](auto &a, auto &b) { return a.first > b.first; });
    if (slow.empty()) {
        std::fprintf(stderr, "liveprobe: the %zu functions called all took the jump path\n", called);
        return;
    }
    std::fprintf(stderr, "liveprobe: %zu of the %zu functions called took the breakpoint path:\n", slow.size(), called);
    for (auto [calls, k] : slow)
        std::fprintf(stderr, "liveprobe:   %s: %" PRIu64 " call%s: %s\n", names.names[k].c_str(), calls,
                     calls == 1 ? "" : "s", f.slow.at(k).c_str());
}

// --verbose: which functions the missed calls were of, the most first. A miss is a hit while
// the thread ran liveprobe's own handler (a signal handler that interrupted it calls a probed
// function, as the kernel's kprobes miss a reentrant hit) or with every return instance of
// the function taken (--maxactive).
void print_missed_by_function(const Folded &f, const TraceProbes &names)
{
    std::vector<std::pair<uint64_t, uint32_t>> rows;
    for (uint32_t k = 0; k < f.missed_by.size(); ++k)
        if (f.missed_by[k]) rows.emplace_back(f.missed_by[k], k);
    if (rows.empty()) return;
    std::sort(rows.begin(), rows.end(), [](auto &a, auto &b) { return a.first > b.first; });
    std::fprintf(stderr, "liveprobe: the %" PRIu64 " missed calls were of %zu function%s:\n", f.missed, rows.size(),
                 rows.size() == 1 ? "" : "s");
    for (size_t i = 0; i < rows.size() && i < 20; ++i)
        std::fprintf(stderr, "liveprobe:   %s: %" PRIu64 "\n", names.names[rows[i].second].c_str(), rows[i].first);
    if (rows.size() > 20) std::fprintf(stderr, "liveprobe:   ... and %zu more functions\n", rows.size() - 20);
}

}  // namespace liveprobe::tool
