// liveprobe trace --tree (tree_printer.hpp).
#include "tree_printer.hpp"

#include <cstdio>
#include <ctime>

#include "call_tree.hpp"

namespace liveprobe::tool {
namespace {

// One line of the tree (call_tree.hpp's tree_line), whole on stdout (room_for_line).
void line(std::optional<uint64_t> took, uint32_t tid, size_t depth, const std::string &text)
{
    room_for_line();
    std::printf("%s\n", tree_line(took, tid, static_cast<int>(depth), text).c_str());
}

}  // namespace

// The innermost held-back entry of a thread, if any, printed as an open block.
void TreePrinter::open_block(uint32_t tid, std::vector<Open> &stack, const TraceProbes &probes)
{
    if (stack.empty() || stack.back().printed) return;
    line(std::nullopt, tid, stack.size() - 1, call_name(probes.name_of(stack.back().probe)) + " {");
    stack.back().printed = true;
}

void TreePrinter::entry(uint32_t tid, std::vector<Open> &stack, const TraceEvent &e, const TraceProbes &probes)
{
    open_block(tid, stack, probes);
    stack.push_back({e.r.probe, e.r.entry_ns, false});
}

// The index of the innermost open call of `probe` in stack, or -1.
static long innermost(const std::vector<TreePrinter::Open> &stack, uint32_t probe)
{
    long i = static_cast<long>(stack.size()) - 1;
    while (i >= 0 && stack[static_cast<size_t>(i)].probe != probe) --i;
    return i;
}

void TreePrinter::close_left(uint32_t tid, std::vector<Open> &stack, size_t n, const TraceProbes &probes)
{
    while (stack.size() > n) {
        const Open o = stack.back();
        stack.pop_back();
        if (o.printed)
            line(std::nullopt, tid, stack.size(), "} /* " + probes.name_of(o.probe) + ": left without returning */");
        else
            line(std::nullopt, tid, stack.size(), call_name(probes.name_of(o.probe)) + "; /* left without returning */");
    }
}

void TreePrinter::left(uint32_t tid, std::vector<Open> &stack, const TraceEvent &e, const TraceProbes &probes)
{
    const long i = innermost(stack, e.r.probe);
    if (i >= 0) close_left(tid, stack, static_cast<size_t>(i), probes);  // it, and what it left open
}

void TreePrinter::ret(uint32_t tid, std::vector<Open> &stack, const TraceEvent &e, const TraceProbes &probes)
{
    const std::string value = tree_value(probes.spec_of(e.r.probe), e);
    const uint64_t took = e.r.exit_ns >= e.r.entry_ns ? e.r.exit_ns - e.r.entry_ns : 0;
    const std::string name = probes.name_of(e.r.probe);
    const long i = innermost(stack, e.r.probe);
    if (i < 0) {  // it began before the trace did: a line of its own, where it returns
        open_block(tid, stack, probes);
        line(took, tid, stack.size(), call_name(name) + ";" + value);
        return;
    }
    close_left(tid, stack, static_cast<size_t>(i) + 1, probes);  // calls inside it that left without returning
    const Open o = stack.back();
    stack.pop_back();
    if (o.printed) line(took, tid, stack.size(), "}" + value + " /* " + name + " */");
    else line(took, tid, stack.size(), call_name(name) + ";" + value);
}

void TreePrinter::take(const std::vector<TraceEvent> &batch, const TraceProbes &probes, const PrintOptions &o)
{
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);  // the events' clock
    const uint64_t now_ns = static_cast<uint64_t>(ts.tv_sec) * 1000000000 + static_cast<uint64_t>(ts.tv_nsec);
    for (const TraceEvent &e : batch) {
        if (e.r.probe >= probes.names.size() || (o.tid && static_cast<int>(e.r.tid) != o.tid)) continue;
        const int pid = e.pid ? e.pid : o.pid;
        std::vector<Open> &stack = threads_[uint64_t{static_cast<uint32_t>(pid)} << 32 | e.r.tid];
        const trace::Spec &spec = probes.spec_of(e.r.probe);
        if (spec.kind == trace::SpecKind::probe) {  // an instruction's hit: a line where the thread is
            open_block(e.r.tid, stack, probes);
            line(std::nullopt, e.r.tid, stack.size(), probes.name_of(e.r.probe) + values_text(spec, e.values, false));
        } else if (e.r.exit_ns == trace::kEntryEvent) {
            entry(e.r.tid, stack, e, probes);
        } else if (e.r.exit_ns == trace::kLeftEvent) {
            left(e.r.tid, stack, e, probes);
        } else {
            ret(e.r.tid, stack, e, probes);
        }
    }
    for (auto &[key, stack] : threads_)
        if (!stack.empty() && !stack.back().printed && stack.back().entry + kHoldNs < now_ns)
            open_block(static_cast<uint32_t>(key), stack, probes);
    std::fflush(stdout);
}

}  // namespace liveprobe::tool
