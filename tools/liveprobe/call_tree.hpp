// A trace file's (`trace -o`) calls as trees, thread by thread, with the filters of the views
// that read them (replay, report, graph), named as uftrace names them:
//   -F/--include GLOB   only the calls of matching functions, and the calls they made
//   -N/--exclude GLOB   not the calls of matching functions, nor the calls they made
//   -D/--depth N        only calls this deep at most, counted from the outermost shown call
//   --min-duration NS   only calls that took at least this long (their callees took less)
//   --tid TID           only this thread's calls
// A call a filter hides counts as a call that was not traced: its time is its caller's own.
//
// A thread's events come in the order they returned; a tree is in the order they began: the
// events are read whole (at most kMaxCalls), then each thread's sorted by entry, and a call is
// the child of the nearest call that began before it and ends after it.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <map>
#include <string>
#include <vector>

#include "trace_output.hpp"

namespace CLI {
class App;
class Validator;
}

namespace liveprobe::tool {

struct CallFilter {
    std::vector<std::string> include, exclude;  // globs (fnmatch) over the demangled name
    int depth = 1 << 20;
    uint64_t min_duration = 0;
    int tid = 0;
    // Adds the options above to a view's command.
    void add_options(CLI::App *cmd);
};

struct Call {
    uint64_t entry, exit;
    uint32_t probe;
    uint32_t value;  // CallTrees::values' index, with `values`
    int32_t parent;  // the nearest shown caller's index in the thread's calls, or -1
    int32_t depth;   // among the shown calls: 0 for the outermost
    bool shown;
    uint64_t took() const { return exit >= entry ? exit - entry : 0; }
};

struct ThreadCalls {
    int pid;
    uint32_t tid;
    std::vector<Call> calls;  // in the order they began (a longer call first at a tie)
};

struct CallTrees {
    TraceProbes probes;
    std::vector<std::string> names;   // per probe: name_of, demangled
    std::vector<ThreadCalls> threads;  // in the order of their first calls
    std::vector<std::string> values;  // with `values`: " = VALUE", " NAME=VALUE...", or ""
};

constexpr size_t kMaxCalls = 20'000'000;

// Reads `file`'s calls (not its instructions' hits, which have no time) into *out, filtered.
// With `values`, each call's value as text. false with *why for a file that is not a trace,
// is cut short, or holds more than kMaxCalls calls of the threads asked for.
bool load_call_trees(const std::string &file, const CallFilter &filter, bool values, CallTrees *out,
                     std::string *why);

// Per call of a thread: its time less that of its shown callees.
std::vector<uint64_t> self_times(const ThreadCalls &t);

// Shown calls merged by their call path (main > parse > lex): node 0 is the root, above the
// outermost; a node's children are in the order they were first called.
struct PathNode {
    int32_t parent;
    uint32_t probe;
    uint64_t calls = 0, total = 0, self = 0;
    std::vector<int32_t> children;
};
struct CallPaths {
    std::vector<PathNode> nodes{PathNode{-1, 0, 0, 0, 0, {}}};
    // Adds thread t's shown calls under the root: those `starts` says begin a path, and the
    // shown calls they made.
    void add(const ThreadCalls &t, const std::function<bool(const Call &)> &starts);
    std::string path_of(const CallTrees &trees, int32_t node, const char *sep) const;
};

// A function as a call in a tree: "name()", or a C++ name as it is ("f(int) const" has its own
// parameter list).
inline std::string call_name(const std::string &name)
{
    return name.find('(') != std::string::npos ? name : name + "()";
}

// A call's value at the end of its line in a tree: " = VALUE" (a call), " NAME=VALUE..." (a
// return probe's values), or "".
std::string tree_value(const trace::Spec &spec, const TraceEvent &e);

// One line of a call tree, as replay and trace --tree print it: the call's duration (none: the
// opening of a block, an instruction's hit), its thread, its depth's indentation, then `text`
// ("f() {", "f(); = 1", "} = 1 /* f */"). No newline.
std::string tree_line(std::optional<uint64_t> took, uint32_t tid, int depth, const std::string &text);

// --min-duration's: a number of ns, or with a unit (10us, 2ms, 1s).
CLI::Validator duration_units();

// Durations as uftrace prints them: "  1.234 us", right-aligned in 10 columns.
std::string duration_text(uint64_t ns);
// The same unpadded ("1.234 us"), as report's columns are.
std::string time_text(uint64_t ns);

// A function's shown calls, as report's line shows them (self, total: as in its footer).
struct FunctionRow {
    uint64_t calls = 0, total = 0, self = 0, min = UINT64_MAX, max = 0;
    uint64_t sum = 0;  // every call's time, a recursion's inner calls too: the mean is sum / calls
    uint64_t avg() const { return calls ? sum / calls : 0; }
};
std::map<std::string, FunctionRow> function_rows(const CallTrees &trees);
// The rows sorted by a column (total, self, calls, min, avg, max: largest first; name: in
// order), a tie in the order of their names.
std::vector<std::pair<std::string, FunctionRow>> sorted_rows(const std::map<std::string, FunctionRow> &rows,
                                                             const std::string &by);

}  // namespace liveprobe::tool
