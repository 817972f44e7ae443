// The tracer inside the target (`liveprobe trace`): sessions, up to kSessions side by side in a
// process (trace/handlers.hpp), each with a probe on each function its specs name and handlers
// that write into its own shared memory (trace/rings.hpp), which its tool reads. Two sessions
// on one function each place their probe there (an aggregate probe): each sees every call.
//
// Each spec (trace/spec.hpp) names functions; each function it names gets a probe:
//   events  FUNC: a kretprobe; each call that returns becomes a Record in the calling thread's
//           ring (entry and exit time, return value);
//           p:, FUNC+OFF: a kprobe; each hit becomes an event with the spec's fetched values
//           (a Record, followed by the values in the records after it);
//           r:: a kretprobe; each return becomes an event with its values and duration;
//   count   a kprobe at each function's entry (or the spec's instruction); the thread's counter
//           of it goes up;
//   hist    a kretprobe per function; the call's duration goes into the thread's log2 buckets.
// Counters are per thread (one row per ring) and summed by the reader: nothing is shared
// between threads on the hit path. A forked child goes on writing into the same shared memory
// (its threads take rings of their own), unless the session does not follow forks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace liveprobe::trace {

// The most sessions that run in a process at once (each in a slot: Started::session).
constexpr uint32_t kSessions = 8;

// Among start()'s specs, a session's option rather than a spec: --filter=EXPR (filter.hpp), the
// predicate every event of the session passes. ("--" starts no spec.)
constexpr const char *kFilterOption = "--filter=";
// --by=KEY and --value=EXPR: each event carries a key (an expression's value, or with KEY
// "comm" the thread's name) and a value (--hist-of), after its spec's values (ExtraLayout), which
// the tool aggregates by.
constexpr const char *kByOption = "--by=";
constexpr const char *kValueOption = "--value=";
// --stacks=DEPTH: each event carries the user stack at the probe, DEPTH frames at most
// (arch/x86_64/stack_walk.hpp): at a return, the function's address, then its callers'.
constexpr const char *kStacksOption = "--stacks=";
constexpr uint32_t kMaxStackDepth = 127;

// The bytes an event carries after its spec's values with --by, --value and --stacks: a fault
// mask (bit 0: the key could not be read, bit 1: the value), the key (8 bytes, 16 for comm), the
// value (8), the stack (how many frames, 8 bytes, then stack_depth return addresses).
struct ExtraLayout {
    bool key = false, key_comm = false, value = false;
    uint32_t stack_depth = 0;
    size_t key_bytes() const { return key ? (key_comm ? 16 : 8) : 0; }
    size_t bytes() const
    {
        return key || value || stack_depth ? 8 + key_bytes() + (value ? 8 : 0) + (stack_depth ? 8 + 8 * size_t{stack_depth} : 0) : 0;
    }
    size_t key_at() const { return 8; }
    size_t value_at() const { return 8 + key_bytes(); }
    size_t stack_at() const { return 8 + key_bytes() + (value ? 8 : 0); }
};
constexpr size_t kMaxExtraBytes = 8 + 16 + 8 + 8 + 8 * kMaxStackDepth;

// tree: events, and an event at each call's entry too (rings.hpp's kEntryEvent).
enum class Mode { events, count, hist, tree };
// "events", "count", "hist" or "tree".
bool parse_mode(const std::string &word, Mode *mode);

struct Started {
    uint32_t session = 0;              // its slot, what running() and stop() take
    // The shared memory: a descriptor of the calling thread's table that start() made, for the
    // caller to pass to the tool and close (the session keeps none: a kept number would mean
    // another file in another table, os/linux/fd_table.hpp); -1 with a given_fd, and in what
    // running() says.
    int memfd = -1;
    std::vector<std::string> names;    // probe i's function, as resolve() takes it back
    std::vector<uint64_t> addrs;       // and its address (the function's plus the spec's offset)
    std::vector<std::string> skipped;  // "SPEC-or-NAME: why" of each function not probed
    size_t placed = 0;                 // probes registered
    size_t optimized = 0;              // of which hits take the jump path
    std::vector<std::string> slow;     // "N: REASON" for the others, most common reasons first
    std::vector<std::string> slow_each;  // "FUNC: REASON" for each of those, by address
    double place_ms = 0;               // the time start() took
};

// Starts a session in a free slot: each spec as trace/spec.hpp parses it ("do_sys_open",
// "libz.so.1:*", "p:open +0(%di):string"). 0, or -errno with *why: -EBUSY (kSessions run),
// -ENOENT (no function at all), -EINVAL (a malformed spec: *why points at the mistake).
// `given_fd`: a memfd of the tool's to use (a program it started; the caller closes it), else
// -1: one is made.
// `from_environment`: the session LIVEPROBE_TRACE asks for, before main (agent/trace_env.cpp):
// -ECANCELED once its tool is gone (cancel_start_from_environment).
int start(Mode mode, const std::vector<std::string> &specs, int maxactive, Started *out, std::string *why,
          int given_fd = -1, bool follow_forks = true, bool from_environment = false);

// What start() said of session `session` (for a tool that connects to a session started before
// main by LIVEPROBE_TRACE: slot 0): 0, or -ENOENT when none runs there.
int running(uint32_t session, Started *out, Mode *mode);

// The sessions that run, their slots in order.
std::vector<uint32_t> running_sessions();

// The tool of `trace -- CMD` is gone (its pipe or connection closed, agent.cpp) and no session
// runs yet: the one LIVEPROBE_TRACE describes will not start (start() returns -ECANCELED; the
// program runs on untraced).
void cancel_start_from_environment();

// Stops session `session`: unregisters every probe of its (each one's nmissed is copied into the
// shared memory first), closes its descriptor. -ENOENT when none runs there. The other
// sessions go on.
int stop(uint32_t session, std::string *why);

// Copies the session's misses (each kretprobe's nmissed) into its shared memory now, where they
// are otherwise copied as it stops: `trace --serve` serves them live. -ENOENT: no such session.
int sync_missed(uint32_t session);

}  // namespace liveprobe::trace
