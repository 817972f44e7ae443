// liveprobe graph FILE [FUNC]: the callers and callees of a function in a trace file (`trace -o`),
// as uftrace's graph shows them: each distinct chain of shown callers that reached its
// outermost calls, with their count and time; then the calls it made, merged by call path,
// as a tree with each node's calls and total time. A recursive function's inner calls are in
// the tree, under the outermost. Without FUNC, the tree of the whole trace. The trees and their
// filters are call_tree.hpp's.
#include <CLI/CLI.hpp>
#include <fnmatch.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <memory>

#include <fmt/format.h>

#include "call_tree.hpp"
#include "commands.hpp"

namespace liveprobe::tool {
namespace {

// The tree under `n`, each node a line: time, (calls) name, drawn with +- and |.
void print_tree(const CallTrees &trees, const CallPaths &paths, int32_t n, const std::string &prefix)
{
    const std::vector<int32_t> &kids = paths.nodes[n].children;
    for (size_t k = 0; k < kids.size(); ++k) {
        const PathNode &c = paths.nodes[kids[k]];
        const bool last = k + 1 == kids.size();
        std::printf("%s : %s(%" PRIu64 ") %s\n", duration_text(c.total).c_str(),
                    (n == 0 ? "" : prefix + "+-").c_str(), c.calls, trees.names[c.probe].c_str());
        print_tree(trees, paths, kids[k], n == 0 ? " " : prefix + (last ? "  " : "| "));
    }
}

// The chains of callers of the matched functions' outermost calls, the most frequent first.
void print_backtraces(const CallTrees &trees, const std::vector<char> &match)
{
    CallPaths all;
    for (const ThreadCalls &t : trees.threads) all.add(t, [](const Call &) { return true; });
    std::vector<int32_t> tops;  // nodes of a matched function with no matched node above
    for (int32_t n = 1; n < static_cast<int32_t>(all.nodes.size()); ++n) {
        if (!match[all.nodes[n].probe]) continue;
        int32_t up = all.nodes[n].parent;
        while (up > 0 && !match[all.nodes[up].probe]) up = all.nodes[up].parent;
        if (up == 0) tops.push_back(n);
    }
    std::stable_sort(tops.begin(), tops.end(),
                     [&](int32_t a, int32_t b) { return all.nodes[a].calls > all.nodes[b].calls; });
    std::printf("=============== BACKTRACE ===============\n");
    for (size_t i = 0; i < tops.size(); ++i) {
        const PathNode &top = all.nodes[tops[i]];
        std::printf(" backtrace #%zu: %" PRIu64 " call%s, %s\n", i, top.calls, top.calls == 1 ? "" : "s",
                    duration_text(top.total).c_str());
        std::vector<int32_t> chain;
        for (int32_t n = tops[i]; n > 0; n = all.nodes[n].parent) chain.push_back(n);
        for (size_t d = 0; d < chain.size(); ++d)
            std::printf("   [%zu] %s\n", d, trees.names[all.nodes[chain[chain.size() - 1 - d]].probe].c_str());
        std::printf("\n");
    }
}

}  // namespace

Runner add_graph(CLI::App &app)
{
    auto *cmd = app.add_subcommand("graph", "The callers and callees of a function in a trace file (trace -o), "
                                            "with their calls and times");
    auto file = std::make_shared<std::string>();
    auto func = std::make_shared<std::string>();
    auto filter = std::make_shared<CallFilter>();
    cmd->add_option("file", *file, "A trace file, written by liveprobe trace -o")->required();
    cmd->add_option("function", *func, "The function (a glob); without it, the calls of the whole trace");
    filter->add_options(cmd);
    cmd->footer("Callers and callees are the shown calls: untraced functions, and those the filters hide, are not in "
                "the chains and trees. A recursive function's chains end at its outermost calls.");
    return [file, func, filter] {
        CallTrees trees;
        std::string why;
        if (!load_call_trees(*file, *filter, false, &trees, &why)) {
            complain("graph: " + why);
            return kExitFailure;
        }
        std::vector<char> match(trees.names.size(), func->empty());
        for (size_t p = 0; p < trees.names.size(); ++p)
            if (!func->empty() && fnmatch(func->c_str(), trees.names[p].c_str(), 0) == 0) match[p] = 1;
        CallPaths below;
        for (const ThreadCalls &t : trees.threads) below.add(t, [&](const Call &c) { return match[c.probe] != 0; });
        if (below.nodes[0].children.empty()) {
            complain(func->empty() ? fmt::format("graph: {} holds no call the filters show", *file)
                                   : fmt::format("graph: no shown call of {} in {}", *func, *file));
            return kExitFailure;
        }
        if (!func->empty()) {
            std::printf("# Call graph of %s\n", func->c_str());
            print_backtraces(trees, match);
        }
        std::printf("========== FUNCTION CALL GRAPH ==========\n# TOTAL TIME   FUNCTION\n");
        print_tree(trees, below, 0, "");
        return 0;
    };
}

}  // namespace liveprobe::tool
