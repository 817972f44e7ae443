// liveprobe replay FILE: the calls of a trace file (`trace -o`) as a tree, thread by thread, as
// uftrace's replay shows them: each call indented by its depth among the shown calls, with its
// duration and value; a call that made shown calls opens a block its end closes. The trees and
// their filters are call_tree.hpp's.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <memory>

#include "call_tree.hpp"
#include "commands.hpp"

namespace liveprobe::tool {
namespace {

// One thread's shown calls, as a tree. A call whose callees are shown opens a block; others
// take a line.
void print_thread(const CallTrees &trees, const ThreadCalls &t)
{
    const auto line = [&](std::optional<uint64_t> took, const Call &c, const std::string &text) {
        std::printf("%s\n", tree_line(took, t.tid, c.depth, text).c_str());
    };
    std::vector<const Call *> open;  // the blocks still open at the call printed, outermost first
    const auto close_to = [&](uint64_t t_ns) {
        while (!open.empty() && open.back()->exit <= t_ns) {
            const Call &c = *open.back();
            open.pop_back();
            line(c.took(), c, "}" + trees.values[c.value] + " /* " + trees.names[c.probe] + " */");
        }
    };
    const std::vector<Call> &calls = t.calls;
    for (size_t i = 0; i < calls.size(); ++i) {
        const Call &c = calls[i];
        if (!c.shown) continue;
        close_to(c.entry);
        size_t next = i + 1;
        while (next < calls.size() && !calls[next].shown && calls[next].entry < c.exit) ++next;
        if (next < calls.size() && calls[next].shown && calls[next].parent == static_cast<int32_t>(i)) {
            line(std::nullopt, c, call_name(trees.names[c.probe]) + " {");
            open.push_back(&c);
        } else {
            line(c.took(), c, call_name(trees.names[c.probe]) + ";" + trees.values[c.value]);
        }
    }
    close_to(UINT64_MAX);
}

}  // namespace

Runner add_replay(CLI::App &app)
{
    auto *cmd = app.add_subcommand("replay", "The calls of a trace file (trace -o) as a tree, thread by thread");
    auto file = std::make_shared<std::string>();
    auto filter = std::make_shared<CallFilter>();
    cmd->add_option("file", *file, "A trace file, written by liveprobe trace -o")->required();
    filter->add_options(cmd);
    cmd->footer("Depth is among the shown calls: a call's untraced or hidden callees are not counted. Calls that left "
                "without returning (an exception, a longjmp) have no event and are not shown.");
    return [file, filter] {
        CallTrees trees;
        std::string why;
        if (!load_call_trees(*file, *filter, true, &trees, &why)) {
            complain("replay: " + why);
            return kExitFailure;
        }
        std::printf("# DURATION    TID     FUNCTION\n");
        for (const ThreadCalls &t : trees.threads) print_thread(trees, t);
        return 0;
    };
}

}  // namespace liveprobe::tool
