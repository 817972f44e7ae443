#include "core/dispatch.hpp"

#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/kretprobe.hpp"
#include "core/probe_table.hpp"
#include "os/linux/raw_syscall.hpp"
#include "os/linux/signals.hpp"
#include "os/linux/stack_regions.hpp"
#include "os/linux/text_poke.hpp"

namespace liveprobe::core {
namespace {

// Runs one handler of ks under a fault guard. A fault abandons the handler: its probe's
// fault_handler (itself guarded) is told, the fault is counted, and the result is 0.
// The handler's guard is written out here rather than through run_guarded (dispatch.hpp):
// this is every hit's path, and run_guarded's extra frame costs about 2 ns a hit
// (BM_OptEntryEmpty, about 17.5 against 19.5 ns, measured side by side).
template <typename Call>
int guarded_call(ThreadRecord *rec, KprobeState *ks, struct pt_regs *regs, Call call) noexcept
{
    GuardFrame g;
    g.prev = rec->guard;
    rec->guard = &g;
    if (lp_setjmp(&g.jb) == 0) {
        int r = call();
        rec->guard = g.prev;
        return r;
    }
    rec->guard = g.prev;
    handler_faulted(rec, ks, regs, g.sig);
    return 0;
}

// A missed hit: counted in nmissed of every enabled kprobe at pp but liveprobe's own.
void count_missed(ProbePoint *pp) noexcept
{
    Members *m = pp->members.load(std::memory_order_acquire);
    for (uint32_t i = 0; i < m->n; ++i)
        if (m->items[i]->enabled.load(std::memory_order_relaxed) && !m->items[i]->internal)
            __atomic_fetch_add(&m->items[i]->kp->nmissed, 1, __ATOMIC_RELAXED);
}

}  // namespace

void handler_faulted(ThreadRecord *rec, KprobeState *ks, struct pt_regs *regs, int sig) noexcept
{
    count(rec, ks->fault_id);
    if (kprobe_fault_handler_t fh = ks->kp->fault_handler) run_guarded(rec, [&] { fh(ks->kp, regs, sig); });
}

void unwind_to_guard(int sig, const siginfo_t *info) noexcept
{
    ThreadRecord *rec = this_thread_if_any();
    if (!rec || !rec->guard) return;
    GuardFrame *g = rec->guard;
    g->sig = sig;
    copy_siginfo(&g->info, info);
    lp_longjmp(&g->jb, 1);
}

ProbePoint *acquire(ThreadRecord *rec, uint64_t addr) noexcept
{
    ProbeTable &t = probe_table();
    ProbePoint *pp = t.lookup(addr);
    if (!pp || !publish_busy(rec->busy, pp)) return nullptr;
    return t.lookup(addr) == pp ? pp : nullptr;
}

#ifdef LIVEPROBE_SANITIZER_BUILD
ProbePoint *acquire_site(ThreadRecord *rec, const std::atomic<ProbePoint *> *site) noexcept
{
    return acquire_site_inline(rec, site);
}

void release(ThreadRecord *rec, BusyMark prev) noexcept { release_inline(rec, prev); }
#endif

PreResult run_pre(ThreadRecord *rec, ProbePoint *pp, struct pt_regs *regs) noexcept
{
    Members *m = pp->members.load(std::memory_order_acquire);
    PreResult res = PreResult::kContinue;
    enter_handler(rec, __builtin_frame_address(0));
    for (uint32_t i = 0; i < m->n; ++i) {
        KprobeState *ks = m->items[i];
        if (!ks->enabled.load(std::memory_order_relaxed)) continue;
        if (!ks->uncounted) count(rec, ks->id);
        struct kprobe *kp = ks->kp;
        if (kp->post_handler) res = PreResult::kContinueWithPost;
        if (kp->pre_handler &&
            guarded_call(rec, ks, regs, [&] { return kp->pre_handler(kp, regs); }) != 0) {
            res = PreResult::kSkip;
            break;
        }
    }
    leave_handler(rec);
    return res;
}

void run_post(ThreadRecord *rec, ProbePoint *pp, struct pt_regs *regs) noexcept
{
    Members *m = pp->members.load(std::memory_order_acquire);
    enter_handler(rec, __builtin_frame_address(0));
    for (uint32_t i = 0; i < m->n; ++i) {
        KprobeState *ks = m->items[i];
        struct kprobe *kp = ks->kp;
        if (!ks->enabled.load(std::memory_order_relaxed) || !kp->post_handler) continue;
        guarded_call(rec, ks, regs, [&] {
            kp->post_handler(kp, regs, 0);
            return 0;
        });
    }
    leave_handler(rec);
}

void hit_in_handler(ThreadRecord *rec, ProbePoint *pp, struct pt_regs *regs) noexcept
{
    Members *m = pp->members.load(std::memory_order_acquire);
    for (uint32_t i = 0; i < m->n; ++i) {
        KprobeState *ks = m->items[i];
        if (ks->internal && ks->enabled.load(std::memory_order_relaxed)) ks->kp->pre_handler(ks->kp, regs);
    }
    if (!rec->quiet) count_missed(pp);
}

namespace {

const char kNudgeTag = 0;  // is_nudge: the value of liveprobe's own SIGTRAP

// Whether what the record says runs on this thread was left: every frame it names is below sp
// on the same stack. A handler left, or a level of busy taken and left before or after its
// handler (the light dispatcher records its frame first: jump_light), or a return's level of
// kret_busy (the trampoline names the call: kret_light). A kretprobe's entry left there too (its
// entry handler, or the call recorded and its slot replaced but not yet marked for the return
// stack buffer: kret_entry, kret_rsb) is past once the frames are: a hit deeper in them, or a
// signal landing in them, has a lower stack pointer and resets nothing. liveprobe's own code
// running on the thread (quiet) is left once the frame of its outermost scope is.
bool abandoned(const ThreadRecord *rec, uint64_t sp) noexcept
{
    if (rec->in_handler <= 0 && rec->busy.depth == 0 && rec->kret_busy.depth == 0) return false;
    // The outermost of the frames named: every one must be gone.
    uint64_t outer = rec->handler_sp;
    for (uint64_t m : {reinterpret_cast<uint64_t>(rec->jump_light), reinterpret_cast<uint64_t>(rec->jump_regs),
                       reinterpret_cast<uint64_t>(rec->kret_light_sp), reinterpret_cast<uint64_t>(rec->kret_guard.regs),
                       kret_abandoned_frame(rec), rec->quiet > 0 ? rec->quiet_sp : 0, rec->level_sp})
        if (m > outer) outer = m;
    if (rec->quiet > 0 && rec->quiet_sp == 0) return false;  // a thread of liveprobe's own
    return outer != 0 && sp > outer && os::stack_region(sp) == os::stack_region(outer);
}

void reset_abandoned(ThreadRecord *rec) noexcept
{
    kret_abandon_return(rec);  // the instance whose return handler was left, back
    kret_abandon_entry(rec);   // the call whose entry handler was left: not recorded, back
    rec->kret_rsb = nullptr;   // a call recorded, left unmarked: reaped as any left call
    rec->busy.release(0);
    rec->kret_busy.release(0);
    rec->guard = nullptr;
    rec->jump_regs = nullptr;
    rec->jump_ks = nullptr;
    rec->jump_prev = 0;
    rec->jump_light = nullptr;
    rec->kret_light_sp = nullptr;
    rec->kret_light_h = nullptr;
    rec->kret_guard = {};
    rec->kret_light = nullptr;
    rec->handler_sp = 0;
    rec->quiet_sp = 0;
    rec->level_sp = 0;
    std::atomic_signal_fence(std::memory_order_seq_cst);
    rec->quiet = 0;
    rec->in_handler = 0;
}

}  // namespace

bool reset_abandoned_handler(ThreadRecord *rec, uint64_t sp) noexcept
{
    // 1. A first look, with nothing blocked: most callers are hits inside a handler that runs.
    // 2. Signals blocked but those liveprobe handles at once (SIGTRAP: a probe hit, or a nudge;
    //    a fault: a guard's): a program's handler landing in a half-done reset that then left
    //    by siglongjmp left it half done (instances given back twice), or left `resetting` set
    //    and the thread's hits missed for ever (issue 31: a timer's handler that jumped every
    //    20 us lost every later call).
    // 3. Once at a time: a nudge may land in the middle of a reset by a hit, or the other way
    //    round; whichever comes second looks again after marking itself.
    // 4. The look again, and the reset, then the mask as it was.
    if (rec->resetting || !abandoned(rec, sp)) return false;
    const uint64_t block = ~os::kSynchronousMask;
    uint64_t old = 0;
    os::raw_sigprocmask(SIG_BLOCK, &block, &old);
    bool done = false;
    if (!rec->resetting) {
        rec->resetting = true;
        std::atomic_signal_fence(std::memory_order_seq_cst);
        done = abandoned(rec, sp);
        if (done) reset_abandoned(rec);
        std::atomic_signal_fence(std::memory_order_seq_cst);
        rec->resetting = false;
    }
    os::raw_sigprocmask(SIG_SETMASK, &old, nullptr);
    return done;
}

void nudge_thread(const ThreadRecord *r) noexcept
{
    const int tid = r->owner.load(std::memory_order_relaxed);
    if (tid <= 0) return;
    siginfo_t si{};
    si.si_signo = SIGTRAP;
    si.si_code = SI_QUEUE;
    si.si_pid = os::raw_getpid();
    si.si_uid = getuid();
    si.si_value.sival_ptr = const_cast<char *>(&kNudgeTag);
    os::raw_syscall(SYS_rt_tgsigqueueinfo, si.si_pid, tid, SIGTRAP, reinterpret_cast<long>(&si));
}

bool is_nudge(const siginfo_t *info) noexcept
{
    return info->si_code == SI_QUEUE && info->si_pid == os::raw_getpid() &&
           info->si_value.sival_ptr == static_cast<const void *>(&kNudgeTag);
}

bool guarded_copy(GuardedAccess *ga, void *dst, const void *src, size_t n) noexcept
{
    return run_guarded(
        ga->rec,
        [&] {
            auto *d = static_cast<volatile uint8_t *>(dst);
            auto *s = static_cast<const volatile uint8_t *>(src);
            for (size_t i = 0; i < n; ++i) d[i] = s[i];
        },
        &ga->sig, &ga->info);
}

bool guarded_read(void *ctx, uint64_t addr, void *dst, size_t n)
{
    return guarded_copy(static_cast<GuardedAccess *>(ctx), dst, reinterpret_cast<void *>(addr), n);
}

bool guarded_write(void *ctx, uint64_t addr, const void *src, size_t n)
{
    return guarded_copy(static_cast<GuardedAccess *>(ctx), reinterpret_cast<void *>(addr), src, n);
}

}  // namespace liveprobe::core
