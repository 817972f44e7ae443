#include "core/dispatch.hpp"

#include <sys/syscall.h>
#include <unistd.h>

#include "core/kretprobe.hpp"
#include "core/probe_table.hpp"
#include "os/linux/raw_syscall.hpp"
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

bool reset_abandoned_handler_once(ThreadRecord *rec, uint64_t sp) noexcept
{
    // A handler left, or a level of busy taken and left before or after its handler (the light
    // dispatcher records its frame first: jump_light). A kretprobe's entry left there too (its
    // entry handler, or the call recorded and its slot replaced but not yet marked for the
    // return stack buffer: kret_entry, kret_rsb) is past once the frames are: a hit deeper in
    // them, or a signal landing in them, has a lower stack pointer and resets nothing.
    if ((rec->in_handler <= 0 && rec->busy.depth == 0) || rec->quiet) return false;
    // The outermost of the frames named: every one must be gone.
    uint64_t outer = rec->handler_sp;
    for (uint64_t m : {reinterpret_cast<uint64_t>(rec->jump_light), reinterpret_cast<uint64_t>(rec->jump_regs),
                       reinterpret_cast<uint64_t>(rec->kret_light_sp), reinterpret_cast<uint64_t>(rec->kret_guard.regs),
                       kret_abandoned_frame(rec)})
        if (m > outer) outer = m;
    if (outer == 0 || sp <= outer || os::stack_region(sp) != os::stack_region(outer)) return false;
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
    std::atomic_signal_fence(std::memory_order_seq_cst);
    rec->in_handler = 0;
    return true;
}

}  // namespace

bool reset_abandoned_handler(ThreadRecord *rec, uint64_t sp) noexcept
{
    // Once at a time: a nudge (a signal) may land in the middle of a reset by a hit, or the
    // other way round; whichever comes second looks again after marking itself.
    if (rec->resetting) return false;
    rec->resetting = true;
    std::atomic_signal_fence(std::memory_order_seq_cst);
    const bool done = reset_abandoned_handler_once(rec, sp);
    std::atomic_signal_fence(std::memory_order_seq_cst);
    rec->resetting = false;
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
