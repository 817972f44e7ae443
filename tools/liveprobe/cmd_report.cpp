// liveprobe report FILE: each function of a trace file (`trace -o`), as uftrace's report shows
// them: calls, total and self time, and the shortest, mean and longest call, sorted by any
// column; or (--folded) each call path and its self time, folded as flame graph tools read; or
// (--html OUT.html) all of it as one self-contained page (html_report.hpp).
// Self time is a call's time less that of the shown calls it made; a recursive function's total
// counts its outermost calls only. The trees and their filters are call_tree.hpp's.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <map>
#include <memory>

#include <fmt/format.h>

#include "call_tree.hpp"
#include "commands.hpp"
#include "keyed_totals.hpp"
#include "html_report.hpp"

namespace liveprobe::tool {
namespace {

// Each call path of the shown calls ("main;parse;lex") and the self time of its calls, in ns.
// A trace file with stacks (trace -o --stacks): each stack folded, with its events, its frames
// named by the process's mappings the file keeps. false with *why if it cannot be read.
bool print_folded_stacks(const std::string &file, const CallFilter &filter, std::string *why)
{
    KeyedTotals stacks(KeyedOptions::folded_stacks());
    TraceProbes probes;
    int pid = 0;
    PrintOptions o;
    o.tid = filter.tid;
    return read_trace_file(
        file, &probes, &pid,
        [&](std::vector<TraceEvent> &batch) {
            stacks.symbols().set_fallback_maps(probes.maps);
            o.pid = pid;
            stacks.take(batch, probes, o);
        },
        why, false) && (stacks.print(), true);
}

void print_folded(const CallTrees &trees)
{
    CallPaths paths;
    for (const ThreadCalls &t : trees.threads) paths.add(t, [](const Call &) { return true; });
    std::map<std::string, uint64_t> folded;  // sorted, and a path in two threads once
    for (int32_t n = 1; n < static_cast<int32_t>(paths.nodes.size()); ++n)
        folded[paths.path_of(trees, n, ";")] += paths.nodes[n].self;
    for (const auto &[path, ns] : folded) std::printf("%s %" PRIu64 "\n", path.c_str(), ns);
}

void print(const std::map<std::string, FunctionRow> &by_name, const std::string &by)
{
    const std::vector<std::pair<std::string, FunctionRow>> rows = sorted_rows(by_name, by);
    std::printf("%12s  %12s  %10s  %12s  %12s  %12s  %s\n", "Total time", "Self time", "Calls", "Min", "Avg", "Max",
                "Function");
    std::printf("%12s  %12s  %10s  %12s  %12s  %12s  %s\n", "==========", "==========", "==========", "==========",
                "==========", "==========", "========");
    for (const auto &[name, r] : rows)
        std::printf("%12s  %12s  %10" PRIu64 "  %12s  %12s  %12s  %s\n", time_text(r.total).c_str(), time_text(r.self).c_str(),
                    r.calls, time_text(r.min).c_str(), time_text(r.avg()).c_str(),
                    time_text(r.max).c_str(), name.c_str());
}

}  // namespace

Runner add_report(CLI::App &app)
{
    auto *cmd = app.add_subcommand("report", "Each function of a trace file (trace -o): calls, total and self time, "
                                             "shortest, mean and longest call");
    auto file = std::make_shared<std::string>();
    auto by = std::make_shared<std::string>("total");
    auto folded = std::make_shared<bool>(false);
    auto html = std::make_shared<std::string>();
    auto filter = std::make_shared<CallFilter>();
    cmd->add_option("file", *file, "A trace file, written by liveprobe trace -o")->required();
    cmd->add_option("-s,--sort", *by, "The column to sort by, largest first: total, self, calls, min, avg, max, or name")
        ->check(CLI::IsMember({"total", "self", "calls", "min", "avg", "max", "name"}));
    auto *folded_flag = cmd->add_flag("--folded", *folded, "Each call path and its calls' self time in ns, folded "
                                                           "(main;parse;lex 1234), as flamegraph.pl and speedscope read; "
                                                           "a file with stacks (trace -o --stacks): each stack and its "
                                                           "events");
    cmd->add_option("--html", *html, "Write one self-contained page (no network) instead: a flame graph of the call "
                                     "paths, the table (sorted by -s), and the functions' latency histograms")
        ->type_name("OUT.html")
        ->excludes(folded_flag);
    filter->add_options(cmd);
    cmd->footer("Self time is a call's time less that of the shown calls it made (its callees that were not traced, or "
                "that the filters hide, count as its own). A recursive function's total time is that of its outermost "
                "calls. Instructions (FUNC+OFF, p:) have no time and are not shown.");
    return [file, by, folded, html, filter] {
        CallTrees trees;
        std::string why;
        if (!load_call_trees(*file, *filter, false, &trees, &why)) {
            complain("report: " + why);
            return kExitFailure;
        }
        if (!html->empty()) {
            if (!write_html_report(*html, *file, trees, *filter, *by, &why)) {
                complain("report: --html: " + why);
                return kExitFailure;
            }
        } else if (*folded && trees.probes.stack_depth) {
            if (!print_folded_stacks(*file, *filter, &why)) {
                complain("report: " + why);
                return kExitFailure;
            }
        } else if (*folded) {
            print_folded(trees);
        }
        else
            print(function_rows(trees), *by);
        return 0;
    };
}

}  // namespace liveprobe::tool
