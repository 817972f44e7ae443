// The jump path's entry into the dispatcher: called by detours (detour.hpp) with the probed
// thread's registers in a struct pt_regs on its stack. Built with -mgeneral-regs-only (see
// src/CMakeLists.txt): nothing here touches vector state before vector_save().
#include "arch/x86_64/jump_path.hpp"

#include "arch/x86_64/breakpoint.hpp"
#include "arch/x86_64/detour.hpp"
#include "arch/x86_64/jump_light.hpp"
#include "arch/x86_64/vector_state.hpp"
#include "core/dispatch.hpp"
#include "core/kretprobe.hpp"
#include "os/linux/code_alloc.hpp"

namespace liveprobe::arch {
namespace {

using core::PreResult;
using core::ProbePoint;
using core::ThreadRecord;

// Sanitizer builds: the instrumented code this file calls reaches the sanitizer runtime, which
// may use vector registers anywhere; there the whole dispatch runs inside one save (below).
#ifdef LIVEPROBE_SANITIZED
constexpr bool kSaveAroundAll = true;
#else
constexpr bool kSaveAroundAll = false;
#endif

// While handlers run with the vector state saved, jprobes and liveprobe_get_fpregs take the
// thread's floating-point registers from the save area (ThreadRecord::saved_xmm).
inline core::FpregsExposed expose(ThreadRecord *rec, void *area) noexcept
{
    uint64_t stride = 0;
    uint8_t *xmm = saved_xmm0(area, &stride);
    return core::FpregsExposed(rec, xmm, stride, saved_st0(area));
}

inline bool must_save_vectors(ProbePoint *pp) noexcept
{
    return !kSaveAroundAll && pp->vec.load(std::memory_order_relaxed);
}

// Out of line: the common path, with nothing to save, stays small in lp_jump_pre.
[[gnu::noinline]] PreResult run_pre_saving_vectors(ThreadRecord *rec, ProbePoint *pp, struct pt_regs *regs) noexcept
{
    return with_vectors_saved([&](void *area) {
        auto x = expose(rec, area);
        return core::run_pre(rec, pp, regs);
    });
}

[[gnu::noinline]] void run_post_saving_vectors(ThreadRecord *rec, ProbePoint *pp, struct pt_regs *regs) noexcept
{
    with_vectors_saved([&](void *area) {
        auto x = expose(rec, area);
        core::run_post(rec, pp, regs);
    });
}

inline PreResult pre_handlers(ThreadRecord *rec, ProbePoint *pp, struct pt_regs *regs) noexcept
{
    if (must_save_vectors(pp)) return run_pre_saving_vectors(rec, pp, regs);
    return core::run_pre(rec, pp, regs);
}

inline void post_handlers(ThreadRecord *rec, ProbePoint *pp, struct pt_regs *regs) noexcept
{
    if (must_save_vectors(pp))
        run_post_saving_vectors(rec, pp, regs);
    else
        core::run_post(rec, pp, regs);
}

}  // namespace

namespace {
int jump_pre(uint64_t site, struct pt_regs *regs) noexcept;
int jump_post(uint64_t site, struct pt_regs *regs) noexcept;
int jump_pre_acquired(ThreadRecord *rec, ProbePoint *pp, core::BusyMark prev, struct pt_regs *regs) noexcept;

template <typename Fn>
int saved_around(Fn fn, uint64_t site, struct pt_regs *regs) noexcept
{
    if (!kSaveAroundAll) return fn(site, regs);
    return with_vectors_saved([&](void *area) {
        ThreadRecord *rec = core::this_thread();
        if (!rec) return fn(site, regs);
        auto x = expose(rec, area);
        return fn(site, regs);
    });
}
}  // namespace

// Every hit of an optimized probe starts here. The common case, one kprobe with only a pre
// handler, no vector state to save, no handler already running on this thread, runs here with
// nothing else: no frame of its own for the fault guard (a fault in the handler resumes the
// detour through jump_regs, see jump_fault_resume), no member loop. Everything else goes on
// to jump_pre.
extern "C" int lp_jump_pre(uint64_t site, struct pt_regs *regs) noexcept
{
    if constexpr (!kSaveAroundAll) {
        ThreadRecord *rec = core::tl_rec;
        // Nothing dispatched on this thread (a level of busy left by a siglongjmp out of a
        // signal handler goes to jump_pre, which sets the record back).
        if (rec && !rec->in_handler && !rec->busy.depth) [[likely]] {
            // The level's frame, from before it is taken until after it is released: a level
            // left by a siglongjmp out of a signal that landed in between is seen as abandoned
            // (core::reset_abandoned_handler).
            rec->jump_regs = regs;
            std::atomic_signal_fence(std::memory_order_seq_cst);
            core::BusyMark prev;
            ProbePoint *pp = core::acquire_site_saving(rec, reinterpret_cast<const void *>(site), &prev);
            if (!pp) [[unlikely]] {
                rec->jump_regs = nullptr;
                return kJumpPlain;  // the probe is going away: run the original instructions
            }
            core::KprobeState *ks = pp->solo.load(std::memory_order_relaxed);
            if (!ks || must_save_vectors(pp)) [[unlikely]] {
                // The level's name passes from jump_regs to level_sp, jump_pre's (the level is
                // this path's outermost: taken at depth 0).
                core::BusyFrame level(rec, reinterpret_cast<uint64_t>(regs), true);
                rec->jump_regs = nullptr;
                return jump_pre_acquired(rec, pp, prev, regs);
            }
            int action = kJumpPlain;
            if (ks->enabled.load(std::memory_order_relaxed)) [[likely]] {
                if (!ks->uncounted) core::count(rec, ks->id);
                struct kprobe *kp = ks->kp;
                rec->jump_ks = ks;
                rec->jump_prev = prev;
                rec->in_handler = 1;
                std::atomic_signal_fence(std::memory_order_seq_cst);
                if (kp->pre_handler(kp, regs) != 0) [[unlikely]]
                    action = kJumpResume;
                std::atomic_signal_fence(std::memory_order_seq_cst);
                // A kretprobe that replaced the return slot: through lp_kret_rsb_call.
                if (core::kret_take_rsb(rec, action == kJumpPlain && pp->layout.kret_path)) action = kJumpKret;
                rec->in_handler = 0;
            }
            core::release(rec, prev);
            std::atomic_signal_fence(std::memory_order_seq_cst);
            rec->jump_regs = nullptr;
            return action;
        }
    }
    return saved_around(jump_pre, site, regs);
}

// A synchronous fault in the fast path's handler (breakpoint.cpp's fault handler, after the
// innermost GuardFrame, if any, declined): the handler is abandoned, and the thread goes on
// as if lp_jump_pre had returned kJumpPlain to its detour. The detour's call of
// lp_detour_call_pre left its return address at regs - 8, and lp_detour_call_pre's call of
// lp_jump_pre its own at (regs - 8 rounded down to 16) - 8: (regs rounded down to 16) - 8 is
// the first when regs is 16-aligned and the second otherwise, and a stack pointer there is
// aligned for a function's entry either way. Returning to either goes on in the detour with
// rsp = regs; the detour needs only rbx = regs after it.
extern "C" int lp_jump_fault(ThreadRecord *rec, struct pt_regs *regs, int sig) noexcept
{
    core::KprobeState *ks = rec->jump_ks;
    core::BusyMark prev = rec->jump_prev;
    rec->jump_regs = nullptr;
    core::kret_take_rsb(rec, false);
    core::kret_abandon_entry(rec);
    core::handler_faulted(rec, ks, regs, sig);
    rec->in_handler = 0;
    core::release(rec, prev);
    return kJumpPlain;
}

bool jump_fault_resume(int sig, ucontext_t *uc) noexcept
{
    if (light_fault_resume(sig, uc)) return true;
    if (core::kret_fault_resume(sig, uc)) return true;
    ThreadRecord *rec = core::this_thread_if_any();
    if (!rec || !rec->jump_regs) return false;
    auto regs = reinterpret_cast<uint64_t>(rec->jump_regs);
    greg_t *g = uc->uc_mcontext.gregs;
    g[REG_RSP] = static_cast<greg_t>((regs & ~uint64_t{15}) - 8);
    g[REG_RBX] = static_cast<greg_t>(regs);
    g[REG_RDI] = reinterpret_cast<greg_t>(rec);
    g[REG_RSI] = static_cast<greg_t>(regs);
    g[REG_RDX] = sig;
    g[REG_RIP] = reinterpret_cast<greg_t>(&lp_jump_fault);
    return true;
}

extern "C" int lp_jump_post(uint64_t site, struct pt_regs *regs) noexcept
{
    return saved_around(jump_post, site, regs);
}

namespace {

int jump_pre(uint64_t site, struct pt_regs *regs) noexcept
{
    ThreadRecord *rec = core::this_thread();
    if (!rec) return kJumpPlain;
    // A handler (or a level of busy) left by a longjmp out of a signal handler: the record
    // set back first.
    if (rec->in_handler || rec->busy.depth) [[unlikely]]
        core::reset_abandoned_handler(rec, regs->sp);
    core::BusyFrame level(rec, reinterpret_cast<uint64_t>(regs));
    core::BusyMark prev;
    ProbePoint *pp = core::acquire_site_saving(rec, reinterpret_cast<const void *>(site), &prev);
    if (!pp) return kJumpPlain;  // the probe is going away: run the original instructions
    return jump_pre_acquired(rec, pp, prev, regs);
}

// jump_pre once pp is acquired (a level of busy holds pp; prev: the mark before it).
[[gnu::noinline]] int jump_pre_acquired(ThreadRecord *rec, ProbePoint *pp, core::BusyMark prev,
                                        struct pt_regs *regs) noexcept
{
    if (rec->in_handler) {
        core::hit_in_handler(rec, pp, regs);
        core::release(rec, prev);
        return kJumpPlain;
    }
    PreResult r = pre_handlers(rec, pp, regs);
    int action = kJumpPlain;
    if (r == PreResult::kSkip) {
        action = kJumpResume;
    } else if (r == PreResult::kContinueWithPost) {
        if (pp->layout.has_post_path) {
            action = kJumpPost;
        } else {
            // The first instruction is a control transfer: emulate it here, run the post
            // handlers where it lands, and resume there.
            regs->ip = pp->addr;
            core::GuardedAccess ga{rec, 0, {}};
            MemOps mem{core::guarded_read, core::guarded_write, &ga};
            uint64_t fault_addr = 0;
            if (emulate(pp->region.insns[0], *regs, mem, &fault_addr) == 0) {
                post_handlers(rec, pp, regs);
                action = kJumpResume;
            }
            // On a fault, run the original instruction (plain path): it faults as the program's.
        }
    }
    core::release(rec, prev);
    return action;
}

int jump_post(uint64_t site, struct pt_regs *regs) noexcept
{
    ThreadRecord *rec = core::this_thread();
    if (!rec) return kJumpPlain;
    uint64_t next = regs->ip;
    core::BusyFrame level(rec, reinterpret_cast<uint64_t>(regs));
    core::BusyMark prev;
    ProbePoint *pp = core::acquire_site_saving(rec, reinterpret_cast<const void *>(site), &prev);
    if (!pp) return kJumpPlain;
    if (!rec->in_handler) post_handlers(rec, pp, regs);
    core::release(rec, prev);
    return regs->ip == next ? kJumpPlain : kJumpResume;
}

}  // namespace

DetourFns detour_fns()
{
    DetourFns f;
    f.pre = reinterpret_cast<uint64_t>(&lp_detour_call_pre);
    f.post = reinterpret_cast<uint64_t>(&lp_detour_call_post);
    const bool fenced = os::hit_path_needs_fence();
    f.light_entry = reinterpret_cast<uint64_t>(fenced ? &lp_light_entry_fenced : &lp_light_entry);
    f.light_mid = reinterpret_cast<uint64_t>(fenced ? &lp_light_mid_fenced : &lp_light_mid);
    f.kret_light_entry = reinterpret_cast<uint64_t>(fenced ? &lp_light_entry_fenced : &lp_kret_light_entry);
    f.light_tls = light_tls_offset();
    f.kret_full_tail = reinterpret_cast<uint64_t>(&lp_kret_full_tail);
    f.kret_light_tail = reinterpret_cast<uint64_t>(&lp_kret_light_tail);
    return f;
}

bool detour_resume_trap(uint64_t at, ucontext_t *uc) noexcept
{
    uint64_t block;
    if (os::code_block(at, &block) != os::kDetourBlock) return false;
    const auto *h = reinterpret_cast<const core::DetourHeader *>(block);
    uint64_t off = at - block;
    if (off != h->layout.resume_trap && (h->layout.post_resume_trap == 0 || off != h->layout.post_resume_trap))
        return false;
    // rsp points at the pt_regs the handlers changed: resume exactly there.
    const auto *regs = reinterpret_cast<const struct pt_regs *>(uc->uc_mcontext.gregs[REG_RSP]);
    regs_to_context(regs, uc);
    return true;
}

bool detour_original_ip(uint64_t ip, uint64_t *orig) noexcept
{
    uint64_t block;
    if (os::code_block(ip, &block) != os::kDetourBlock) return false;
    const auto *h = reinterpret_cast<const core::DetourHeader *>(block);
    uint64_t off = ip - block;
    // The relocated instruction whose copy holds ip: the last one starting at or before it.
    // The light entry comes after everything else, with its own copy.
    const bool light = h->layout.light_mask && off >= h->layout.entry;
    uint64_t best_off = light ? h->layout.entry : 0, best = h->addr;
    auto look = [&](const RelocMap &m, const uint16_t *offsets) {
        for (size_t i = 0; i < m.n; ++i) {
            const uint32_t o = offsets ? offsets[i] : m.offset[i];
            if (o <= off && o >= best_off) {
                best_off = o;
                best = m.orig[i];
            }
        }
    };
    if (light) {
        if (h->layout.light_plain[0]) look(h->layout.plain, h->layout.light_plain);
    } else {
        look(h->layout.plain, nullptr);
        look(h->layout.post_rest, nullptr);
        if (h->layout.has_post_path && h->layout.post_insn1 <= off && h->layout.post_insn1 >= best_off)
            best = h->addr;
    }
    *orig = best;
    return true;
}

}  // namespace liveprobe::arch
