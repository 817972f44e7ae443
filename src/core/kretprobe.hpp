// Return probes (kretprobes): registration (kretprobe.cpp) and the hit path (kret_hit.cpp).
//
// A kretprobe is a kprobe at a function's entry whose pre handler (kret_pre) takes an instance
// from the probe's pool, runs the entry handler, records {instance, return slot, real return
// address} on the calling thread's return stack (a list through the instances: no depth limit
// of its own) and replaces the return address with lp_kretprobe_trampoline's. The function
// returns to the trampoline, which calls lp_kretprobe_return: it finds the entries of that
// return slot (more than one after tail calls), runs their return handlers with regs->ip set to
// the real return address and returns there.
//
// Calls that left without returning are "reaped": their unwind_handler runs and their instance
// goes back to the pool. An entry is reaped when the thread is seen on the same stack
// (os/linux/stack_regions.hpp) above its return slot: at the next entry of any kretprobe (slot
// below sp, or at sp but no longer holding the trampoline), at the next return through the
// trampoline (slot below the returning one), and at thread exit. A reaped call's return address
// is remembered in a small per-thread ring, so that a frame reaped wrongly (its thread switched
// stacks by means liveprobe does not see) still returns home, with unwind_handler instead of
// handler.
#pragma once

#include <ucontext.h>

#include <liveprobe/kprobes.h>


#include <atomic>
#include <cstddef>
#include <cstdint>

#include "arch/x86_64/stack_walk.hpp"
#include "core/error.hpp"
#include "core/thread_state.hpp"

namespace liveprobe::core {

struct KretState;

// The fields of struct pt_regs the light return's regs has (bit i: offset 8 i, as
// arch::regs_fields_only takes them): r11 r10 r9 r8 ax cx dx si di (6-14) and ip (16).
constexpr uint32_t kLightRegsFields = 0x1ffu << 6 | 1u << 16;
// The fields a return handler that leaves rcx and r8 to r11 alone may read: ax, dx, si, di, ip.
constexpr uint32_t kFewRegsFields = 1u << 10 | 1u << 12 | 1u << 13 | 1u << 14 | 1u << 16;

// One call in flight: a header, then the public struct kretprobe_instance and its data.
struct alignas(16) Inst {
    Inst *below = nullptr;  // the next older entry of its thread's return stack
    uint64_t slot = 0;      // address of the return slot it replaced
    KretState *ks = nullptr;
    // A free instance: index + 1 of the next free one (0 = none). In flight: kInstRsb when the
    // return stack buffer holds the trampoline's address for this call (detour case 3), else 0.
    uint32_t next_free = 0;
    uint32_t index = 0;
    struct kretprobe_instance *ri() noexcept { return reinterpret_cast<struct kretprobe_instance *>(this + 1); }
};

static_assert(sizeof(Inst) % 16 == 0, "ri (and its data) right after an Inst stays 16-aligned");
static_assert(offsetof(struct kretprobe_instance, data) % 16 == 0);

// Per registered kretprobe, in the first page of the memory its instances live in, right
// before them (at 0x800 to 0xbc0 in it: kretprobe.cpp make_state; one mmap at `base`, freed
// when the probe is unregistered, the last instance has come back and no thread's cache entry
// names it any more: `refs`). Untouched, the
// mapping costs no memory: read-write with MAP_NORESERVE from the start, or, under the kernel's
// strict overcommit policy, address space only (PROT_NONE) but for this state and the
// instances below `committed`, made readable and writable as they are first needed: a large
// maxactive costs nothing until calls nest that deep.
struct alignas(64) KretState {
    struct kretprobe *rp = nullptr;
    uint8_t *base = nullptr;  // the mapping
    size_t map_size = 0;
    uint8_t *pool = nullptr;  // instance i at pool + i * stride
    size_t stride = 0;
    uint32_t count = 0;
    std::atomic<uint64_t> free_top{0};  // (ABA tag << 32) | (index + 1)
    // Instances [fresh, count) were never taken: built on first use, when the free list is
    // empty, so that registering thousands of kretprobes touches no instance memory.
    std::atomic<uint32_t> fresh{0};
    // Instances [0, committed) have read-write memory (kret_hit.cpp commit_instances).
    std::atomic<uint32_t> committed{0};
    size_t header = 0;  // bytes before `pool`, read-write from the start
    // 1 for the registration + instances taken + threads' cache entries naming this state.
    std::atomic<int64_t> refs{1};
    std::atomic<bool> live{true};       // false once unregistering: no handler runs any more
    bool entry_vec = true;              // the handler may touch vector state: save around it
    // The entry handler writes no callee-saved register but rbp (proven): the light entry calls
    // it through lp_kret_call_bare, which saves rbp only.
    bool entry_bare = false;
    // The entry handler writes no callee-saved register but rbp and rbx (a frame pointer, a
    // value kept across a call): lp_kret_light_pre calls it itself, and the light entry saves
    // those two with what else it writes (core/optimizer.cpp light_needs).
    bool entry_direct = false;
    bool return_vec = true;
    bool unwind_vec = true;
    // The return handler takes the light return (kretprobe_trampoline.S): none, or one proven
    // vector-free and using no field of its regs but ip and the caller-saved registers'. The
    // trampoline calls it itself, or through lp_kret_call_saving with return_saves;
    // lp_kret_light_return (its C fallback) through lp_kret_call_bare (it writes no callee-saved
    // register but rbp) or lp_kret_call_saving.
    bool return_light = false;
    bool return_saves = false;
    // ... or it writes rbx: the trampoline calls it itself (it saves rbx), lp_kret_light_return
    // through lp_kret_call_saving.
    bool return_rbx = false;
    // Its entry handler is the registered TSC stamp (set_kret_entry_stamp) and data_size holds
    // 8 bytes: the light entry stores the stamp itself instead of calling it.
    bool entry_stamp = false;
    // The light return need not save rcx and r8 to r11 (kretprobe_trampoline.S): its handler is
    // none, or one that the trampoline calls itself (return_light without return_saves),
    // which writes none of them and reads no field of its regs but ip, ax, dx, si and di.
    bool return_few = false;
    // Its return handler is the registered inline return (set_kret_return_inline) and it is
    // return_few: the light return runs the registered body in place of calling it.
    bool return_inline = false;
    // The per-thread counter that counts faults of rp's handlers: its kprobe's (fault_id of its
    // KprobeState, so liveprobe_kprobe_faults(&rp->kp) sums them); 0 until registered.
    uint32_t fault_id = 0;
    // The entry of the threads' instance caches this probe's instances go to (ThreadRecord::
    // kret_cache: direct-mapped by the pool's address, cache_slot_of).
    uint32_t cache_slot = 0;
    // KPROBE_FLAG_NOVEC and KPROBE_FLAG_FPREGS as the caller set them in rp->kp.flags.
    uint32_t declared_flags = 0;
    // Unregistered, its memory still reached by calls in flight or threads' cache entries (set
    // by unregister_kretprobe before it drops the registration's reference; counted in
    // g_kret_retired until the mapping goes).
    bool retired = false;
    // Registered under CallsOnlyRegistrations (the tracer's): a jump of the function back to its
    // own entry (a loop whose head is its first instruction, a tail call to itself) is not a
    // new call: no instance is taken for it (core/kret_hit.cpp enter). Otherwise every entry
    // hit is a call, as the kernel's kretprobes take it.
    bool calls_only = false;

    Inst *at(uint32_t i) noexcept { return reinterpret_cast<Inst *>(pool + size_t(i) * stride); }
};

// The cache entry of the pool mapped at `base` (page-aligned: its low bits say nothing).
inline uint32_t cache_slot_of(const void *base) noexcept
{
    const auto a = reinterpret_cast<uintptr_t>(base) >> 12;
    return static_cast<uint32_t>((a ^ (a >> 7) ^ (a >> 14)) % ThreadRecord::kKretCaches);
}

// Incremented by every unregistration: threads flush their instance caches of dead probes
// when it moved (kret_hit.cpp).
extern std::atomic<uint64_t> g_kret_unregistrations;
// Unregistered kretprobes whose memory is still reached (KretState::retired): by a thread
// blocked inside a probed call, or a thread's cache entry not flushed yet. For `status`.
extern std::atomic<int64_t> g_kret_retired;
int64_t retired_kretprobes() noexcept;

// The kprobe pre handler of every kretprobe.
int kret_pre(struct kprobe *kp, struct pt_regs *regs) noexcept;

// Returns an instance to its pool; frees the pool when it was the last reference.
void kret_put(KretState *ks, Inst *in) noexcept;
// Drops one reference (the registration's); frees the pool when it was the last.
void kret_unref(KretState *ks) noexcept;

// Reaps the calls of rec's thread whose return slots lie below `slot` on its stack: they left
// without returning (unwind_handler, instance back). With `at_slot`, also the one at `slot`
// when a new call has written over it (it no longer holds the trampoline).
void kret_reap_below(ThreadRecord *rec, uint64_t slot, bool at_slot = false) noexcept;
// At the process's exit, on the exiting thread: its calls in flight on its own stack whose
// return slot a later call wrote over (a longjmp or an exception left them, and nothing
// reaped them since), reaped, so that their unwind handlers run before the process ends. A
// call still running (exit() called inside it) keeps the trampoline in its slot, and stays.
void kret_reap_overwritten() noexcept;

// The entry handler kret_pre ran under the jump path's fast-path guard faulted: its call's
// instance goes back (the call is not recorded). Nothing when no entry handler was running.
void kret_abandon_entry(ThreadRecord *rec) noexcept;

// For reset_abandoned_handler (dispatch.hpp): the frame of a light return whose handler runs
// (just below its return slot: the trampoline's frame is below that), 0 when none; and the instance of a
// return handler that was left without returning, given back (the light return's, or the full
// return's under kret_guard; the calls of the same slot after it, a tail call's, are not).
uint64_t kret_abandoned_frame(const ThreadRecord *rec) noexcept;
void kret_abandon_return(ThreadRecord *rec) noexcept;

// A synchronous fault of a return handler run without a setjmp guard on this thread
// (kret_guard): points the context at lp_kret_fault, which finishes the return, and returns
// true; false when no such handler runs. Async-signal-safe.
bool kret_fault_resume(int sig, ucontext_t *uc) noexcept;

// Unwinders see real return addresses (core/kret_unwind.cpp): the pre handlers of
// liveprobe's internal probes on the unwinders (core/unwinder_hooks.cpp).
//   kret_walk_enter / kret_walk_exit: at the entry and at each `ret` of a stack walker
//     (_Unwind_Backtrace, unw_backtrace): the real return addresses are put back in every
//     replaced return slot of the thread while it walks, and replaced again when it returns.
//   kret_throw_enter: at the entry of the C++ unwinder (_Unwind_RaiseException, _Unwind_Resume,
//     ...): the same, until the exception is caught;
//   kret_catch_enter: at __cxa_begin_catch: the calls whose frames the exception unwound are
//     reaped (unwind_handler); the frames that survive get their slots replaced again and
//     keep their return handlers.
int kret_walk_enter(struct kprobe *kp, struct pt_regs *regs) noexcept;
int kret_walk_exit(struct kprobe *kp, struct pt_regs *regs) noexcept;
int kret_throw_enter(struct kprobe *kp, struct pt_regs *regs) noexcept;
int kret_catch_enter(struct kprobe *kp, struct pt_regs *regs) noexcept;

// While one lives, the return probes this thread registers count calls, not entries
// (KretState::calls_only): for `liveprobe trace`, which counts and times calls.
class CallsOnlyRegistrations {
public:
    CallsOnlyRegistrations();
    ~CallsOnlyRegistrations();
    CallsOnlyRegistrations(const CallsOnlyRegistrations &) = delete;
    CallsOnlyRegistrations &operator=(const CallsOnlyRegistrations &) = delete;

private:
    bool prev_;
};

// An entry handler that stores the TSC, read with `rdtsc`, in the first 8 bytes of ri->data
// and returns 0, and does nothing else (null: none): kretprobes registered after this with it
// as their entry handler and a data_size of 8 or more get that stamp from the light entry
// itself (lp_kret_light_pre), without a call. For liveprobe trace's entry_cycles, whose calls
// it stamps (--hist, per-event modes) when the clock is the TSC.
void set_kret_entry_stamp(kretprobe_handler_t fn) noexcept;

// A return handler `fn` whose work the light return may do without calling it: `body`, code
// the trampoline jumps to in place of the call (null: none), for liveprobe trace's --hist
// (hist_return, body lp_trace_hist_inline: trace/hist_return.S). Kretprobes registered after
// this with fn as their return handler, and return_few, get it (KretState::return_inline).
// The body's contract: entered by a jump on the light return's frame (rsp = the return slot
// - 88), rbx = the thread's record, rdi = the call's Inst, rdx = its KretState, the busy level
// published and no handler marked as running; it writes rax, rdx and rsi only (rcx and r8 to
// r11 are not saved), below the stack pointer at most 16 bytes, calls nothing and never faults
// (it is not guarded as a handler is); it leaves by jumping to lp_kret_inline_done with rdi
// and rdx as they came, or to lp_kret_inline_call with rdi as it came, to have fn called
// after all (its rare cases).
void set_kret_return_inline(kretprobe_handler_t fn, const void *body) noexcept;
extern const void *g_kret_inline_body;  // the body (hidden: the trampoline jumps through it)

// Reaps every call in flight of rec's thread (it is gone); set as g_thread_gone_hook.
void kret_thread_gone(ThreadRecord *rec) noexcept;

// Best effort, for tracers: every kretprobe of the batch that can be is registered, in one
// batch of the engine (one stop of the other threads); each[i] is kretprobe i's outcome.
void register_kretprobes_each(struct kretprobe **rps, int num, Status *each);

}  // namespace liveprobe::core

extern "C" char lp_kretprobe_trampoline[];
// What the trampoline does after lp_kretprobe_return (rax, rdx): where to return, and whether
// the return stack buffer holds that address on top (then a `ret` is predicted).
struct KretReturn {
    uint64_t ip;
    uint64_t rsb;
};
extern "C" KretReturn lp_kretprobe_return(struct pt_regs *regs) noexcept;
// Where the light return's fast path resumes after a handler it called itself
// (kretprobe_trampoline.S): a fault in that handler resumes there (kret_fault_resume).
extern "C" char lp_kret_light_after[];
// The light paths' calls of rec->kret_light_h, rec the calling thread's record
// (kretprobe_trampoline.S): saving the callee-saved registers around it, or rbp only (a handler
// proven to write no other). 1 when the handler faulted.
extern "C" int lp_kret_call_saving(struct kretprobe_instance *ri, struct pt_regs *regs,
                                   liveprobe::core::ThreadRecord *rec) noexcept;
extern "C" int lp_kret_call_bare(struct kretprobe_instance *ri, struct pt_regs *regs,
                                 liveprobe::core::ThreadRecord *rec) noexcept;

namespace liveprobe::core {
// What a replaced return slot holds.
inline uint64_t trampoline() noexcept { return reinterpret_cast<uint64_t>(lp_kretprobe_trampoline); }

// A call of this thread in flight under a return probe: the stack address of its return slot,
// which holds trampoline() now, and the return address that was there (arch's stack walker
// reads them). The calling thread's, newest first, at most max: how many. For a stack walker, which sees
// the trampoline where these return addresses are (the tracer's --stacks). Async-signal-safe,
// no allocation, no lock (the thread's own return stack).
size_t replaced_slots(arch::ReplacedSlot *out, size_t max) noexcept;

constexpr uint32_t kInstRsb = 1;  // Inst::next_free of a call in flight

// For lp_jump_pre's fast path, once its handler returned: true when that handler was a
// kretprobe's kret_pre that replaced the return slot, and the detour can go on through
// lp_kret_rsb_call (`can`): the call is marked so that the trampoline returns with a `ret`.
inline bool kret_take_rsb(ThreadRecord *rec, bool can) noexcept
{
    auto *in = static_cast<Inst *>(rec->kret_rsb);
    if (!in) return false;
    rec->kret_rsb = nullptr;
    if (can) in->next_free = kInstRsb;
    return can;
}
}  // namespace liveprobe::core
