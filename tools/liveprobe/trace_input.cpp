// liveprobe trace -i FILE: a trace file's events shown again, as lines, JSON or Chrome events,
// or summed (--count, --hist), or its stacks folded (--folded).
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <memory>

#include <fmt/format.h>

#include "commands.hpp"
#include "trace_options.hpp"

namespace liveprobe::tool {

// -i FILE: a trace file shown as the options ask.
int show_file(Opts &o)
{
    int pid = 0;
    std::string why;
    uint64_t events = 0;
    TraceTotals *totals = nullptr;
    std::unique_ptr<KeyedTotals> folded;  // --folded: the file's stacks
    if (o.folded) folded = std::make_unique<KeyedTotals>(KeyedOptions::folded_stacks());
    bool ok = read_trace_file(
        o.input, &o.probes, &pid,
        [&](std::vector<TraceEvent> &batch) {
            events += batch.size();
            if (o.folded) {
                folded->symbols().set_fallback_maps(o.probes.maps);
                o.print.pid = pid;
                folded->take(batch, o.probes, o.print);
            } else if (o.count || o.hist) {
                if (!totals) totals = new TraceTotals(o.probes.names.size());
                totals->count.resize(o.probes.names.size());  // probes placed later, in the file
                totals->hist.resize(o.probes.names.size());
                for (const TraceEvent &e : batch) {
                    const bool call = o.probes.spec_of(e.r.probe).kind != trace::SpecKind::probe;
                    if ((o.print.tid && static_cast<int>(e.r.tid) != o.print.tid) ||
                        (call && e.r.exit_ns - e.r.entry_ns < o.print.min_duration))
                        continue;
                    totals->add(e, o.probes);
                }
            } else {
                o.print.pid = pid;
                if (o.probes.stack_depth && !o.print.frame_name) {  // frames named by the file's mappings
                    o.symbols.set_fallback_maps(o.probes.maps);
                    o.print.frame_name = [&o](int p, uint64_t addr, bool ret) { return o.symbols.describe(p, addr, ret); };
                }
                o.print.live = false;  // the file's processes: gone, or others by now
                print_events(batch, o.probes, o.print);
            }
        },
        &why, !(isatty(STDOUT_FILENO) && !o.count && !o.hist && !o.print.chrome));  // not amid lines on the terminal
    if (folded) {
        if (o.probes.stack_depth == 0) std::fprintf(stderr, "liveprobe: %s holds no stacks (trace -o FILE --stacks)\n", o.input.c_str());
        folded->print();
    }
    if (totals && o.count) print_counts(*totals, o.probes);
    if (totals && o.hist) print_hists(*totals, o.probes);
    delete totals;
    if (o.print.chrome) {
        chrome_end(o.print.chrome);
        std::fclose(o.print.chrome);
    }
    std::fflush(stdout);
    if (!ok) {
        complain("trace: " + why);
        return kExitFailure;
    }
    std::fprintf(stderr, "liveprobe: %" PRIu64 " events of process %d in %s\n", events, pid, o.input.c_str());
    return 0;
}

}  // namespace liveprobe::tool
