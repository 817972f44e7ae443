// The arch-neutral half of a probe hit: finding the probe point safely, running the handlers
// of its kprobes with reentrancy and fault protection, and counting.
//
// Nothing here takes a lock, allocates or enters libc: it runs inside signal handlers (the
// breakpoint path) and, later, on the jump path.
#pragma once

#include <signal.h>

#include <cstdint>

#include <liveprobe/kprobes.h>

#include "core/probe.hpp"
#include "core/thread_state.hpp"
#include "os/linux/stack_regions.hpp"
#include "os/linux/text_poke.hpp"

namespace liveprobe::core {

// Saved callee-saved registers, stack pointer and resume address (src/arch/*/guard.S).
struct JmpBuf {
    uint64_t regs[8];
};
extern "C" int lp_setjmp(JmpBuf *jb) __attribute__((returns_twice));
extern "C" [[noreturn]] void lp_longjmp(JmpBuf *jb, int val);

// A region of code whose synchronous faults (SIGSEGV, SIGBUS, SIGFPE, SIGILL) are caught:
// the fault handler longjmps back to its lp_setjmp with the signal recorded.
struct GuardFrame {
    JmpBuf jb;
    GuardFrame *prev = nullptr;
    int sig = 0;
    siginfo_t info;
};

// Word by word: no libc memcpy on the hit path (a user may probe memcpy).
inline void copy_siginfo(siginfo_t *dst, const siginfo_t *src) noexcept
{
    auto *d = reinterpret_cast<volatile uint64_t *>(dst);
    auto *s = reinterpret_cast<const uint64_t *>(src);
    for (size_t i = 0; i < sizeof(siginfo_t) / 8; ++i) d[i] = s[i];
}

// Runs fn() with its synchronous faults caught: true when it returned, false when it faulted
// (it was abandoned; *sig and *info, when given, describe the fault). The one fault guard of
// the hit path: handlers, guarded memory accesses, the jprobe stack copy.
template <typename Fn>
[[gnu::noinline]] bool run_guarded(ThreadRecord *rec, Fn fn, int *sig = nullptr,
                                   siginfo_t *info = nullptr) noexcept
{
    GuardFrame g;
    g.prev = rec->guard;
    rec->guard = &g;
    if (lp_setjmp(&g.jb) == 0) {
        fn();
        rec->guard = g.prev;
        return true;
    }
    rec->guard = g.prev;
    if (sig) *sig = g.sig;
    if (info) copy_siginfo(info, &g.info);
    return false;
}

// Called by the fault-signal handler: if the calling thread is inside a guarded region,
// unwinds to it (does not return). Returns otherwise.
void unwind_to_guard(int sig, const siginfo_t *info) noexcept;

// The reader's half of a quiescence protocol (busy, kret_busy): value in the next level's
// slot, visible before the caller looks at what it protects again. Writers make every thread
// execute a full barrier (membarrier) before they scan the slots (thread_state.cpp), so a
// compiler barrier is enough here; without membarrier, a real fence. False when every level is
// taken (nothing published: the caller goes on as if the point were going away).
template <typename T>
inline bool publish_busy(BusySlots<T> &slots, T value) noexcept
{
    if (!slots.take(value)) return false;
    if (os::hit_path_needs_fence()) [[unlikely]]
        std::atomic_thread_fence(std::memory_order_seq_cst);
    else
        std::atomic_signal_fence(std::memory_order_seq_cst);
    return true;
}

// The level it takes stays taken when it returns null: the caller releases it (its mark).
inline ProbePoint *acquire_site_inline(ThreadRecord *rec, const std::atomic<ProbePoint *> *site) noexcept
{
    ProbePoint *pp = site->load(std::memory_order_acquire);
    if (!pp || !publish_busy(rec->busy, pp)) return nullptr;
    return site->load(std::memory_order_acquire) == pp ? pp : nullptr;
}

inline void release_inline(ThreadRecord *rec, BusyMark prev) noexcept { rec->busy.release(prev); }

// Finds the live probe point at addr and marks this thread as dispatching it (a level of busy),
// or returns null (the level it may have taken is the caller's to release, from its mark). The
// quiescence protocol (an asymmetric Dekker): the thread stores pp in its level's slot and then
// looks pp up again; a registry writer removes pp from the table, makes every thread execute a
// full barrier (membarrier), and then waits until no slot of any thread holds pp. One of the
// two sees the other, so either the reader bails out or the writer waits for it: pp and its
// members stay valid while the slot holds pp.
ProbePoint *acquire(ThreadRecord *rec, uint64_t addr) noexcept;

// The same protocol through a probe address's site (ProbeTable::site): two loads instead of
// two hash look-ups, for the jump path.
// release(): ends the dispatch of a point: busy goes back to the mark taken before (release).
// Sanitizer builds keep both out of line, in instrumented code, so that TSan sees the release
// the registry's quiescence wait pairs with even when called from the uninstrumented jump path.
#ifdef LIVEPROBE_SANITIZER_BUILD
ProbePoint *acquire_site(ThreadRecord *rec, const std::atomic<ProbePoint *> *site) noexcept;
void release(ThreadRecord *rec, BusyMark prev) noexcept;
#else
inline ProbePoint *acquire_site(ThreadRecord *rec, const std::atomic<ProbePoint *> *site) noexcept
{
    return acquire_site_inline(rec, site);
}
inline void release(ThreadRecord *rec, BusyMark prev) noexcept { release_inline(rec, prev); }
#endif

// acquire_site, with *prev = the mark of busy before (for release). Null, with busy back at
// *prev, when the point is going away.
inline ProbePoint *acquire_site_saving(ThreadRecord *rec, const void *site, BusyMark *prev) noexcept
{
    *prev = rec->busy.mark();
    ProbePoint *pp = acquire_site(rec, static_cast<const std::atomic<ProbePoint *> *>(site));
    if (!pp) release(rec, *prev);
    return pp;
}

enum class PreResult { kContinue, kContinueWithPost, kSkip };

// A handler of ks faulted (sig) and was abandoned: counts the fault and runs ks's
// fault_handler, itself guarded.
void handler_faulted(ThreadRecord *rec, KprobeState *ks, struct pt_regs *regs, int sig) noexcept;

// Runs the pre handlers of pp's enabled kprobes, in registration order, until one returns
// non-zero (kSkip: regs->ip was set by that handler). Sets in_handler around them.
PreResult run_pre(ThreadRecord *rec, ProbePoint *pp, struct pt_regs *regs) noexcept;

// Runs the post handlers of pp's enabled kprobes. Sets in_handler around them.
void run_post(ThreadRecord *rec, ProbePoint *pp, struct pt_regs *regs) noexcept;

// A hit while a handler (or the registry: quiet) runs on this thread: liveprobe's internal
// probes at pp still run their pre handler (they neither recurse nor change regs); the others
// miss it, counted unless quiet.
void hit_in_handler(ThreadRecord *rec, ProbePoint *pp, struct pt_regs *regs) noexcept;

// A handler that was left without returning: a signal interrupted it and the program's signal
// handler left by siglongjmp (a timeout, a recovery) to a frame of the program's. Its frames
// and its dispatch's are gone, but the record still says a handler runs: every later hit of
// this thread would be missed. `sp`: the stack pointer of a hit now (the probed code's). When
// every frame the record names for the running handler is below sp on the same stack, the
// record is set back as if no handler ran (the abandoned return probe instances given back)
// and true returned: the hit goes on as any other. False when it cannot tell (no frame named,
// another stack, liveprobe's own code running: quiet): the hit is one inside a handler.
bool reset_abandoned_handler(ThreadRecord *rec, uint64_t sp) noexcept;

// For a thread that has waited long for thread r's busy publication to go (thread_state.cpp):
// asks r, by a SIGTRAP of liveprobe's own (is_nudge), to call reset_abandoned_handler with
// its interrupted stack pointer: a thread that left a handler by a longjmp and then hits no
// probe would otherwise keep its publication for ever. Async-signal-safe.
void nudge_thread(const ThreadRecord *r) noexcept;
bool is_nudge(const siginfo_t *info) noexcept;

// The frame of a C path that may take the outermost level of busy (level_sp), named from before
// it takes the level until after it gives it back: a level left by a siglongjmp out of a signal
// that landed in between is then seen as abandoned (reset_abandoned_handler). `frame`: a stack
// address below which the path runs and at or above which its level is gone. A nested level
// keeps the outer's name; a path nested in a signal handler that landed in an outer path before
// it took its level gives the outer's name back; a name whose frame is gone (below `frame` on
// its stack: a path left before it took a level) is dropped. `taken`: the caller took the
// outermost level already, under a name of its own until now.
class BusyFrame {
public:
    BusyFrame(ThreadRecord *rec, uint64_t frame, bool taken = false) noexcept : rec_(rec)
    {
        if (rec->busy.depth != 0 && !taken) return;
        prev_ = rec->level_sp;
        if (prev_ && prev_ < frame && os::stack_region(prev_) == os::stack_region(frame)) prev_ = 0;
        rec->level_sp = frame;
        std::atomic_signal_fence(std::memory_order_seq_cst);
        owned_ = true;
    }
    ~BusyFrame()
    {
        if (!owned_) return;
        std::atomic_signal_fence(std::memory_order_seq_cst);
        rec_->level_sp = prev_;
    }
    BusyFrame(const BusyFrame &) = delete;
    BusyFrame &operator=(const BusyFrame &) = delete;

private:
    ThreadRecord *rec_;
    uint64_t prev_ = 0;
    bool owned_ = false;
};

// in_handler from 0 to 1 and back, for the C paths: handler_sp set to `frame` and cleared.
inline void enter_handler(ThreadRecord *rec, const void *frame) noexcept
{
    // The frame first: a signal landing in between, whose handler leaves by siglongjmp, leaves a
    // handler that reset_abandoned_handler can tell is gone.
    if (rec->in_handler == 0) rec->handler_sp = reinterpret_cast<uint64_t>(frame);
    std::atomic_signal_fence(std::memory_order_seq_cst);
    rec->in_handler++;
}
inline void leave_handler(ThreadRecord *rec) noexcept
{
    if (--rec->in_handler == 0) rec->handler_sp = 0;
}

// Byte-by-byte copy whose faults are caught: false (and *fault filled) if it faulted.
struct GuardedAccess {
    ThreadRecord *rec;
    int sig;
    siginfo_t info;
};
bool guarded_copy(GuardedAccess *ga, void *dst, const void *src, size_t n) noexcept;

// guarded_copy in the shape of arch::MemOps (ctx is a GuardedAccess), for emulate().
bool guarded_read(void *ctx, uint64_t addr, void *dst, size_t n);
bool guarded_write(void *ctx, uint64_t addr, const void *src, size_t n);

}  // namespace liveprobe::core
