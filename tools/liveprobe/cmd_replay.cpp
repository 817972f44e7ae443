// liveprobe replay FILE: the calls of a trace file (`trace -o`) as a tree, thread by thread, as
// uftrace's replay shows them: each call indented by its depth among the traced calls, with
// its duration and value; a call that made traced calls opens a block its end closes.
//
// A thread's events come in the order they returned; the tree is in the order they began: the
// events are read whole (at most kMaxEvents), then each thread's sorted by entry, and a call
// is the child of the nearest open call that ends after it.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <map>
#include <memory>

#include <fmt/format.h>

#include "commands.hpp"
#include "trace_output.hpp"

namespace liveprobe::tool {
namespace {

constexpr size_t kMaxEvents = 20'000'000;

struct Call {
    uint64_t entry, exit;
    std::string name, value;  // value: " = VALUE", " NAME=VALUE...", or ""
};

std::string duration(uint64_t ns)
{
    if (ns < 1000) return fmt::format("{:7} ns", ns);
    if (ns < 1000000) return fmt::format("{:7.3f} us", static_cast<double>(ns) / 1e3);
    if (ns < 1000000000) return fmt::format("{:7.3f} ms", static_cast<double>(ns) / 1e6);
    return fmt::format("{:7.3f}  s", static_cast<double>(ns) / 1e9);
}

// One thread's calls, as a tree: `calls` sorted by entry (a longer call first at a tie). A call
// whose traced callees are shown opens a block; others take a line.
void print_thread(uint64_t key, std::vector<Call> &calls, int max_depth)
{
    std::sort(calls.begin(), calls.end(),
              [](const Call &a, const Call &b) { return a.entry != b.entry ? a.entry < b.entry : a.exit > b.exit; });
    const auto tid = static_cast<uint32_t>(key);
    struct Open {
        const Call *call;
        bool block;  // printed as a block, closed by a line of its own
    };
    std::vector<Open> open;  // the calls still running at the one printed, outermost first
    const auto close_to = [&](uint64_t t) {
        while (!open.empty() && open.back().call->exit <= t) {
            const Open o = open.back();
            open.pop_back();
            if (o.block)
                std::printf("%s [%6u] | %*s}%s /* %s */\n", duration(o.call->exit - o.call->entry).c_str(), tid,
                            static_cast<int>(2 * open.size()), "", o.call->value.c_str(), o.call->name.c_str());
        }
    };
    for (size_t i = 0; i < calls.size(); ++i) {
        const Call &c = calls[i];
        close_to(c.entry);
        const int depth = static_cast<int>(open.size());
        const bool callees = i + 1 < calls.size() && calls[i + 1].entry < c.exit;  // a traced call inside
        const bool block = callees && depth + 1 < max_depth;
        if (depth < max_depth) {
            if (block)
                std::printf("%10s [%6u] | %*s%s() {\n", "", tid, 2 * depth, "", c.name.c_str());
            else
                std::printf("%s [%6u] | %*s%s();%s\n", duration(c.exit - c.entry).c_str(), tid, 2 * depth, "",
                            c.name.c_str(), c.value.c_str());
        }
        open.push_back({&c, block});
    }
    close_to(UINT64_MAX);
}

}  // namespace

Runner add_replay(CLI::App &app)
{
    auto *cmd = app.add_subcommand("replay", "The calls of a trace file (trace -o) as a tree, thread by thread");
    auto file = std::make_shared<std::string>();
    auto tid = std::make_shared<int>(0);
    auto depth = std::make_shared<int>(1 << 20);
    cmd->add_option("file", *file, "A trace file, written by liveprobe trace -o")->required();
    cmd->add_option("--tid", *tid, "Only this thread's calls");
    cmd->add_option("-D,--depth", *depth, "Show calls this deep at most (1: the outermost only)")->check(CLI::PositiveNumber);
    cmd->footer("The depth is among the traced calls: a call's untraced callees are not shown. Calls that left without "
                "returning (an exception, a longjmp) have no event and are not shown.");
    return [file, tid, depth] {
        std::map<uint64_t, std::vector<Call>> threads;  // pid << 32 | tid, in that order
        TraceProbes probes;
        int pid = 0;
        size_t kept = 0;
        std::string why;
        bool too_many = false;
        const bool ok = read_trace_file(
            *file, &probes, &pid,
            [&](std::vector<TraceEvent> &batch) {
                for (const TraceEvent &e : batch) {
                    const trace::Spec &spec = probes.spec_of(e.r.probe);
                    if (spec.kind == trace::SpecKind::probe || (*tid && static_cast<int>(e.r.tid) != *tid)) continue;
                    if (++kept > kMaxEvents) {
                        too_many = true;
                        return;
                    }
                    // " = VALUE" of a call, " NAME=VALUE..." of a return probe's values.
                    std::string value = spec.kind == trace::SpecKind::call ? call_value(spec, e, false)
                                                                           : values_text(spec, e.values, false);
                    if (spec.kind == trace::SpecKind::call && !value.empty()) value = " = " + value;
                    threads[uint64_t{static_cast<uint32_t>(e.pid ? e.pid : pid)} << 32 | e.r.tid].push_back(
                        {e.r.entry_ns, e.r.exit_ns, probes.name_of(e.r.probe), value});
                }
            },
            &why, false);
        if (!ok) {
            complain("replay: " + why);
            return kExitFailure;
        }
        if (too_many) {
            complain(fmt::format("replay: {} holds more than {} calls: show one thread (--tid)", *file, kMaxEvents));
            return kExitFailure;
        }
        std::printf("# DURATION    TID     FUNCTION\n");
        for (auto &[key, calls] : threads) print_thread(key, calls, *depth);
        return 0;
    };
}

}  // namespace liveprobe::tool
