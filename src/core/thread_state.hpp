// Per-thread state of the hit path.
//
// Each thread that hits a probe claims a ThreadRecord (on its first hit, inside a signal
// handler: so no malloc, records come from mmap'd chunks) and keeps it until it exits. Records
// are reachable from every thread through a lock-free list, so registration code can see
// what each thread is doing (quiescence) and sum its counters. Records are never freed:
// an exited thread's record is reused by a later thread, counters included, so sums stay
// right.
//
// Concurrency contract:
//   owner       CAS by a claiming thread; kept at its exit (exiting set by the pthread key
//               destructor) until the thread is gone, then CAS by a claiming thread.
//   busy, kret_busy
//               slots written only by the owner (and its signal handlers); read by any
//               registering thread (BusySlots::holds). depth: owner only.
//   in_handler, guard
//               owner only.
//   counters    the array pointer is published with release when the record is first claimed
//               (never null in a record its thread holds: the claim fails without it);
//               entries are written only by the owner (relaxed), read by any thread for sums.
#pragma once

#include <atomic>
#include <cstdint>

struct pt_regs;

namespace liveprobe::core {

struct ProbePoint;
struct KprobeState;
struct GuardFrame;

constexpr uint32_t kMaxCounters = 1u << 20;  // probe ids per process (8 MiB of virtual memory)

// What a thread is dispatching: one slot per nesting level. A handler's callee may hit another
// probe, a signal handler may interrupt a dispatch: each level publishes its own slot and clears
// only its own when done, so an inner level never hides an outer one from a thread waiting for
// it (with one shared slot, an inner dispatch overwrote the outer point for a moment, and a
// waiting unregistration that looked then freed the point under the running outer handler).
// A mark is the depth before a level: release(mark) ends that level and any left above it.
// Writing order, for a signal handler that interrupts on the same thread: depth first, then
// the slot, when taking a level; the slot first, then depth, when leaving it.
template <typename T>
struct BusySlots {
    static constexpr uint32_t kLevels = 4;
    std::atomic<T> slot[kLevels] = {};
    uint32_t depth = 0;

    uint32_t mark() const noexcept { return depth; }
    // Takes the next level for v: false (nothing changed) when all are taken. The caller
    // orders the slot's store with what it reads next (dispatch.hpp publish_busy).
    bool take(T v) noexcept
    {
        uint32_t d = depth;
        if (d >= kLevels) return false;
        depth = d + 1;
        std::atomic_signal_fence(std::memory_order_seq_cst);
        slot[d].store(v, std::memory_order_relaxed);
        return true;
    }
    void release(uint32_t m) noexcept
    {
        // Common case: only the level at m was taken. Its stores then take m from a register,
        // not from depth just stored (a store-to-load forwarding on every hit's critical path);
        // depth is only compared, which a predicted branch does not wait for.
        if (depth == m + 1) [[likely]] {
            slot[m].store(T{}, std::memory_order_release);
        } else {
            for (uint32_t d = depth; d > m;) slot[--d].store(T{}, std::memory_order_release);
        }
        std::atomic_signal_fence(std::memory_order_seq_cst);
        depth = m;
    }
    // Whether some level holds v (any thread; after a membarrier, see dispatch.hpp).
    bool holds(T v) const noexcept
    {
        for (const auto &s : slot)
            if (s.load(std::memory_order_seq_cst) == v) return true;
        return false;
    }
    void clear() noexcept
    {
        for (auto &s : slot) s.store(T{}, std::memory_order_relaxed);
        depth = 0;
    }
};
using BusyMark = uint32_t;

struct alignas(64) ThreadRecord {
    std::atomic<int> owner{0};                  // tid, 0 when free
    // Its thread is exiting: the key destructor ran, and the thread may still run the code that
    // follows it (libc's teardown: free...), whose hits are still its own, under its tid. A
    // claiming thread takes the record once that tid no longer exists (claim()).
    std::atomic<bool> exiting{false};
    BusySlots<ProbePoint *> busy;               // the probe points this thread is dispatching
    int in_handler = 0;                         // a handler of some probe runs on this thread
    int quiet = 0;  // liveprobe itself runs (registry): hits run no handler and are not counted
    GuardFrame *guard = nullptr;                // innermost fault guard
    // The jump path's one-handler fast path (arch/x86_64/jump_path.cpp): while its handler
    // runs, the detour's registers (a fault there resumes the detour), the kprobe and the
    // busy mark to go back to. jump_regs is null otherwise.
    struct pt_regs *jump_regs = nullptr;
    struct KprobeState *jump_ks = nullptr;
    BusyMark jump_prev = 0;
    // The same for the light path (arch/x86_64/jump_light.S): where the running handler's
    // return address is (the light dispatcher's stack pointer when it jumped there), null
    // otherwise.
    uint64_t *jump_light = nullptr;
    // [kMaxCounters], mapped when the record is first claimed, never freed.
    std::atomic<std::atomic<uint64_t> *> counters{nullptr};
    ThreadRecord *next = nullptr;               // immutable once published

    // Return probes (core/kretprobe.cpp), owner only except kret_busy (read by unregistering
    // threads, as busy). ret_top: the newest call in flight of this thread's return stack.
    BusySlots<const void *> kret_busy;
    void *ret_top = nullptr;
    // The call whose return slot kret_pre has just replaced while lp_jump_pre's fast path ran
    // it (core/kretprobe.hpp kret_take_rsb), until lp_jump_pre takes it; null otherwise.
    void *kret_rsb = nullptr;
    // The call whose entry handler kret_pre runs under the fast path's guard (kret_abandon_entry).
    void *kret_entry = nullptr;
    // A handler the light paths run through lp_kret_call_saving or lp_kret_call_bare
    // (kretprobe_trampoline.S): a kretprobe's entry handler (lp_kret_light_c), or a light
    // return's handler (lp_kret_light_return). kret_light_sp, while it runs: where a fault in it
    // resumes (arch::light_fault_resume, kret_fault_resume); null otherwise.
    uint64_t *kret_light_sp = nullptr;
    void *kret_light_h = nullptr;
    // While kretprobe_return runs a return handler with no setjmp guard (core/kret_hit.cpp):
    // what a fault there needs to finish the return (lp_kret_fault). regs is null otherwise.
    struct KretGuard {
        struct pt_regs *regs = nullptr;
        void *inst = nullptr;   // the call whose handler runs
        void *next = nullptr;   // the calls of the same slot still to run
        BusyMark prev_busy = 0;
        uint64_t ret = 0, rsb = 0;
    } kret_guard;
    // The call whose return handler the light return runs (core/kret_hit.cpp
    // lp_kret_light_return), null otherwise.
    void *kret_light = nullptr;
    // Calls reaped as gone while their frame might still return (a stack switch liveprobe
    // could not see): where they return, so that the trampoline can still send them home.
    static constexpr uint32_t kReaped = 32;
    uint64_t reaped_slot[kReaped] = {};
    uint64_t reaped_ret[kReaped] = {};
    uint32_t reaped_next = 0;
    // Free instances kept by this thread for the kretprobes it used last (no atomic operation
    // on a call whose instance comes from and goes back here), direct-mapped by probe
    // (core/kret_hit.cpp cache_entry): a tracer's hundreds of kretprobes mostly find theirs.
    // Cached instances count as taken for the pool's maxactive and its memory. `hot` is the
    // instance given back last, kept apart from the list: a call that nests no other call of
    // its probe takes it back with one load, where the list's pop is two dependent loads and a
    // read-modify-write of n, a chain every call of a loop waited on (its previous return
    // pushed what it pops).
    struct KretCache {
        const void *ks = nullptr;
        void *hot = nullptr;
        void *head = nullptr;
        uint32_t n = 0;  // on the list (hot not counted)
    };
    static constexpr uint32_t kKretCaches = 64;
    static constexpr uint32_t kKretCacheMax = 8;
    KretCache kret_cache[kKretCaches];
    uint64_t kret_seen_unregistrations = 0;
    // A stack address at or above the frames of the outermost handler now running, set by the C
    // paths that start one (run_pre, run_post, the return probes' handlers); 0 otherwise. The
    // assembly paths' own markers say the same: jump_light, the light return's kret_light.
    // What reset_abandoned_handler (dispatch.hpp) compares a later hit's stack pointer with.
    uint64_t handler_sp = 0;
    // Where the outermost QuietThread of the program's own thread lives (its frame is at or above
    // it), for reset_abandoned_handler: a scope left by a siglongjmp out of a signal handler;
    // 0 when the quiet level is not one a jump may leave (the registry's, a thread's exit,
    // liveprobe's own threads).
    uint64_t quiet_sp = 0;
    // The frame of the C path that holds the outermost level of busy (jump_pre, jump_post, the
    // breakpoint path: dispatch.hpp BusyFrame), 0 otherwise: what reset_abandoned_handler
    // compares a later hit's stack pointer with when that level was left by a siglongjmp.
    uint64_t level_sp = 0;
    bool resetting = false;  // reset_abandoned_handler runs on this thread (a nudge may land in it)
    // The stack pointer at the entry of the outermost stack walker running on this thread
    // (_Unwind_Backtrace, unw_backtrace: its return slot), 0 when none (core/kret_unwind.cpp).
    uint64_t walk_sp = 0;

    // Where the probed thread's floating-point registers are while its handlers run with them
    // saved (the jump path's save area, or the signal frame on the breakpoint path): xmm i at
    // saved_xmm + i * saved_xmm_stride, st(i) at saved_st + i * 16 (null: the x87 stack is
    // empty). saved_xmm null: the live registers are the thread's (vector-free handlers).
    // Read by jprobes (core/jprobe_hit.cpp) and liveprobe_get_fpregs; writes take effect.
    uint8_t *saved_xmm = nullptr;
    uint64_t saved_xmm_stride = 0;
    uint8_t *saved_st = nullptr;
    // The innermost lp_jprobe_call frame.
    uint64_t jprobe_frame = 0;
};

// Called with a record whose thread is gone (its exit, or a new owner finding calls left by
// a thread that died without running its exit handlers); set by core/kretprobe.cpp.
extern void (*g_thread_gone_hook)(ThreadRecord *) noexcept;
// Called in a forked child with the forking thread's record, now owned by the child's thread
// `tid`; set by core/kret_hit.cpp.
extern void (*g_thread_forked_hook)(ThreadRecord *, int tid) noexcept;

// The calling thread's record (plain pointer: initial-exec TLS with no constructor, safe in
// signal handlers; the library is built with -ftls-model=initial-exec).
extern constinit thread_local ThreadRecord *tl_rec;

// Publishes where the thread's floating-point registers were saved for the handlers run in
// its scope, and restores the outer values after (handlers nest: a probe hit in a handler).
class FpregsExposed {
public:
    FpregsExposed(ThreadRecord *rec, uint8_t *xmm, uint64_t stride, uint8_t *st) noexcept
        : rec_(rec), xmm_(rec->saved_xmm), stride_(rec->saved_xmm_stride), st_(rec->saved_st)
    {
        rec->saved_xmm = xmm;
        rec->saved_xmm_stride = stride;
        rec->saved_st = st;
    }
    ~FpregsExposed()
    {
        rec_->saved_xmm = xmm_;
        rec_->saved_xmm_stride = stride_;
        rec_->saved_st = st_;
    }
    FpregsExposed(const FpregsExposed &) = delete;
    FpregsExposed &operator=(const FpregsExposed &) = delete;

private:
    ThreadRecord *rec_;
    uint8_t *xmm_;
    uint64_t stride_;
    uint8_t *st_;
};

// Claims a record for the calling thread (first hit). Async-signal-safe.
ThreadRecord *this_thread_claim() noexcept;

// The calling thread's record, claimed on first use. Async-signal-safe. Null only if the
// process is out of memory.
inline ThreadRecord *this_thread() noexcept
{
    if (ThreadRecord *r = tl_rec) [[likely]]
        return r;
    return this_thread_claim();
}

// While one lives, the calling thread is liveprobe's own (the agent's): its hits run no handler
// and count nowhere, as while it holds the registry (quiet), so that the agent's own calls into
// probed code (malloc, snprintf: a trace of libc's) are never taken for the program's. `quiet`
// false: the other way round, for the program's code that thread runs (a module's init).
class QuietThread {
public:
    explicit QuietThread(bool quiet = true) noexcept : rec_(this_thread()), d_(quiet ? 1 : -1)
    {
        if (rec_ && (quiet || rec_->quiet > 0)) {
            // The scope named before it starts (reset_abandoned_handler).
            if (rec_->quiet == 0) rec_->quiet_sp = reinterpret_cast<uint64_t>(this);
            std::atomic_signal_fence(std::memory_order_seq_cst);
            rec_->in_handler += d_;
            rec_->quiet += d_;
        } else {
            rec_ = nullptr;
        }
    }
    ~QuietThread()
    {
        if (rec_) {
            rec_->in_handler -= d_;
            rec_->quiet -= d_;
        }
    }
    QuietThread(const QuietThread &) = delete;
    QuietThread &operator=(const QuietThread &) = delete;

private:
    ThreadRecord *rec_;
    int d_;
};

// The calling thread's record if it has one (never claims).
ThreadRecord *this_thread_if_any() noexcept;

// First record of the global list (then ->next). Records are never removed.
ThreadRecord *all_threads() noexcept;
// Where the list's head pointer lives (a ThreadRecord *), for debuggers reading the process.
const void *thread_list_head() noexcept;

// Waits until no thread other than the caller is dispatching `pp` (no level of its busy holds pp).
void wait_quiescent(const ProbePoint *pp);
// The same for kret_busy and p.
void wait_kret_quiescent(const void *p);

// Adds one to counter `id` of the calling thread. Lock-free, no shared cache line.
inline void count(ThreadRecord *rec, uint32_t id) noexcept
{
    if (std::atomic<uint64_t> *cs = rec->counters.load(std::memory_order_relaxed)) [[likely]] {
        auto &c = cs[id];
        c.store(c.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    }
}

// Sum of counter `id` over all threads.
uint64_t sum_counter(uint32_t id);

// After fork(): the child has one thread; records of the parent's other threads are freed.
// Once per child: later calls in the same child do nothing (threads started meanwhile keep
// their records).
void reset_after_fork();

}  // namespace liveprobe::core
