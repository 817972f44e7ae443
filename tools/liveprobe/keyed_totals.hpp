// trace --by KEY and --hist-of EXPR: a session's events aggregated by the tool, per function and
// key, as bpftrace's maps (@[func, key] = count(), hist(...)): how many calls, a log2 histogram
// of their durations (--hist), of a value (--hist-of), or both. The target computes each
// event's key and value (trace/session.hpp's ExtraLayout, after the spec's values); a thread's
// id is the event's own. Thread-compatible: the trace loop's thread only.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <unordered_map>
#include <vector>
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
    // --folded of a trace file's stacks (report --folded, trace -i --folded): each stack's calls.
    static KeyedOptions folded_stacks() { return {.key = Key::stack, .count = true, .folded = true, .value = {}}; }
};

class KeyedTotals : public EventSink {
public:
    explicit KeyedTotals(KeyedOptions o) : o_(std::move(o)) {}
    // The frames' names: the process's mappings, or these (a trace file's, or a process gone).
    TargetSymbols &symbols() { return symbols_; }
    // Adds each event to its row, keyed by its raw bytes (the reader keeps up with millions of
    // events a second: nothing is named until print).
    void take(const std::vector<TraceEvent> &batch, const TraceProbes &probes, const PrintOptions &o) override;
    // Prints what was added since the last clear(), the most called first. Not const: it names
    // callers and frames (target_symbols.hpp caches them).
    void print();
    void clear() { rows_.clear(); }
    // Each row named as print() names it, but per process (trace --serve's series): its pid,
    // function, key, calls, and the calls by log2 bucket of nanoseconds.
    using Visit = std::function<void(int pid, const std::string &function, const std::string &key, uint64_t calls,
                                     const std::array<uint64_t, trace::kHistBuckets> &ns)>;
    void visit(const Visit &fn);
    // Drops the rows of process pid (trace --serve: a process that is served no more).
    void forget(int pid);
    // At most `rows` rows (0: no limit): the events of a key that would make one more are
    // counted in their function's "(other)" row, said once on stderr. A key per call (--by arg0
    // of a counter) grew the tool by 170 MB a second.
    void set_limit(size_t rows) { limit_ = rows; }

private:
    struct Row {
        uint64_t calls = 0, negative = 0, faults = 0;  // negative, faults: --hist-of's values
        std::array<uint64_t, trace::kHistBuckets> ns{}, values{};
        void add(const Row &r);
    };
    KeyedOptions o_;
    // By the function's id in names_ (4 bytes), the process (4), the key's bytes: a thread's id
    // (4), a name (16), a value (8), or a stack's frames (8 each).
    std::unordered_map<std::string, Row> rows_;
    std::vector<std::string> names_;                 // the functions' names, by id
    std::unordered_map<std::string, uint32_t> ids_;  // and their ids
    const TraceProbes *probes_seen_ = nullptr;       // probe index -> id, for that TraceProbes
    std::vector<uint32_t> id_of_probe_;
    TargetSymbols symbols_;
    static constexpr char kOther = 2;  // a row key's flag byte: the keys beyond the limit
    size_t limit_ = 0;
    bool told_ = false;
    // A key's text; flag: the row key's byte after the pid (1: the value was not read, a fault).
    std::string key_text(int pid, const std::string &key, char flag);
};

}  // namespace liveprobe::tool
