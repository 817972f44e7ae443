// Unwinders see real return addresses (see kretprobe.hpp). A return probe replaces its
// function's return address with the trampoline's; an unwinder that met it could not go on
// (libgcc ends the walk there, an exception would terminate the program). So while an
// unwinder walks this thread's stack, every replaced slot holds its real return address again:
//   - stack walkers (_Unwind_Backtrace, which glibc's backtrace() calls, and libunwind's
//     unw_backtrace): put back at their entry, replaced again at their `ret`. A walker running
//     inside another's callback leaves that to the outermost (walk_sp);
//   - the C++ unwinder (_Unwind_RaiseException, _Unwind_Resume, ...) never returns to its
//     caller: the slots stay real until __cxa_begin_catch, where the frames the exception
//     left are gone (their slots lie below the catching frame's stack pointer: reaped, with
//     unwind_handler) and the others are replaced again, so they still return through the
//     trampoline and get their return handlers.
// Nothing of this runs on a probe hit: only when an unwinder starts.
//
// Built like kret_hit.cpp (-mgeneral-regs-only): these are pre handlers of probes flagged
// KPROBE_FLAG_NOVEC.
#include "core/dispatch.hpp"
#include "core/kretprobe.hpp"
#include "os/linux/stack_regions.hpp"

namespace liveprobe::core {
namespace {

uint64_t real_return(Inst *e) noexcept { return reinterpret_cast<uint64_t>(e->ri()->ret_addr); }

// Every slot of the thread's calls in flight that holds the trampoline gets its real return
// address back (all stacks: a walk started on a signal stack goes on into the interrupted one).
void put_back_real(ThreadRecord *rec) noexcept
{
    GuardedAccess ga{rec, 0, {}};
    for (Inst *e = static_cast<Inst *>(rec->ret_top); e; e = e->below) {
        uint64_t v = 0;
        if (!guarded_copy(&ga, &v, reinterpret_cast<const void *>(e->slot), sizeof v) || v != trampoline())
            continue;
        uint64_t real = real_return(e);
        guarded_copy(&ga, reinterpret_cast<void *>(e->slot), &real, sizeof real);
    }
}

// The reverse, for the calls whose frames are still there: on the stack of sp, those whose
// slot lies above sp; on other stacks (suspended coroutines, the stack a signal interrupted),
// all. A slot that no longer holds its real return address is left alone.
void replace_again(ThreadRecord *rec, uint64_t sp) noexcept
{
    uint32_t region = os::stack_region(sp);
    GuardedAccess ga{rec, 0, {}};
    for (Inst *e = static_cast<Inst *>(rec->ret_top); e; e = e->below) {
        if (e->slot <= sp && os::stack_region(e->slot) == region) continue;
        uint64_t v = 0;
        if (!guarded_copy(&ga, &v, reinterpret_cast<const void *>(e->slot), sizeof v) || v != real_return(e))
            continue;
        uint64_t t = trampoline();
        guarded_copy(&ga, reinterpret_cast<void *>(e->slot), &t, sizeof t);
    }
}

// True when a walker entered further out on sp's stack is still running (its frame lies above
// sp). A recorded walker whose frame is gone (left by an exception or longjmp) is forgotten.
bool outer_walker_running(ThreadRecord *rec, uint64_t sp) noexcept
{
    uint64_t w = rec->walk_sp;
    if (w == 0 || os::stack_region(w) != os::stack_region(sp)) return false;
    if (w > sp) return true;
    rec->walk_sp = 0;
    return false;
}

}  // namespace

int kret_walk_enter(struct kprobe *, struct pt_regs *regs) noexcept
{
    ThreadRecord *rec = this_thread();
    if (!rec || !rec->ret_top) return 0;
    if (!outer_walker_running(rec, regs->sp)) rec->walk_sp = regs->sp;
    put_back_real(rec);
    return 0;
}

int kret_walk_exit(struct kprobe *, struct pt_regs *regs) noexcept
{
    ThreadRecord *rec = this_thread_if_any();
    if (!rec || rec->walk_sp == 0 || outer_walker_running(rec, regs->sp)) return 0;
    // At the walker's ret: sp is its return slot, as at its entry.
    rec->walk_sp = 0;
    replace_again(rec, regs->sp);
    return 0;
}

int kret_throw_enter(struct kprobe *, struct pt_regs *) noexcept
{
    ThreadRecord *rec = this_thread();
    if (rec && rec->ret_top) put_back_real(rec);
    return 0;
}

int kret_catch_enter(struct kprobe *, struct pt_regs *regs) noexcept
{
    ThreadRecord *rec = this_thread_if_any();
    if (!rec || !rec->ret_top) return 0;
    // The frames below the catching one are gone, and so is the one whose return slot this
    // call of __cxa_begin_catch has just taken (the call that threw from the catching frame).
    kret_reap_below(rec, regs->sp, true);
    // A catch inside a stack walker's callback: the walker still needs the real addresses.
    if (outer_walker_running(rec, regs->sp)) return 0;
    replace_again(rec, regs->sp);
    return 0;
}

}  // namespace liveprobe::core
