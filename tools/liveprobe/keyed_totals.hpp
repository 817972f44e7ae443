// trace --by KEY and --hist-of EXPR: a session's events aggregated by the tool, per function and
// key, as bpftrace's maps (@[func, key] = count(), hist(...)): how many calls, a log2 histogram
// of their durations (--hist), of a value (--hist-of), or both. The target computes each
// event's key and value (trace/session.hpp's ExtraLayout, after the spec's values); a thread's
// id is the event's own. Thread-compatible: the trace loop's thread only.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>

#include "target_symbols.hpp"
#include "trace/rings.hpp"
#include "trace/session.hpp"
#include "trace_output.hpp"

namespace liveprobe::tool {

struct KeyedOptions {
    enum class Key { none, tid, comm, caller, expr, stack };
    Key key = Key::none;
    bool count = false, hist = false;  // --count, --hist
    // --folded: each stack and its calls as flame graph tools read them ("main;parse;lex 12"),
    // the frames by function, outermost first (Key::stack).
    bool folded = false;
    std::string value;                 // --hist-of EXPR, as given ("" without)
    trace::ExtraLayout layout() const;
};

class KeyedTotals : public EventSink {
public:
    explicit KeyedTotals(KeyedOptions o) : o_(std::move(o)) {}
    // The frames' names: the process's mappings, or these (a trace file's, or a process gone).
    TargetSymbols &symbols() { return symbols_; }
    void take(const std::vector<TraceEvent> &batch, const TraceProbes &probes, const PrintOptions &o) override;
    // Prints what was added since the last clear(), the most called first.
    void print() const;
    void clear() { rows_.clear(); }

private:
    struct Row {
        uint64_t calls = 0, negative = 0, faults = 0;  // negative, faults: --hist-of's values
        std::array<uint64_t, trace::kHistBuckets> ns{}, values{};
    };
    KeyedOptions o_;
    std::map<std::pair<std::string, std::string>, Row> rows_;  // (function, key as text)
    TargetSymbols symbols_;
    std::string key_of(const TraceEvent &e, const TraceProbes &probes, const unsigned char *extra, int pid);
};

}  // namespace liveprobe::tool
