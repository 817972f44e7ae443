// A trace file's calls as trees, filtered (call_tree.hpp).
#include "call_tree.hpp"

#include <CLI/CLI.hpp>
#include <fnmatch.h>

#include <algorithm>
#include <map>

#include <fmt/format.h>

namespace liveprobe::tool {

void CallFilter::add_options(CLI::App *cmd)
{
    // One GLOB each (repeat the option for more): the file and FUNC after it are not taken.
    cmd->add_option("-F,--include", include, "Only the calls of functions matching GLOB, and the calls they made")
        ->type_name("GLOB")
        ->allow_extra_args(false);
    cmd->add_option("-N,--exclude", exclude, "Not the calls of functions matching GLOB, nor the calls they made")
        ->type_name("GLOB")
        ->allow_extra_args(false);
    cmd->add_option("-D,--depth", depth, "Only calls this deep at most (1: the outermost shown)")
        ->check(CLI::Range(1, 1 << 20));
    cmd->add_option("--min-duration", min_duration, "Only calls that took at least this long (ns, or with a unit: 10us, 2ms, 1s)")
        ->transform(duration_units());
    cmd->add_option("--tid", tid, "Only this thread's calls");
}

CLI::Validator duration_units()
{
    return CLI::AsNumberWithUnit(std::map<std::string, uint64_t>{{"ns", 1}, {"us", 1000}, {"ms", 1000000}, {"s", 1000000000}},
                                 CLI::AsNumberWithUnit::CASE_SENSITIVE);
}

std::string duration_text(uint64_t ns) { return fmt::format("{:>10}", time_text(ns)); }

std::string tree_value(const trace::Spec &spec, const TraceEvent &e)
{
    if (spec.kind != trace::SpecKind::call) return values_text(spec, e.values, false);
    const std::string v = call_value(spec, e, false);
    return v.empty() ? v : " = " + v;
}

std::string tree_line(std::optional<uint64_t> took, uint32_t tid, int depth, const std::string &text)
{
    return fmt::format("{:>10} [{:6}] | {:{}}{}", took ? duration_text(*took) : "", tid, "", 2 * depth, text);
}

std::string time_text(uint64_t ns)
{
    if (ns < 1000) return fmt::format("{} ns", ns);
    if (ns < 1000000) return fmt::format("{:.3f} us", static_cast<double>(ns) / 1e3);
    if (ns < 1000000000) return fmt::format("{:.3f} ms", static_cast<double>(ns) / 1e6);
    return fmt::format("{:.3f}  s", static_cast<double>(ns) / 1e9);
}

std::map<std::string, FunctionRow> function_rows(const CallTrees &trees)
{
    std::map<std::string, FunctionRow> rows;
    for (const ThreadCalls &t : trees.threads) {
        const std::vector<uint64_t> self = self_times(t);
        std::map<uint32_t, int> running;  // per probe: its calls open at the one counted
        std::vector<const Call *> open;
        for (size_t i = 0; i < t.calls.size(); ++i) {
            const Call &c = t.calls[i];
            if (!c.shown) continue;
            while (!open.empty() && open.back()->exit <= c.entry) --running[open.back()->probe], open.pop_back();
            FunctionRow &r = rows[trees.names[c.probe]];
            ++r.calls;
            if (running[c.probe]++ == 0) r.total += c.took();  // recursion: in its outermost call's time
            r.self += self[i];
            r.sum += c.took();
            r.min = std::min(r.min, c.took());
            r.max = std::max(r.max, c.took());
            open.push_back(&c);
        }
    }
    return rows;
}

namespace {

// The key of a sort column, larger first (name: in order).
uint64_t sort_key(const FunctionRow &r, const std::string &by)
{
    if (by == "self") return r.self;
    if (by == "calls") return r.calls;
    if (by == "min") return r.min;
    if (by == "avg") return r.avg();
    if (by == "max") return r.max;
    return r.total;
}

}  // namespace

std::vector<std::pair<std::string, FunctionRow>> sorted_rows(const std::map<std::string, FunctionRow> &by_name,
                                                             const std::string &by)
{
    std::vector<std::pair<std::string, FunctionRow>> rows(by_name.begin(), by_name.end());
    if (by != "name")
        std::stable_sort(rows.begin(), rows.end(),
                         [&](const auto &a, const auto &b) { return sort_key(a.second, by) > sort_key(b.second, by); });
    return rows;
}

namespace {

// Per probe: does its name match one of `globs`? (empty if there are none)
std::vector<char> matching(const std::vector<std::string> &names, const std::vector<std::string> &globs)
{
    std::vector<char> m(globs.empty() ? 0 : names.size());
    for (size_t p = 0; p < names.size(); ++p)
        for (const std::string &g : globs)
            if (fnmatch(g.c_str(), names[p].c_str(), 0) == 0) m[p] = 1;
    return m;
}

// Marks which of a thread's calls are shown, their depth and shown caller. A call is shown if
// it is in scope (no -F, or it or a caller matches one), and neither it nor a caller is pruned
// (matches -N, took less than --min-duration, or is deeper than -D).
void mark(ThreadCalls &t, const CallFilter &f, const std::vector<char> &inc, const std::vector<char> &exc)
{
    struct Open {
        uint64_t exit;
        bool in_scope, pruned;
        int32_t shown;  // the nearest shown call among it and its callers, or -1
    };
    std::vector<Open> open;  // the calls running when the one marked began, outermost first
    for (size_t i = 0; i < t.calls.size(); ++i) {
        Call &c = t.calls[i];
        while (!open.empty() && open.back().exit <= c.entry) open.pop_back();
        const Open *top = open.empty() ? nullptr : &open.back();
        const bool in_scope = inc.empty() || inc[c.probe] || (top && top->in_scope);
        c.parent = top ? top->shown : -1;
        c.depth = c.parent >= 0 ? t.calls[c.parent].depth + 1 : 0;
        const bool pruned = (top && top->pruned) || (!exc.empty() && exc[c.probe]) || c.took() < f.min_duration || c.depth >= f.depth;
        c.shown = in_scope && !pruned;
        if (!c.shown) c.depth = -1;
        open.push_back({c.exit, in_scope, pruned, c.shown ? static_cast<int32_t>(i) : c.parent});
    }
}

}  // namespace

std::vector<uint64_t> self_times(const ThreadCalls &t)
{
    std::vector<uint64_t> self(t.calls.size());
    for (size_t i = 0; i < t.calls.size(); ++i) self[i] = t.calls[i].took();
    for (const Call &c : t.calls)
        if (c.shown && c.parent >= 0) self[c.parent] -= std::min(self[c.parent], c.took());
    return self;
}

void CallPaths::add(const ThreadCalls &t, const std::function<bool(const Call &)> &starts)
{
    const std::vector<uint64_t> self = self_times(t);
    std::vector<int32_t> node(t.calls.size(), -1);
    for (size_t i = 0; i < t.calls.size(); ++i) {
        const Call &c = t.calls[i];
        if (!c.shown) continue;
        const int32_t up = c.parent >= 0 && node[c.parent] >= 0 ? node[c.parent] : starts(c) ? 0 : -1;
        if (up < 0) continue;
        int32_t n = -1;
        for (int32_t k : nodes[up].children)
            if (nodes[k].probe == c.probe) n = k;
        if (n < 0) {
            n = static_cast<int32_t>(nodes.size());
            nodes[up].children.push_back(n);
            nodes.push_back(PathNode{up, c.probe, 0, 0, 0, {}});
        }
        node[i] = n;
        nodes[n].calls++;
        nodes[n].total += c.took();
        nodes[n].self += self[i];
    }
}

std::string CallPaths::path_of(const CallTrees &trees, int32_t n, const char *sep) const
{
    std::string path;
    for (; n > 0; n = nodes[n].parent) path = trees.names[nodes[n].probe] + (path.empty() ? "" : sep) + path;
    return path;
}

bool load_call_trees(const std::string &file, const CallFilter &filter, bool values, CallTrees *out,
                     std::string *why)
{
    std::map<uint64_t, ThreadCalls> threads;  // by pid << 32 | tid
    int pid = 0;
    size_t kept = 0;
    bool too_many = false;
    TraceProbes &probes = out->probes;
    const bool ok = read_trace_file(
        file, &probes, &pid,
        [&](std::vector<TraceEvent> &batch) {
            for (const TraceEvent &e : batch) {
                const trace::Spec &spec = probes.spec_of(e.r.probe);
                if (spec.kind == trace::SpecKind::probe || (filter.tid && static_cast<int>(e.r.tid) != filter.tid))
                    continue;
                if (++kept > kMaxCalls) {
                    too_many = true;
                    return;
                }
                uint32_t value = 0;
                if (values) {
                    value = static_cast<uint32_t>(out->values.size());
                    out->values.push_back(tree_value(spec, e));
                }
                const int p = e.pid ? e.pid : pid;
                ThreadCalls &t = threads[uint64_t{static_cast<uint32_t>(p)} << 32 | e.r.tid];
                t.pid = p;
                t.tid = e.r.tid;
                t.calls.push_back({e.r.entry_ns, e.r.exit_ns, e.r.probe, value, -1, -1, false});
            }
        },
        why, false);
    if (!ok) return false;
    if (too_many) {
        *why = fmt::format("{} holds more than {} calls: show one thread (--tid)", file, kMaxCalls);
        return false;
    }
    if (filter.tid && threads.empty()) {
        *why = fmt::format("{} holds no call of thread {} (replay shows each thread's id)", file, filter.tid);
        return false;
    }
    for (uint32_t p = 0; p < probes.names.size(); ++p) out->names.push_back(probes.name_of(p));
    const std::vector<char> inc = matching(out->names, filter.include), exc = matching(out->names, filter.exclude);
    for (auto &[key, t] : threads) {
        std::sort(t.calls.begin(), t.calls.end(), [](const Call &a, const Call &b) {
            return a.entry != b.entry ? a.entry < b.entry : a.exit > b.exit;
        });
        mark(t, filter, inc, exc);
        out->threads.push_back(std::move(t));
    }
    // In the order they began (a pid or a thread id says nothing of it once the ids wrap).
    std::stable_sort(out->threads.begin(), out->threads.end(), [](const ThreadCalls &a, const ThreadCalls &b) {
        return a.calls.front().entry < b.calls.front().entry;
    });
    return true;
}

}  // namespace liveprobe::tool
