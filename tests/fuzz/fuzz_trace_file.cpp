// Fuzzing the trace-file reader (`liveprobe trace -i FILE`, issue 32 item 4): any file is shown
// or refused ("not a liveprobe trace file", "cut short"), as each of -i's ways would (events,
// --count, --hist), without a crash, nor an allocation the file's size does not account for.
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "trace_output.hpp"

using namespace liveprobe::tool;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static FILE *sink = [] {
        std::freopen("/dev/null", "w", stdout);  // what -i prints: formatted, then dropped
        return stdout;
    }();
    (void)sink;
    FILE *f = fmemopen(const_cast<uint8_t *>(data), size, "rb");
    if (!f) return 0;
    TraceProbes probes;
    int pid = 0;
    std::string why;
    TraceTotals totals(0);
    PrintOptions print;
    read_trace_stream(
        f, "fuzz", &probes, &pid,
        [&](std::vector<TraceEvent> &batch) {
            totals.count.resize(probes.names.size());
            totals.hist.resize(probes.names.size());
            totals.left.resize(probes.names.size());
            for (const TraceEvent &e : batch) totals.add(e, probes);
            print_events(batch, probes, print);
        },
        &why);
    print_counts(totals, probes);
    print_hists(totals, probes);
    std::fclose(f);
    return 0;
}
