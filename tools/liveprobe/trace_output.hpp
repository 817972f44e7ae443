// What `liveprobe trace` shows and keeps: events as lines, JSON objects or Chrome trace events;
// counts and log2 histograms; and trace files (-o FILE), the events a few bytes each, which
// `liveprobe trace -i FILE` shows later in any of those forms.
#pragma once

#include <array>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "trace/rings.hpp"
#include "trace/spec.hpp"

namespace liveprobe::tool {

class ProgressLine;

struct TraceEvent {
    trace::Record r;
    std::string values;  // p:, r:: the fetched values (trace/spec.hpp's payload)
    // Its process: a forked child's events are read from its parent's memory (rings.hpp's
    // RingHead::pid says whose ring), or from its parent's trace file. 0: PrintOptions::pid.
    int pid = 0;
};

// The probes of a session: probe i is function names[i] of spec specs[spec[i]].
struct TraceProbes {
    std::vector<trace::Spec> specs;
    std::vector<std::string> names;  // demangled
    std::vector<uint32_t> spec;
    std::vector<uint32_t> payload;  // probe i's values, bytes: 0 for a call (FUNC), which has none
    // --by, --hist-of, --stacks: the bytes every event carries after its spec's values (their
    // last 8 + 8 * stack_depth: the stack, trace/session.hpp's ExtraLayout), and with stacks
    // the process's executable mappings when the session was named (/proc/PID/maps' lines), to
    // name the frames after it is gone.
    uint32_t extra_bytes = 0, stack_depth = 0;
    std::string maps;
    const trace::Spec &spec_of(uint32_t p) const { return specs[spec[p]]; }
    std::string name_of(uint32_t p) const;  // FUNC, or FUNC+0xOFF for an instruction
};

// Takes a batch of events, each ring's in the order they were written (not sorted).
class EventSink {
public:
    virtual ~EventSink() = default;
    virtual void take(const std::vector<TraceEvent> &batch, const TraceProbes &probes, const struct PrintOptions &o) = 0;
};

struct PrintOptions {
    bool json = false;
    FILE *chrome = nullptr;  // --chrome FILE
    bool chrome_first = true;
    std::set<uint32_t> chrome_named;  // threads given a name (a "thread_name" metadata event)
    std::set<int> chrome_processes;   // processes given a name (a "process_name" metadata event)
    int pid = 0;       // the process of the events that do not say theirs
    bool live = true;  // the processes run (or ran) now: their names are in /proc (not with -i)
    int tid = 0;  // --tid
    uint64_t min_duration = 0;
    // --stacks: names a frame's address in process pid (target_symbols.hpp), a return address
    // or not (the first frame); null: hex.
    std::function<std::string(int pid, uint64_t addr, bool return_address)> frame_name;
    // Where the events go instead of lines: --tree's drawing (tree_printer.hpp), --by's and
    // --hist-of's aggregates (keyed_totals.hpp).
    class EventSink *sink = nullptr;
};

// A call's (FUNC's) return value as text ("" for void), or as a JSON object's member ("" for
// void): typed by DWARF or by the spec's $retval:TYPE; without either the raw rax, said so.
std::string call_value(const trace::Spec &spec, const TraceEvent &e, bool json);
// A fetched event's values as " name=value ..." (text) or a JSON object's members.
std::string values_text(const trace::Spec &spec, const std::string &payload, bool json);

// An event's stack (--stacks): its frames, innermost first; none without.
std::vector<uint64_t> event_stack(const TraceEvent &e, const TraceProbes &probes);

// A C++ name demangled ("OBJECT:" kept); others as they are.
std::string demangled(const std::string &name);

// Flushes stdout if another line might not fit in its buffer (stdout_whole_lines): call before
// each line printed.
void room_for_line();
// Prints a batch of events in time order (of their return, or hit); with o.tree, as it draws.
void print_events(std::vector<TraceEvent> &batch, const TraceProbes &probes, PrintOptions &o);
// Opens and closes the --chrome file's array.
void chrome_begin(FILE *f);
void chrome_end(FILE *f);

// Per probe: calls, and the log2 buckets of their durations.
struct TraceTotals {
    std::vector<uint64_t> count;
    std::vector<std::array<uint64_t, trace::kHistBuckets>> hist;
    std::vector<uint64_t> left;  // --hist, per event: calls that left without returning (no time)
    explicit TraceTotals(size_t probes) : count(probes), hist(probes), left(probes) {}
    void add(const TraceEvent &e, const TraceProbes &probes);  // from a trace file
};
uint32_t hist_bucket(uint64_t ns);
// Bucket b's lower bound as --hist labels it: b holds [2^(b-1), 2^b) ns ("1K": 1024), 0 holds 0.
std::string hist_bound(uint32_t b);
// Draws log2 buckets as --hist does, from the first to the last that holds any.
void print_buckets(const uint64_t *buckets, size_t n);
void print_counts(const TraceTotals &t, const TraceProbes &probes);
void print_hists(const TraceTotals &t, const TraceProbes &probes);

// Trace files: a header (the specs, each probe's spec and name, the process), then the events,
// encoded (trace_codec.hpp), with a header written again among them when probes are placed
// later, for the events after it.
std::string trace_header(int pid, const TraceProbes &probes);

// Gives stdout a buffer of its own (1 MiB), which print_events flushes before a line could
// overflow it: stdio then never writes part of a line, and a traced program writing to the
// same file or terminal (2>&1) cannot land in the middle of one; into a pipe, each write is a
// whole line of 4096 bytes or fewer, which the kernel keeps whole (pipe_lines.hpp). Call before
// any output to stdout.
void stdout_whole_lines();
// Reads a trace file: the header first, then calls `each` with batches of events until the end.
// false with *why for a file that is not a trace, or is cut short. With `progress`, how far it
// has read is said on stderr when that is a terminal (progress_line.hpp).
bool read_trace_file(const std::string &path, TraceProbes *probes, int *pid,
                     const std::function<void(std::vector<TraceEvent> &)> &each, std::string *why,
                     bool progress = false);
// The same, from an open stream (`name` says which in *why; *progress, if any, says how far in
// the stream's `size` bytes it is).
bool read_trace_stream(FILE *f, const std::string &name, TraceProbes *probes, int *pid,
                       const std::function<void(std::vector<TraceEvent> &)> &each, std::string *why,
                       ProgressLine *progress = nullptr, uint64_t size = 0);

}  // namespace liveprobe::tool
