#include "arch/x86_64/breakpoint.hpp"

#include "arch/x86_64/insn.hpp"
#include "arch/x86_64/jump_path.hpp"
#include "core/dispatch.hpp"
#include "core/probe.hpp"
#include "core/probe_table.hpp"
#include "os/linux/code_alloc.hpp"
#include "os/linux/raw_syscall.hpp"
#include "os/linux/signals.hpp"

namespace liveprobe::arch {

void regs_from_context(const ucontext_t *uc, struct pt_regs *r) noexcept
{
    const greg_t *g = uc->uc_mcontext.gregs;
    r->r15 = g[REG_R15];
    r->r14 = g[REG_R14];
    r->r13 = g[REG_R13];
    r->r12 = g[REG_R12];
    r->bp = g[REG_RBP];
    r->bx = g[REG_RBX];
    r->r11 = g[REG_R11];
    r->r10 = g[REG_R10];
    r->r9 = g[REG_R9];
    r->r8 = g[REG_R8];
    r->ax = g[REG_RAX];
    r->cx = g[REG_RCX];
    r->dx = g[REG_RDX];
    r->si = g[REG_RSI];
    r->di = g[REG_RDI];
    r->orig_ax = ~0ul;
    r->ip = g[REG_RIP];
    uint64_t csgsfs = static_cast<uint64_t>(g[REG_CSGSFS]);
    r->cs = csgsfs & 0xffff;
    r->flags = g[REG_EFL];
    r->sp = g[REG_RSP];
    r->ss = (csgsfs >> 48) & 0xffff;
}

void regs_to_context(const struct pt_regs *r, ucontext_t *uc) noexcept
{
    greg_t *g = uc->uc_mcontext.gregs;
    g[REG_R15] = r->r15;
    g[REG_R14] = r->r14;
    g[REG_R13] = r->r13;
    g[REG_R12] = r->r12;
    g[REG_RBP] = r->bp;
    g[REG_RBX] = r->bx;
    g[REG_R11] = r->r11;
    g[REG_R10] = r->r10;
    g[REG_R9] = r->r9;
    g[REG_R8] = r->r8;
    g[REG_RAX] = r->ax;
    g[REG_RCX] = r->cx;
    g[REG_RDX] = r->dx;
    g[REG_RSI] = r->si;
    g[REG_RDI] = r->di;
    g[REG_RIP] = r->ip;
    g[REG_EFL] = r->flags;
    g[REG_RSP] = r->sp;
}

}  // namespace liveprobe::arch

namespace liveprobe::core {
namespace {

uint64_t context_ip(const ucontext_t *uc) { return uc->uc_mcontext.gregs[REG_RIP]; }
void set_context_ip(ucontext_t *uc, uint64_t ip) { uc->uc_mcontext.gregs[REG_RIP] = ip; }

// The thread's floating-point registers are in the signal frame (the handler's are not theirs);
// the kernel restores them from there.
FpregsExposed expose_fpregs(ThreadRecord *rec, ucontext_t *uc) noexcept
{
    auto *fp = uc->uc_mcontext.fpregs;
    if (!fp) return FpregsExposed(rec, nullptr, 0, nullptr);
    return FpregsExposed(rec, reinterpret_cast<uint8_t *>(fp->_xmm), 16, reinterpret_cast<uint8_t *>(fp->_st));
}

// Handlers may fault; the kernel would kill a thread that faults with the fault signal
// blocked. The context's mask is restored when the signal handler returns.
void unblock_fault_signals(const ucontext_t *uc) noexcept
{
    uint64_t mask = *reinterpret_cast<const uint64_t *>(&uc->uc_sigmask);
    if (mask & os::kFaultSignals) {
        uint64_t set = os::kFaultSignals;
        os::raw_sigprocmask(SIG_UNBLOCK, &set, nullptr);
    }
}

// The int3 that ends the trap variant of a slot: post handlers, then resume after the
// original instruction.
void post_trap(ThreadRecord *rec, uint64_t at, ucontext_t *uc, siginfo_t *info)
{
    uint64_t slot = at & ~uint64_t(kSlotSize - 1);
    if (at - slot < kSlotTrapOffset) {
        os::forward_signal(SIGTRAP, info, uc);  // cannot happen: no other int3 in a slot
        return;
    }
    const auto *h = reinterpret_cast<const SlotHeader *>(slot);
    BusyFrame level(rec, reinterpret_cast<uint64_t>(__builtin_frame_address(0)));
    BusyMark prev = rec->busy.mark();
    ProbePoint *pp = acquire(rec, h->orig);
    struct pt_regs regs;
    arch::regs_from_context(uc, &regs);
    // Handlers see the next original instruction; the thread continues through the slot's
    // continuation, which is the matching place in the detour while the probe is optimized.
    uint64_t next_orig = h->orig + (at - slot - kSlotTrapOffset);
    regs.ip = next_orig;
    // Unwinders started in a handler read the interrupted ip from the signal frame: the
    // original address, not the slot (which has no call frame information).
    set_context_ip(uc, next_orig);
    if (pp && pp->slot == slot && rec->in_handler == 0) {
        unblock_fault_signals(uc);
        FpregsExposed x = expose_fpregs(rec, uc);
        run_post(rec, pp, &regs);
    }
    if (regs.ip == next_orig) regs.ip = h->next;
    arch::regs_to_context(&regs, uc);
    rec->busy.release(prev);
}

}  // namespace

void breakpoint_trap_handler(int sig, siginfo_t *info, ucontext_t *uc)
{
    // A thread waiting for this one's busy publication asks whether the handler it names was
    // left by a longjmp (dispatch.hpp nudge_thread).
    if (is_nudge(info)) [[unlikely]] {
        if (ThreadRecord *rec = this_thread_if_any(); rec && rec->in_handler)
            reset_abandoned_handler(rec, static_cast<uint64_t>(uc->uc_mcontext.gregs[REG_RSP]));
        return;
    }
    // int3 raises SIGTRAP with si_code SI_KERNEL; anything else (kill, a debugger's
    // single-step) is the program's.
    if (info->si_code != SI_KERNEL) {
        os::forward_signal(sig, info, uc);
        return;
    }
    uint64_t at = context_ip(uc) - 1;
    ThreadRecord *rec = this_thread();
    if (!rec) {
        // Out of memory for the per-thread record: nothing can be dispatched safely.
        static const char msg[] = "liveprobe: out of memory for a thread record at a probe hit\n";
        os::raw_syscall(SYS_write, 2, reinterpret_cast<long>(msg), sizeof msg - 1);
        os::raw_syscall(SYS_exit_group, 127);
    }
    uint64_t block;
    switch (os::code_block(at, &block)) {
    case os::kSlotBlock:
        post_trap(rec, at, uc, info);
        return;
    case os::kDetourBlock:
        if (!arch::detour_resume_trap(at, uc)) os::forward_signal(sig, info, uc);
        return;
    default:
        break;
    }

    // A handler (or a level of busy) left by a longjmp out of a signal handler: the record
    // set back first.
    if (rec->in_handler || rec->busy.depth) [[unlikely]]
        reset_abandoned_handler(rec, static_cast<uint64_t>(uc->uc_mcontext.gregs[REG_RSP]));
    // This handler's frame, below the signal frame (SIGTRAP runs on the thread's stack).
    BusyFrame level(rec, reinterpret_cast<uint64_t>(__builtin_frame_address(0)));
    BusyMark prev = rec->busy.mark();
    ProbePoint *pp;
    for (;;) {
        pp = acquire(rec, at);
        if (pp) break;
        rec->busy.release(prev);
        // No point: the int3 that trapped was removed since (stale: run the original), or
        // the byte is an int3 again because the address was registered anew meanwhile
        // (registration publishes the point before it writes the int3, so looking again
        // finds it), or it is the program's own int3.
        if (*reinterpret_cast<volatile const uint8_t *>(at) != 0xcc) {
            set_context_ip(uc, at);
            return;
        }
        if (!probe_table().lookup(at)) {
            os::forward_signal(sig, info, uc);
            return;
        }
    }

    // The int3 that trapped is gone (a stale trap, delivered late, while the address was
    // unregistered and registered anew): whatever is there now runs, from the address. The
    // point found may be a new one not armed yet, whose slot is not written.
    if (*reinterpret_cast<volatile const uint8_t *>(at) != 0xcc) {
        set_context_ip(uc, at);
        rec->busy.release(prev);
        return;
    }

    // Being optimized, or optimized (a trap left from before the jmp was written): the detour
    // runs the handlers. A thread that decided for the slot before the state changed is
    // waited for (it is busy with pp) before any byte of the region is replaced.
    if (pp->opt.load(std::memory_order_acquire) != kOptNone) {
        set_context_ip(uc, pp->detour + pp->layout.entry);
        rec->busy.release(prev);
        return;
    }

    struct pt_regs regs;
    arch::regs_from_context(uc, &regs);
    regs.ip = at;
    // Unwinders started in a handler read the interrupted ip from the signal frame: the probe
    // address itself, not the byte after the int3 (after a one-byte first instruction such as
    // push %rbp, that is the next instruction, whose call frame information does not hold yet).
    set_context_ip(uc, at);
    bool post = false;
    if (rec->in_handler) {
        hit_in_handler(rec, pp, &regs);
    } else {
        unblock_fault_signals(uc);
        // The thread's vector registers are in the signal frame (the handler's are not theirs).
        PreResult r;
        {
            FpregsExposed x = expose_fpregs(rec, uc);
            r = run_pre(rec, pp, &regs);
        }
        if (r == PreResult::kSkip) {
            arch::regs_to_context(&regs, uc);
            rec->busy.release(prev);
            return;
        }
        post = r == PreResult::kContinueWithPost;
    }

    if (pp->insn.cls == arch::InsnClass::kEmulate) {
        regs.ip = at;
        GuardedAccess ga{rec, 0, {}};
        arch::MemOps mem{core::guarded_read, core::guarded_write, &ga};
        uint64_t fault_addr = 0;
        if (arch::emulate(pp->insn, regs, mem, &fault_addr) != 0) {
            // The instruction's own fault (a bad stack, a bad indirect target): the program's,
            // at the original address.
            regs.ip = at;
            arch::regs_to_context(&regs, uc);
            rec->busy.release(prev);
            os::forward_signal(ga.sig ? ga.sig : SIGSEGV, &ga.info, uc);
            return;
        }
        if (post) {
            FpregsExposed x = expose_fpregs(rec, uc);
            run_post(rec, pp, &regs);
        }
    } else {
        regs.ip = pp->slot + (post ? kSlotTrapOffset : kSlotJumpOffset);
    }
    arch::regs_to_context(&regs, uc);
    rec->busy.release(prev);
}

void breakpoint_fault_handler(int sig, siginfo_t *info, ucontext_t *uc)
{
    // A fault inside a handler (or a guarded access) unwinds to its guard.
    if (info->si_code > 0) {
        unwind_to_guard(sig, info);
        if (arch::jump_fault_resume(sig, uc)) return;
    }
    // A fault of an instruction running out of line is the program's, at the original address.
    uint64_t ip = context_ip(uc), block = 0, orig = 0;
    size_t kind = os::code_block(ip, &block);
    if (kind == os::kSlotBlock)
        set_context_ip(uc, reinterpret_cast<const SlotHeader *>(block)->orig);
    else if (kind == os::kDetourBlock && arch::detour_original_ip(ip, &orig))
        set_context_ip(uc, orig);
    os::forward_signal(sig, info, uc);
}

}  // namespace liveprobe::core
