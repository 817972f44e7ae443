#include "trace/session.hpp"
#include "os/linux/live_tid.hpp"
#include "os/linux/environ.hpp"
#include "core/immortal.hpp"
#include "core/kretprobe.hpp"
#include "core/error.hpp"
#include "core/registry.hpp"
#include "core/thread_state.hpp"

#include <pthread.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <liveprobe/kprobes.h>
#include <liveprobe/ktime.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <memory>
#include <new>
#include <mutex>
#include <algorithm>
#include <map>
#include <set>
#include <chrono>
#include <thread>
#include <deque>
#include <optional>
#include <condition_variable>

#include <fmt/format.h>

#include "agent/channel.hpp"
#include "arch/x86_64/unwind_table.hpp"
#include "os/linux/clock.hpp"
#include "os/linux/raw_syscall.hpp"
#include "symbols/dwarf_params.hpp"
#include "symbols/symbols.hpp"
#include "trace/fetch.hpp"
#include "trace/filter.hpp"
#include "trace/handlers.hpp"
#include "trace/params.hpp"
#include "trace/rings.hpp"
#include "trace/session_state.hpp"
#include "trace/spec.hpp"

namespace liveprobe::trace {

namespace detail {

// Appends to the names the reader sees: false when the room is used up.
bool append_names(Session &ss, const std::string &text)
{
    Header *h = header_of(ss.base);
    uint64_t used = h->names_bytes.load(std::memory_order_relaxed);
    if (used + text.size() > h->names_room) return false;
    std::memcpy(static_cast<char *>(ss.base) + h->names_offset + used, text.data(), text.size());
    h->names_bytes.store(used + text.size(), std::memory_order_release);
    return true;
}

}  // namespace detail

using detail::append_names;
using detail::publish_maps;
using detail::resolve_for;
using detail::Session;
using detail::session_option;
using detail::Target;

namespace {

// Room for probes placed after the start, in libraries loaded later (the per-probe areas are
// sized for it when some spec names a library not loaded yet; sparse until used).
constexpr uint32_t kLateCapacity = 16384;
constexpr size_t kLateNameBytes = 256;  // names room a late probe

// Lock order: g_life_mu, g_mu, g_watch_mu. g_life_mu: a session's start and stop, whole
// (what the watcher and the dlopen probes serve changes with them; stopping those waits for
// threads that take g_mu, so it is done without g_mu, under g_life_mu). g_mu: the sessions.
std::mutex g_life_mu;
std::mutex g_mu;
thread_local bool t_holds_session = false;  // this thread holds g_mu (SessionLock)
// g_mu, saying so for this thread: dlopen_returned must not wait for a lock its thread holds.
// With std::try_to_lock, held only if free (owns()).
struct SessionLock {
    std::unique_lock<std::mutex> lk;
    SessionLock() : lk(g_mu) { t_holds_session = true; }
    explicit SessionLock(std::try_to_lock_t) : lk(g_mu, std::try_to_lock) { t_holds_session = lk.owns_lock(); }
    ~SessionLock()
    {
        if (lk.owns_lock()) t_holds_session = false;
    }
    bool owns() const { return lk.owns_lock(); }
    SessionLock(const SessionLock &) = delete;
    SessionLock &operator=(const SessionLock &) = delete;
};
// The sessions by slot, null where none runs (under g_mu). Never freed at exit: the agent's
// thread may still read them then.
Session *g_sessions[kSessions];

// The thread that places probes in libraries loaded after the start (when specs wait for one),
// for every session (under g_watch_mu; started and stopped under g_life_mu). The mutex and the
// condition variable are never destroyed, and are made again in a forked child: the parent's
// watcher, which is not in the child, may have held the one and waited on the other at the
// fork, and the child's exit then blocked for ever (pthread_cond_destroy waits for the waiters
// it counts; stop_watcher locks the mutex).
std::thread *g_watcher = nullptr;
pid_t g_watcher_pid = 0;
core::Immortal<std::mutex> g_watch_mu_storage;
std::mutex &g_watch_mu = g_watch_mu_storage.value;
core::Immortal<std::condition_variable> g_watch_cv_storage;
std::condition_variable &g_watch_cv = g_watch_cv_storage.value;
bool g_watch_stop = false;

bool is_glob(const std::string &s) { return s.find_first_of("*?[") != std::string::npos; }

// FUNC, FUNC+0x10, as the skipped list says a probe.
std::string probe_text(const std::string &name, const Spec &spec)
{
    return spec.offset ? fmt::format("{}+{:#x}", name, spec.offset) : name;
}

// Copies each kretprobe's nmissed into the session's shared memory: when it stops or the process
// exits (the reader may outlive the process), the copy then final; and when the tool asks
// (sync_missed). Under g_mu (the lists).
void copy_missed(const Session &ss) noexcept
{
    for (auto &p : ss.list)
        missed_of(ss.base, p->index)
            ->store(static_cast<uint64_t>(p->rp.nmissed) + p->rp.kp.nmissed + p->kp.nmissed, std::memory_order_relaxed);
}

void publish_missed(const Session &ss) noexcept
{
    copy_missed(ss);
    header_of(ss.base)->final.store(1, std::memory_order_release);
}

void stop_watcher();

[[gnu::constructor]] void publish_at_exit()
{
    std::atexit([] {
        core::QuietThread quiet;  // on the program's thread: liveprobe's locking and calls
        // Calls this thread left by a longjmp or an exception, not reaped yet: said left now,
        // before the counts are final (they were lost).
        core::kret_reap_overwritten();
        stop_watcher();  // it may be adding probes to the lists
        SessionLock lk;
        for (Session *ss : g_sessions)
            if (ss) publish_missed(*ss);
    });
    // Around a fork, the sessions' locks are the forking thread's (core/registry.cpp takes
    // them first): the watcher, or a thread starting a session, held them across the fork, and
    // the child's exit then blocked for ever on g_mu (jq's make check under a trace); the
    // child must be able to start sessions of its own too. In the child they are made again, and so is the watcher's condition variable, which may count
    // the parent's watcher as a waiter (pthread_cond_destroy at exit waited for it).
    core::g_fork_prepare_hook = [] () noexcept {
        g_life_mu.lock();
        g_mu.lock();
        g_watch_mu.lock();
    };
    core::g_fork_done_hook = [](bool child) noexcept {
        if (child) {
            new (&g_life_mu) std::mutex();
            new (&g_mu) std::mutex();
            new (&g_watch_mu) std::mutex();
            new (&g_watch_cv) std::condition_variable();
            return;
        }
        g_watch_mu.unlock();
        g_mu.unlock();
        g_life_mu.unlock();
    };
}


// The object a spec's target names ("libz.so.1" of "libz.so.1:*"), or empty (the program's).
std::string object_of(const std::string &target)
{
    size_t colon = target.find(':');
    if (colon == std::string::npos || target.compare(colon, 2, "::") == 0) return {};
    return target.substr(0, colon);
}

// The functions user spec `si` names now (globs expanded), each address once: a call (FUNC)
// once whichever spec names it, others once a spec.
void collect(Session &ss, uint32_t si, std::vector<Target> *fns, std::vector<std::string> *skipped, std::string *why)
{
    const Spec &spec = ss.user[si];
    uint32_t key = spec.kind == SpecKind::call ? UINT32_MAX : si;
    if (is_glob(spec.target)) {
        std::vector<symbols::Match> found;
        if (symbols::match(spec.target, &found, why) < 0) {
            skipped->push_back(spec.target + ": " + *why);
            return;
        }
        if (found.empty()) skipped->push_back(spec.target + ": no function matches");
        size_t shorter = 0;  // functions the offset is past the end of: not probed
        for (auto &m : found) {
            if (spec.offset != 0 && m.size != 0 && spec.offset >= m.size) {
                ++shorter;
                continue;
            }
            if (ss.seen.insert({key, m.addr}).second) fns->push_back({m.addr + spec.offset, m.name, si});
        }
        if (shorter)
            skipped->push_back(fmt::format("{}+{:#x}: {} of the {} functions matched are {} bytes or shorter", spec.target,
                                           spec.offset, shorter, found.size(), spec.offset));
    } else {
        uint64_t addr = 0;
        std::string reason;
        if (symbols::resolve(spec.target, &addr, &reason) < 0) {
            skipped->push_back(spec.target + ": " + reason);
            return;
        }
        // An offset past the function's end names no instruction of it (it said only that the
        // address was not mapped, or "Invalid argument").
        if (spec.offset != 0)
            if (auto f = symbols::function_at(addr); f && f->start == addr && addr + spec.offset >= f->end) {
                skipped->push_back(fmt::format("{}+{:#x}: past the end of {} ({} bytes)", spec.target, spec.offset,
                                               spec.target, f->end - f->start));
                return;
            }
        if (ss.seen.insert({key, addr}).second) fns->push_back({addr + spec.offset, spec.target, si});
    }
}


void place(Session &ss, std::vector<Target> fns, Started *out)
{
    if (ss.extra.stack_depth) arch::build_unwind_table();  // objects loaded since: their rows too
    if (ss.extra.bytes()) publish_maps(ss);
    std::string why;
    std::string names;
    std::vector<Target> placed;
    Header *h = header_of(ss.base);
    uint32_t first = h->probes.load(std::memory_order_relaxed);
    for (Target &f : fns) {
        if (first + placed.size() >= h->capacity) {
            out->skipped.push_back(f.name + ": no room for more probes in this session");
            continue;
        }
        Spec spec = ss.user[f.spec];
        if (resolve_params(&spec, f.addr - spec.offset, ss.mode == Mode::events || ss.mode == Mode::tree, &why) < 0) {
            out->skipped.push_back(fmt::format("{}: {}", f.name, why));
            continue;
        }
        // The expressions' operands, for this function.
        if (!resolve_for(ss, ss.filter, "--filter", spec, f, &f.filter, out) ||
            !resolve_for(ss, ss.key, "--by", spec, f, &f.key, out) ||
            !resolve_for(ss, ss.value, "--hist-of", spec, f, &f.value, out))
            continue;
        std::string text = to_text(spec);
        auto [it, added] = ss.spec_index.emplace(text, static_cast<uint32_t>(ss.specs.size()));
        if (added) {
            ss.specs.push_back(std::move(spec));
            names += "spec " + agent::encode_arg(text) + "\n";
        }
        f.spec = it->second;
        names += fmt::format("{:#x} {} {}\n", f.addr, f.spec, f.name);
        placed.push_back(std::move(f));
    }
    if (placed.empty()) return;
    if (!append_names(ss, names)) {
        out->skipped.push_back(fmt::format("{} functions: no room for their names in this session", placed.size()));
        return;
    }
    uint32_t n = static_cast<uint32_t>(placed.size());
    // Each probe: a kprobe (--count; an instruction) or a kretprobe (a call; a return).
    std::vector<struct kprobe *> kps;
    std::vector<struct kretprobe *> rps;
    std::vector<uint32_t> kp_index, rp_index;
    // Slot 0's handlers, or the other slots' (trace/handlers.hpp).
    const bool first_slot = ss.slot == 0;
    for (uint32_t i = 0; i < n; ++i) {
        auto p = std::make_unique<Probe>();
        const Spec &spec = ss.specs[placed[i].spec];
        p->index = first + i;
        p->session = ss.slot;
        p->spec = &spec;
        p->filter = placed[i].filter;
        p->key = placed[i].key;
        p->value = placed[i].value;
        p->extra = ss.extra;
        p->spec_bytes = static_cast<uint32_t>(event_bytes(spec));
        p->bytes = static_cast<uint32_t>(p->spec_bytes + p->extra.bytes());
        p->slots = record_slots(p->bytes);
        // Its values read the thread's vector registers: saved for its handlers, whatever
        // their code (which never touches them).
        p->fpregs = needs_fpregs(spec);
        const uint32_t fp_flag = p->fpregs ? KPROBE_FLAG_FPREGS : 0;
        p->kp.flags |= fp_flag;
        p->rp.kp.flags |= fp_flag;
        // --count of a function that jumps back to its own entry: a kretprobe counts it, once
        // a call (an entry kprobe there is hit once a turn of the loop).
        const bool count_calls = ss.mode == Mode::count && spec.kind != SpecKind::probe && spec.offset == 0 &&
                                 core::entry_is_jumped_to(placed[i].addr);
        // --count --filter of a call whose filter reads retval or duration, or whose function
        // jumps back to its entry: counted at the return, where the filter can read all (one on
        // the arguments is decided at the entry, by a kprobe: count_pre_filtered).
        const bool count_at_return = ss.mode == Mode::count && p->filter && spec.kind != SpecKind::probe &&
                                     (p->filter->at_return || count_calls);
        // A call's filter on its arguments alone is decided at its entry (filter_entry: a call
        // declined has no return to handle, and the others take the usual, lighter, return).
        // Other expressions read the arguments at the return: the entry keeps them.
        const bool at_entry = p->filter && !p->filter->at_return && p->extra.bytes() == 0 &&
                              spec.kind == SpecKind::call && (ss.mode == Mode::events || ss.mode == Mode::hist);
        const bool filtered = !at_entry && (p->filter != nullptr || p->extra.bytes() != 0);
        if (count_at_return) {
            p->rp.kp.addr = reinterpret_cast<kprobe_opcode_t *>(placed[i].addr);
            p->rp.entry_handler = entry_regs;
            p->rp.handler = count_filtered;
            p->rp.data_size = sizeof(EntryData);
            p->rp.maxactive = spec.maxactive ? spec.maxactive : ss.maxactive;
            rps.push_back(&p->rp);
            rp_index.push_back(i);
        } else if (count_calls) {
            p->rp.kp.addr = reinterpret_cast<kprobe_opcode_t *>(placed[i].addr);
            p->rp.entry_handler = first_slot ? count_entry : count_entry_other;
            p->rp.maxactive = spec.maxactive ? spec.maxactive : ss.maxactive;
            rps.push_back(&p->rp);
            rp_index.push_back(i);
        } else if (ss.mode == Mode::count || spec.kind == SpecKind::probe) {
            p->kp.addr = reinterpret_cast<kprobe_opcode_t *>(placed[i].addr);
            p->kp.pre_handler = ss.mode == Mode::count && filtered ? count_pre_filtered
                                : ss.mode == Mode::count    ? (first_slot ? count_pre : count_pre_other)
                                : first_slot                ? fetch_pre
                                                            : fetch_pre_other;
            kps.push_back(&p->kp);
            kp_index.push_back(i);
        } else {
            p->rp.kp.addr = reinterpret_cast<kprobe_opcode_t *>(placed[i].addr);
            const bool tree = ss.mode == Mode::tree;
            const bool regs = tree || filtered || (ss.mode == Mode::events && spec.kind == SpecKind::ret);
            p->rp.entry_handler = tree       ? (first_slot ? tree_entry : tree_entry_other)
                                  : at_entry ? filter_entry
                                  : regs     ? entry_regs
                                             : entry_cycles;
            p->rp.handler = ss.mode == Mode::hist && filtered ? hist_filtered
                            : ss.mode == Mode::hist        ? (!first_slot ? hist_return_other
                                                              : g_tsc     ? hist_return
                                                                          : hist_return_clock)
                            : spec.kind == SpecKind::ret || filtered ? (first_slot ? fetch_return : fetch_return_other)
                            : p->bytes                   ? (first_slot ? value_return : value_return_other)
                            : first_slot                 ? event_return
                                                         : event_return_other;
            p->rp.unwind_handler = tree ? tree_left : left_call;  // counted: the totals hold every call
            p->rp.data_size = regs ? sizeof(EntryData) : sizeof(uint64_t);
            p->rp.maxactive = spec.maxactive ? spec.maxactive : ss.maxactive;
            rps.push_back(&p->rp);
            rp_index.push_back(i);
        }
        ss.list.push_back(std::move(p));
    }
    // The reader knows of them before any can fire.
    h->probes.store(first + n, std::memory_order_release);
    // Each probe's outcome, with its reason (the core's calls: the C API's keep a number only).
    std::vector<Status> results(n), kp_results(kps.size()), rp_results(rps.size());
    int registered = 0;
    // trace counts calls itself (count_pre, the return handlers): the engine's own hit counters
    // would only cost a cache line per hit.
    core::UncountedRegistrations uncounted;
    core::CallsOnlyRegistrations calls_only;  // a function's jumps back to its entry are no calls
    core::set_light_variant(count_pre, count_light);
    core::set_light_variant(count_pre_other, count_light_other);
    core::set_kret_entry_stamp(g_tsc ? entry_cycles : nullptr);  // what entry_cycles does then
    core::set_kret_return_inline(hist_return, g_tsc ? reinterpret_cast<const void *>(lp_trace_hist_inline) : nullptr);
    if (!kps.empty()) core::register_probes_each(kps.data(), static_cast<int>(kps.size()), kp_results.data());
    if (!rps.empty()) core::register_kretprobes_each(rps.data(), static_cast<int>(rps.size()), rp_results.data());
    for (size_t k = 0; k < kps.size(); ++k) results[kp_index[k]] = kp_results[k];
    for (size_t k = 0; k < rps.size(); ++k) results[rp_index[k]] = rp_results[k];
    for (const Status &r : results) registered += r.ok() ? 1 : 0;
    // The failed ones stay in the list (their index is the shared memory's), unregistered.
    std::map<std::string, size_t> reasons;
    std::string slow_lines;
    for (uint32_t i = 0; i < n; ++i) {
        Probe &p = *ss.list[first + i];
        out->names.push_back(placed[i].name);
        out->addrs.push_back(placed[i].addr);
        if (!results[i].ok()) {
            p.kp.addr = nullptr;  // not to be unregistered
            p.rp.kp.addr = nullptr;
            const Status &r = results[i];
            out->skipped.push_back(fmt::format("{}: {}", probe_text(placed[i].name, ss.specs[placed[i].spec]),
                                               r.err == -EILSEQ      ? std::string("not the start of an instruction")
                                               : r.reason.empty() ? std::string(std::strerror(-r.err))
                                                                  : r.reason));
            continue;
        }
        // Which take the jump path; the reasons of the others, most common first (a probe on
        // the breakpoint path costs a signal, microseconds, a hit: worth saying which and why).
        const struct kprobe *kp = p.kp.addr ? &p.kp : &p.rp.kp;
        struct liveprobe_info info {};
        if (liveprobe_kprobe_info(kp, &info) != 0) continue;
        if (kp->flags & KPROBE_FLAG_OPTIMIZED) {
            ++out->optimized;
            continue;
        }
        const char *why_not = info.why_not_optimized ? info.why_not_optimized : "unknown";
        ++reasons[why_not];
        out->slow_each.push_back(
            fmt::format("{}: {}", probe_text(placed[i].name, ss.specs[placed[i].spec]), why_not));
        slow_lines += fmt::format("slow {} {}\n", first + i, why_not);
    }
    // The tool's --verbose summary says which of the functions that ran took the breakpoint
    // path: each one's reason, published beside the names (left out when there is no room).
    if (!slow_lines.empty()) append_names(ss, slow_lines);
    out->placed += static_cast<size_t>(registered);
    std::vector<std::pair<size_t, std::string>> by_count;
    for (auto &[why_not, count] : reasons) by_count.emplace_back(count, why_not);
    std::sort(by_count.begin(), by_count.end(), [](auto &x, auto &y) { return x.first > y.first; });
    for (auto &[count, why_not] : by_count)
        out->slow.push_back(fmt::format("{} probe{}: {}", count, count == 1 ? "" : "s", why_not));
}

// Places the probes of the pending specs whose library is loaded now (g_mu held).
void place_pending(Session &ss)
{
    std::vector<Target> fns;
    Started late;
    std::string why;
    for (size_t k = 0; k < ss.pending.size();) {
        uint32_t si = ss.pending[k];
        if (!symbols::object_loaded(object_of(ss.user[si].target))) {
            ++k;
            continue;
        }
        collect(ss, si, &fns, &late.skipped, &why);
        ss.pending.erase(ss.pending.begin() + static_cast<long>(k));
    }
    if (!fns.empty()) place(ss, std::move(fns), &late);
}

// Every 10 ms, whether the loader loaded something since; if so, the pending specs' turn.
void watch()
{
    core::QuietThread quiet;  // its lookups' calls into probed code (malloc) are not the program's
    unsigned long long seen = 0;  // a first look at once: a dlopen may have come before this thread
    std::unique_lock wl(g_watch_mu);
    while (!g_watch_stop) {
        g_watch_cv.wait_for(wl, std::chrono::milliseconds(10));
        if (g_watch_stop) break;
        unsigned long long now = symbols::load_count();
        if (now == seen) continue;
        seen = now;
        wl.unlock();
        {
            SessionLock lk;
            for (Session *ss : g_sessions)
                if (ss && !ss->pending.empty()) place_pending(*ss);
        }
        wl.lock();
    }
}

// dlopen's and dlmopen's return, while specs wait for a library: the pending specs' probes are
// placed right there, in the thread that loaded it, before the program can call into it (the
// watcher, every 10 ms, came too late for a program that calls its plugin at once). Not in a
// thread that holds g_mu (liveprobe's own dlopen while it places probes: the watcher then
// does it). Runs as a return handler: this thread's own hits meanwhile are missed. In a forked
// child only if g_mu is free: a thread of the parent may have held it at the fork.
struct kretprobe g_dlopen_rps[2];
bool g_dlopen_armed = false;  // g_mu

int dlopen_returned(struct kretprobe_instance *, struct pt_regs *regs) noexcept
{
    if (regs_return_value(regs) == 0 || t_holds_session) return 0;  // it failed, or it is ours
    core::QuietThread quiet;  // placing probes: liveprobe's calls, neither counted nor missed
    SessionLock lk = getpid() == g_watcher_pid ? SessionLock() : SessionLock(std::try_to_lock);
    if (!lk.owns()) return 0;
    for (Session *ss : g_sessions)
        if (ss && !ss->pending.empty()) place_pending(*ss);
    return 0;
}

// With g_mu held. Without dlopen in the process (a static program), the watcher alone.
void arm_dlopen()
{
    if (g_dlopen_armed) return;
    const char *names[2] = {"dlopen", "dlmopen"};
    for (int i = 0; i < 2; ++i) {
        g_dlopen_rps[i] = {};
        g_dlopen_rps[i].kp.symbol_name = names[i];
        g_dlopen_rps[i].handler = dlopen_returned;
        if (register_kretprobe(&g_dlopen_rps[i]) != 0) g_dlopen_rps[i].kp.symbol_name = nullptr;
    }
    g_dlopen_armed = true;
}

// Without g_mu: unregistering waits for a dlopen_returned that may be waiting for it.
void disarm_dlopen()
{
    bool armed;
    {
        SessionLock lk;
        armed = g_dlopen_armed;
        g_dlopen_armed = false;
    }
    if (!armed) return;
    for (auto &rp : g_dlopen_rps)
        if (rp.kp.symbol_name) unregister_kretprobe(&rp);
}

// Starts the watcher unless it runs in this process (under g_life_mu). A forked child has the
// parent's std::thread but not its thread: left alone (never destroyed: a joinable
// std::thread's destructor would end the process).
void ensure_watcher()
{
    std::lock_guard wl(g_watch_mu);
    if (g_watcher && g_watcher_pid == getpid()) return;
    g_watch_stop = false;
    g_watcher_pid = getpid();
    g_watcher = new std::thread(watch);
}

void stop_watcher()
{
    std::thread *t = nullptr;
    {
        std::lock_guard wl(g_watch_mu);
        t = g_watcher;
        g_watcher = nullptr;
        g_watch_stop = true;
    }
    g_watch_cv.notify_all();
    if (!t) return;
    if (g_watcher_pid == getpid()) {  // not the parent's, in a forked child (ensure_watcher)
        t->join();
        delete t;
    }
}

}  // namespace

namespace {
// The tool of `trace -- CMD` died before the program's session started (under SessionLock).
bool g_env_start_cancelled = false;
}  // namespace

void cancel_start_from_environment()
{
    SessionLock lk;
    if (!g_sessions[0]) g_env_start_cancelled = true;
}

int start(Mode mode, const std::vector<std::string> &spec_texts, int maxactive, Started *out, std::string *why,
          int given_fd, bool follow_forks, bool from_environment)
{
    std::lock_guard life(g_life_mu);
    SessionLock lk;
    if (from_environment && g_env_start_cancelled) {
        *why = "the tool that started this program is gone: not tracing";
        return -ECANCELED;
    }
    uint64_t t0 = liveprobe_ktime_ns();
    const auto free_slot = std::find(std::begin(g_sessions), std::end(g_sessions), nullptr);
    if (free_slot == std::end(g_sessions)) {
        *why = fmt::format("{} trace sessions already run in this process, the most at once: end one", kSessions);
        return -EBUSY;
    }
    auto ss = std::make_unique<Session>();
    ss->slot = static_cast<uint32_t>(free_slot - std::begin(g_sessions));
    ss->mode = mode;
    ss->maxactive = maxactive;
    // The session's options among the specs (--filter=EXPR), then the specs, parsed and checked
    // against the mode.
    std::vector<std::string> texts;
    for (const std::string &t : spec_texts)
        if (int r = session_option(*ss, t, &texts, why); r < 0) return r;
    if (ss->extra.stack_depth) arch::build_unwind_table();  // before any probe can walk a stack
    ss->user.resize(texts.size());
    for (size_t i = 0; i < texts.size(); ++i) {
        Spec &spec = ss->user[i];
        std::string error;
        size_t at = 0;
        if (!parse_spec(texts[i], &spec, &error, &at)) {
            *why = point_at(texts[i], at, error);
            return -EINVAL;
        }
        if (std::string c = mode_conflict(spec, mode == Mode::count, mode == Mode::hist); !c.empty()) {
            *why = c;
            return -EINVAL;
        }
        if (int r = resolve_fetch_symbols(&spec, why); r < 0) return r;
    }
    // The functions each spec names now; a spec on a library not loaded yet waits for it.
    std::vector<Target> fns;
    for (uint32_t si = 0; si < ss->user.size(); ++si) {
        std::string object = object_of(ss->user[si].target);
        // Objects that are loaded but never traced: said, not waited for (the wait never ended).
        if (object == "[vdso]" || object == "[vsyscall]" || object.rfind("linux-vdso.so", 0) == 0) {
            out->skipped.push_back(fmt::format("{}: the vDSO is not traced (the kernel's code in the process)", object));
            continue;
        }
        if (!object.empty() && symbols::object_is_own(object)) {
            out->skipped.push_back(fmt::format("{}: liveprobe's own library is not traced (its code runs the probes)", object));
            continue;
        }
        if (!object.empty() && !symbols::object_loaded(object)) {
            ss->pending.push_back(si);
            out->skipped.push_back(fmt::format("{}: not loaded yet: its probes are placed when it is", object));
            continue;
        }
        collect(*ss, si, &fns, &out->skipped, why);
    }
    if (fns.empty() && ss->pending.empty()) {
        *why = out->skipped.empty() ? "no function to trace" : out->skipped.front();
        return -ENOENT;
    }
    // The shared memory, before any probe can fire: the tool's (a program it started), or one of
    // our own that the agent passes to the tool. Room for the functions found, and for late
    // ones when some spec waits for a library.
    uint32_t capacity = static_cast<uint32_t>(fns.size()) + (ss->pending.empty() ? 0 : kLateCapacity);
    size_t room = 0;
    for (const Target &f : fns) room += f.name.size() + 32;
    for (const Spec &spec : ss->user) room += 16 + 2 * spec.text.size() * 3 + 64 * spec.args.size();  // a resolved spec, encoded
    room = room * 2 + 4096 + (ss->pending.empty() ? 0 : size_t{kLateCapacity} * kLateNameBytes);
    if (ss->extra.bytes()) room += 64 << 10;  // the "map" lines (publish_maps)
    size_t bytes = (names_offset(capacity, mode == Mode::hist) + room + 4095) & ~size_t{4095};
    int fd = given_fd;
    if (fd >= 0) {
        struct stat st {};
        if (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) < bytes) {
            *why = fmt::format("the tool's shared memory (descriptor {}) is too small for {} probes", fd, capacity);
            return -ENOSPC;
        }
        bytes = static_cast<size_t>(st.st_size);
    } else {
        // Its size sealed: the tool that maps it (root's, perhaps) must never meet a shorter file
        // (SIGBUS), whoever passes it on. Made in the agent's own table (fd_table.hpp), or
        // before main: no number the program could be using at that instant.
        fd = static_cast<int>(syscall(SYS_memfd_create, "liveprobe-trace", 3u /* MFD_CLOEXEC | MFD_ALLOW_SEALING */));
        if (fd < 0 || ftruncate(fd, static_cast<off_t>(bytes)) != 0 ||
            fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
            int e = errno;
            if (fd >= 0) close(fd);
            *why = fmt::format("cannot make the trace's shared memory ({} MiB): {}", bytes >> 20, std::strerror(e));
            return -e;
        }
    }
    void *base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) {
        int e = errno;
        if (given_fd < 0) close(fd);
        *why = fmt::format("cannot map the trace's shared memory: {}", std::strerror(e));
        return -e;
    }
    Header *h = new (base) Header();
    h->magic = kRingsMagic;
    h->rings = kRings;
    h->records = kRingRecords;
    h->capacity = capacity;
    h->hist = mode == Mode::hist;
    h->counts_calls = mode == Mode::count;
    h->extra_bytes = static_cast<uint32_t>(ss->extra.bytes());
    h->stack_depth = ss->extra.stack_depth;
    h->names_offset = names_offset(capacity, mode == Mode::hist);
    h->names_room = bytes - h->names_offset;
    ss->base = base;
    ss->bytes = bytes;
    // The slot's hit-path state, while none of its probes is registered; the new generation
    // sends every thread to claim a ring in this session's memory.
    Slot &slot = g_slots[ss->slot];
    slot.base = base;
    slot.capacity = capacity;
    slot.follow = follow_forks;
    slot.silent.store(false, std::memory_order_relaxed);
    g_tsc = os::clock::is_tsc();
    os::init_live_tid();  // before the first return is filed (handlers.cpp)
    slot.generation.fetch_add(1, std::memory_order_release);

    // Started from the environment (`trace -- CMD`): the image's executable first, "exe PATH",
    // for the tool that follows exec (it files each function under its executable's name).
    if (from_environment) {
        char exe[4096];
        const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        append_names(*ss, "exe " + (n > 0 ? std::string(exe, static_cast<size_t>(n)) : std::string("?")) + "\n");
    }
    place(*ss, std::move(fns), out);
    // The DWARF the types came from is the largest thing the agent reads (libc's debug file:
    // megabytes of libdw's structures): let go of it once the probes are placed (its answers
    // are kept: symbols/dwarf_params.cpp g_answers).
    symbols::close_dwarf();
    if (out->placed == 0 && ss->pending.empty()) {
        munmap(base, bytes);
        if (given_fd < 0) close(fd);
        slot.base = nullptr;
        *why = out->skipped.empty() ? "no probe could be registered" : "no probe could be registered: " + out->skipped.back();
        out->names.clear();
        out->addrs.clear();
        return -ENOENT;
    }
    out->place_ms = static_cast<double>(liveprobe_ktime_ns() - t0) / 1e6;
    out->session = ss->slot;
    out->memfd = -1;  // what running() says
    ss->started = *out;
    out->memfd = given_fd < 0 ? fd : -1;
    bool waits = !ss->pending.empty();
    const uint32_t at = ss->slot;
    g_sessions[at] = ss.release();
    h->ready.store(1, std::memory_order_release);
    if (waits) {
        arm_dlopen();
        ensure_watcher();
    }
    return 0;
}

int running(uint32_t session, Started *out, Mode *mode)
{
    SessionLock lk;
    if (session >= kSessions || !g_sessions[session]) return -ENOENT;
    *out = g_sessions[session]->started;
    *mode = g_sessions[session]->mode;
    return 0;
}

std::vector<uint32_t> running_sessions()
{
    SessionLock lk;
    std::vector<uint32_t> out;
    for (uint32_t i = 0; i < kSessions; ++i)
        if (g_sessions[i]) out.push_back(i);
    return out;
}

int sync_missed(uint32_t session)
{
    SessionLock lk;
    if (session >= kSessions || !g_sessions[session]) return -ENOENT;
    copy_missed(*g_sessions[session]);
    return 0;
}

bool parse_mode(const std::string &word, Mode *mode)
{
    if (word == "events") *mode = Mode::events;
    else if (word == "count") *mode = Mode::count;
    else if (word == "hist") *mode = Mode::hist;
    else if (word == "tree") *mode = Mode::tree;
    else return false;
    return true;
}

// Stopping a session:
//  1. Under g_life_mu, whole: no session starts or stops meanwhile.
//  2. Whether another session still waits for a library; if none does, the watcher and the
//     dlopen probes stop, without g_mu (they wait for threads that take it).
//  3. Under g_mu: its kretprobes' misses published, its probes unregistered in batches (which
//     waits for every handler of theirs), the misses of the calls in flight meanwhile published.
//  4. It leaves the table; its memory is unmapped (the tool keeps its own mapping). The slot's
//     hit-path state stays until a session takes the slot again: no handler reads it now.
int stop(uint32_t session, std::string *why)
{
    std::lock_guard life(g_life_mu);  // 1
    bool others_wait = false;         // 2
    {
        SessionLock lk;
        if (session >= kSessions || !g_sessions[session]) {
            *why = "no trace session runs in this process";
            return -ENOENT;
        }
        for (Session *ss : g_sessions)
            if (ss && ss != g_sessions[session] && !ss->pending.empty()) others_wait = true;
    }
    if (!others_wait) {
        stop_watcher();
        disarm_dlopen();
    }
    SessionLock lk;  // 3
    Session *ss = g_sessions[session];
    publish_missed(*ss);
    // Each probe of the list as it was registered (a failed one has no address); in batches.
    std::vector<struct kprobe *> kps;
    std::vector<struct kretprobe *> rps;
    for (auto &p : ss->list) {
        if (p->kp.addr) kps.push_back(&p->kp);
        if (p->rp.kp.addr) rps.push_back(&p->rp);
    }
    if (!kps.empty()) unregister_kprobes(kps.data(), static_cast<int>(kps.size()));
    if (!rps.empty()) unregister_kretprobes(rps.data(), static_cast<int>(rps.size()));
    publish_missed(*ss);
    g_sessions[session] = nullptr;  // 4
    munmap(ss->base, ss->bytes);
    delete ss;
    return 0;
}

}  // namespace liveprobe::trace
