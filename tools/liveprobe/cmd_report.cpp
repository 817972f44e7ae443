// liveprobe report FILE: each function of a trace file (`trace -o`), as uftrace's report shows
// them: calls, total and self time, and the shortest, mean and longest call, sorted by any
// column. Self time is a call's time less that of the traced calls it made.
//
// The events of one thread come in the order they returned (a ring is written at each
// return), so a call's callees come before it: each thread keeps the calls no caller has
// claimed yet, and a call claims those that began after it (its direct callees: theirs were
// claimed by them). A trace file may hold billions of events; what is kept is that stack, and
// a row per function.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <map>
#include <memory>
#include <unordered_map>

#include <fmt/format.h>

#include "commands.hpp"
#include "trace_output.hpp"

namespace liveprobe::tool {
namespace {

struct Row {
    uint64_t calls = 0, total = 0, self = 0, min = UINT64_MAX, max = 0;
};

struct Done {  // a call no caller has claimed yet
    uint64_t entry, took;
};

struct Report {
    std::map<std::string, Row> rows;
    std::unordered_map<uint64_t, std::vector<Done>> threads;  // by pid << 32 | tid
    int tid = 0;

    void add(const TraceEvent &e, const TraceProbes &probes)
    {
        const trace::Spec &spec = probes.spec_of(e.r.probe);
        if (spec.kind == trace::SpecKind::probe || (tid && static_cast<int>(e.r.tid) != tid)) return;
        const uint64_t took = e.r.exit_ns >= e.r.entry_ns ? e.r.exit_ns - e.r.entry_ns : 0;
        std::vector<Done> &done = threads[uint64_t{static_cast<uint32_t>(e.pid)} << 32 | e.r.tid];
        uint64_t callees = 0;
        while (!done.empty() && done.back().entry >= e.r.entry_ns) {
            callees += done.back().took;
            done.pop_back();
        }
        done.push_back({e.r.entry_ns, took});
        Row &r = rows[probes.name_of(e.r.probe)];
        ++r.calls;
        r.total += took;
        r.self += took >= callees ? took - callees : 0;
        r.min = std::min(r.min, took);
        r.max = std::max(r.max, took);
    }
};

std::string time_text(uint64_t ns)
{
    if (ns < 1000) return fmt::format("{} ns", ns);
    if (ns < 1000000) return fmt::format("{:.3f} us", static_cast<double>(ns) / 1e3);
    if (ns < 1000000000) return fmt::format("{:.3f} ms", static_cast<double>(ns) / 1e6);
    return fmt::format("{:.3f}  s", static_cast<double>(ns) / 1e9);
}

// The key of a sort column, larger first (name: in order).
uint64_t key(const Row &r, const std::string &by)
{
    if (by == "self") return r.self;
    if (by == "calls") return r.calls;
    if (by == "min") return r.min;
    if (by == "avg") return r.calls ? r.total / r.calls : 0;
    if (by == "max") return r.max;
    return r.total;
}

void print(const Report &rep, const std::string &by)
{
    std::vector<std::pair<std::string, Row>> rows(rep.rows.begin(), rep.rows.end());
    if (by != "name")
        std::stable_sort(rows.begin(), rows.end(), [&](const auto &a, const auto &b) { return key(a.second, by) > key(b.second, by); });
    std::printf("%12s  %12s  %10s  %12s  %12s  %12s  %s\n", "Total time", "Self time", "Calls", "Min", "Avg", "Max",
                "Function");
    std::printf("%12s  %12s  %10s  %12s  %12s  %12s  %s\n", "==========", "==========", "==========", "==========",
                "==========", "==========", "========");
    for (const auto &[name, r] : rows)
        std::printf("%12s  %12s  %10" PRIu64 "  %12s  %12s  %12s  %s\n", time_text(r.total).c_str(), time_text(r.self).c_str(),
                    r.calls, time_text(r.min).c_str(), time_text(r.calls ? r.total / r.calls : 0).c_str(),
                    time_text(r.max).c_str(), name.c_str());
}

}  // namespace

Runner add_report(CLI::App &app)
{
    auto *cmd = app.add_subcommand("report", "Each function of a trace file (trace -o): calls, total and self time, "
                                             "shortest, mean and longest call");
    auto file = std::make_shared<std::string>();
    auto by = std::make_shared<std::string>("total");
    auto tid = std::make_shared<int>(0);
    cmd->add_option("file", *file, "A trace file, written by liveprobe trace -o")->required();
    cmd->add_option("-s,--sort", *by, "The column to sort by, largest first: total, self, calls, min, avg, max, or name")
        ->check(CLI::IsMember({"total", "self", "calls", "min", "avg", "max", "name"}));
    cmd->add_option("--tid", *tid, "Only the calls of this thread");
    cmd->footer("Self time is a call's time less that of the traced calls it made (its callees that were not traced "
                "count as its own). Instructions (FUNC+OFF, p:) have no time and are not shown.");
    return [file, by, tid] {
        Report rep;
        rep.tid = *tid;
        TraceProbes probes;
        int pid = 0;
        std::string why;
        const bool ok = read_trace_file(
            *file, &probes, &pid,
            [&](std::vector<TraceEvent> &batch) {
                for (TraceEvent &e : batch) {
                    if (e.pid == 0) e.pid = pid;
                    rep.add(e, probes);
                }
            },
            &why, false);
        if (!ok) {
            complain("report: " + why);
            return kExitFailure;
        }
        print(rep, *by);
        return 0;
    };
}

}  // namespace liveprobe::tool
