// The registry: every registered kprobe, its probe point, and the arm/disarm transactions.
// One mutex serializes registration; the hit path never takes it (it reads the probe table,
// the members snapshots and the thread records, see probe.hpp and thread_state.hpp).
#pragma once

#include <liveprobe/kprobes.h>

#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/probe.hpp"

namespace liveprobe::core {

Status register_probe(struct kprobe *p);

// Whether the function whose entry is `entry` jumps back to it from inside (a loop whose head is
// its first instruction, a tail call to itself): a probe there is hit once a turn, not once a
// call. False when unknown (no function bounds).
bool entry_is_jumped_to(uint64_t entry);
// All or nothing; the probes that can be are optimized in one stop of the other threads.
// `internal`: liveprobe's own probes (KprobeState::internal).
Status register_probes(struct kprobe **kps, int num, bool internal = false);
// Best effort, for tracers: registers every probe of the batch that can be (one arm pass, one
// stop of the other threads for all of them); each[i] is probe i's outcome.
void register_probes_each(struct kprobe **kps, int num, Status *each);
// For the C API's *_each: results[i] = each[i].err; records the last failure as the thread's
// reason; returns how many succeeded.
int tally_outcomes(const std::vector<Status> &each, int *results);
// Returns false if p was not registered.
bool unregister_probe(struct kprobe *p);
Status set_enabled(struct kprobe *p, bool enabled);

// The checks of a kprobe whose pre handler liveprobe supplies (kretprobes, jprobes: `what`
// names it in messages). -EINVAL when p has handlers of its own:
Status check_no_handlers(const struct kprobe &p, const char *what);
// -EINVAL unless p names a function's entry; the errors of symbol resolution otherwise:
Status check_function_entry(const struct kprobe &p, const char *what, uint64_t *addr = nullptr);

struct ProbeCounters {
    uint64_t hits = 0;  // 0 for an uncounted probe (counted false)
    bool counted = true;
    // hits for listings: "-" for an uncounted probe.
    std::string hits_text() const { return counted ? std::to_string(hits) : std::string("-"); }
    uint64_t faults = 0;
    uint64_t nmissed = 0;
    bool optimized = false;
    bool light = false;  // its hits take the light entry (arch/x86_64/detour.hpp)
    const char *why_not = nullptr;  // interned: valid for the life of the process
};
// False if p is not registered.
bool probe_counters(const struct kprobe *p, ProbeCounters *out);

// While one lives, the probes this thread registers are uncounted (KprobeState::uncounted):
// their hits write no per-thread counter, and their hits read 0. For `liveprobe trace`, which
// counts calls itself: a counter of its own per probe and thread is one more cache line touched
// at every hit, about 7% of `--count '*'`'s time on jq.
class UncountedRegistrations {
public:
    UncountedRegistrations();
    ~UncountedRegistrations();
    UncountedRegistrations(const UncountedRegistrations &) = delete;
    UncountedRegistrations &operator=(const UncountedRegistrations &) = delete;

private:
    bool prev_;
};

// A pre handler's light variant: what the light entry calls in its place (KprobeState::
// light_fn) for the probes registered after this, with the same kprobe and no regs. It must
// be proven vector-free and never to read its regs, as any light handler; it may do the common
// case only and return non-zero for the rest: the hit then takes the full entry, which runs
// the pre handler itself. A variant that writes fewer registers than its pre handler (whose
// rare case calls out) makes the light entry save fewer, and its detour shorter. A hit the
// variant sends on is counted twice in hits (both entries count it): for uncounted probes
// (UncountedRegistrations), as the tracer's, for which it is made.
void set_light_variant(kprobe_pre_handler_t pre, kprobe_pre_handler_t light);

// One registered kprobe (not liveprobe's own), for the agent's status.
struct ProbeSummary {
    uint64_t addr = 0;
    const struct kprobe *kp = nullptr;
    char kind = 'k';       // 'k' kprobe, 'r' a kretprobe's entry, 'j' a jprobe's
    unsigned flags = 0;    // kp->flags (KPROBE_FLAG_GONE, _DISABLED, _OPTIMIZED)
    uint64_t kret_nmissed = 0;  // a kretprobe's rp->nmissed (calls that found maxactive in flight)
    std::string symbol;    // kp->symbol_name when it was registered by name (a copy), else ""
    unsigned offset = 0;   // kp->offset
    uint64_t code[5] = {};  // its handlers (the user's, for a kretprobe's or jprobe's), 0 if none
    ProbeCounters counters;
};
// Every registered kprobe, by address.
std::vector<ProbeSummary> list_probes();

// Installs liveprobe's fault handlers (as the first registration does), so that run_guarded
// (core/dispatch.hpp) catches faults outside a hit too: the agent runs modules' init and exit so.
Status prepare_guarded_calls();

void set_optimization(bool enabled);
bool optimization_enabled();

// The tracer's locks around fork() (set by trace/session.cpp before it can start a thread):
// taken by the forking thread before the registry's, in their order everywhere else, and let
// go after (`child`: in the forked child, where they are made again).
extern void (*g_fork_prepare_hook)() noexcept;
extern void (*g_fork_done_hook)(bool child) noexcept;

}  // namespace liveprobe::core
