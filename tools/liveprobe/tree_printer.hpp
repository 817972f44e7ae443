// liveprobe trace --tree: the calls drawn as a tree as they happen, thread by thread, in
// replay's form. The target writes an event at each call's entry too (trace::Mode::tree,
// rings.hpp's kEntryEvent), and the printer keeps, per thread, the calls that began and have
// not returned:
//   - an entry is held back until the thread's next event: a return of the same call makes one
//     line, "NAME(); = VALUE" with its duration; anything else opens a block, "NAME() {";
//   - a return closes the innermost open call of its function, "} = VALUE /* NAME */"; open
//     calls above it left without returning (a longjmp, an exception), said so;
//   - an entry held back longer than kHoldNs (a call that sleeps) opens its block then, so a
//     blocked thread shows where it is.
// Thread-compatible: the trace loop's thread only.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "trace_output.hpp"

namespace liveprobe::tool {

class TreePrinter : public EventSink {
public:
    static constexpr uint64_t kHoldNs = 100'000'000;
    // One batch of events, drawn (a thread's order is the tree's).
    void take(const std::vector<TraceEvent> &batch, const TraceProbes &probes, const PrintOptions &o) override;

    struct Open {
        uint32_t probe;
        uint64_t entry;
        bool printed;  // its block is open on the screen
    };

private:
    std::map<uint64_t, std::vector<Open>> threads_;  // by pid << 32 | tid, innermost last
    void open_block(uint32_t tid, std::vector<Open> &stack, const TraceProbes &probes);
    void entry(uint32_t tid, std::vector<Open> &stack, const TraceEvent &e, const TraceProbes &probes);
    void ret(uint32_t tid, std::vector<Open> &stack, const TraceEvent &e, const TraceProbes &probes);
    void left(uint32_t tid, std::vector<Open> &stack, const TraceEvent &e, const TraceProbes &probes);
    // Pops the open calls above the first n, each said to have left without returning.
    void close_left(uint32_t tid, std::vector<Open> &stack, size_t n, const TraceProbes &probes);
};

}  // namespace liveprobe::tool
