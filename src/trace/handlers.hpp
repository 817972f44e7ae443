// The tracer's hit path: the state its handlers read and the handlers themselves, in a file of
// their own compiled with -mgeneral-regs-only (and no loop turned into a memcpy call), so that
// the engine proves them free of vector instructions and runs them without saving the
// thread's vector state (DESIGN.md): hundreds of nanoseconds a hit on an AVX-512 machine.
// Nothing here calls libc's string functions, which use vector registers.
#pragma once

#include <liveprobe/kprobes.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "trace/session.hpp"
#include "trace/spec.hpp"

namespace liveprobe::trace {

// Laid out for the hit path: index and spec share the first cache line with kp's pre_handler
// (the light dispatcher reads that to call count_pre or fetch_pre, which read index), so an
// entry hit touches one line of its Probe, not two.
struct alignas(64) Probe {
    uint32_t index = 0;
    uint32_t slots = 1;          // ring records an event takes
    uint32_t bytes = 0;          // its values' size (payload_bytes(*spec); a call has none)
    uint16_t session = 0;        // its session's slot (g_slots)
    bool fpregs = false;         // its values need the thread's vector registers (needs_fpregs)
    const Spec *spec = nullptr;  // what to fetch
    struct kprobe kp {};         // an instruction (p:, FUNC+OFF), or any probe of --count
    struct kretprobe rp {};      // a call or a return probe (rp.kp is the entry kprobe)
    // --filter, --by and --value, resolved for its function (null: none), and where the key and
    // value go after the spec's values (bytes counts them). Last: the assembly's offsets above.
    const struct Expr *filter = nullptr;
    const struct Expr *key = nullptr;
    const struct Expr *value = nullptr;
    ExtraLayout extra;
    uint32_t spec_bytes = 0;  // the spec's own values: payload_bytes, or none for a call
};
static_assert(offsetof(Probe, kp) + offsetof(struct kprobe, pre_handler) + 8 <= 64);

struct EntryData {  // a kretprobe instance's data: at the entry, the time, then (r:) di si dx cx r8 r9, sp
    // When g_tsc, the TSC read unordered (the return reads it again: its time is that read in
    // the clock's nanoseconds, the entry's that less the cycles between); else
    // liveprobe_ktime_ns().
    uint64_t entry_ns;
    uint64_t regs[7];
};

// Sessions side by side: each runs in a slot of g_slots, whose state its handlers read. Slot
// 0's handlers (count_pre, ...) know their slot at compile time and keep this thread's rows in
// t_rows, as when one session ran alone: the common case costs what it did. The others' (the
// _other handlers) read the slot from their Probe and keep a ring number per slot. (kSessions:
// trace/session.hpp.)

// A session's state on the hit path. Set by session.cpp while none of the slot's probes is
// registered (under its lock); the handlers only read it, but for silent and generation, which
// the fork handler moves.
struct alignas(64) Slot {
    void *base = nullptr;                    // the shared memory (trace/rings.hpp)
    uint32_t capacity = 0;                   // its per-probe areas' stride
    bool follow = true;                      // a forked child goes on tracing
    std::atomic<bool> silent{false};         // a forked child that does not
    std::atomic<uint64_t> generation{0};     // moved by a new session in the slot and by fork
};
// Hidden: the handlers in other files than the one defining them reach them without the GOT.
#pragma GCC visibility push(hidden)
extern Slot g_slots[kSessions];
extern bool g_tsc;                           // the clock is the TSC: entries stamp its cycles
#pragma GCC visibility pop

// Slot 0's handlers.
int count_pre(struct kprobe *kp, struct pt_regs *regs) noexcept;      // --count
int count_light(struct kprobe *kp, struct pt_regs *regs) noexcept;    // its light variant
int fetch_pre(struct kprobe *kp, struct pt_regs *regs) noexcept;      // p:, FUNC+OFF
int event_return(struct kretprobe_instance *ri, struct pt_regs *regs) noexcept;  // FUNC
int fetch_return(struct kretprobe_instance *ri, struct pt_regs *regs) noexcept;  // r:
int value_return(struct kretprobe_instance *ri, struct pt_regs *regs) noexcept;  // FUNC, a value past rax
int hist_return(struct kretprobe_instance *ri, struct pt_regs *regs) noexcept;   // --hist (g_tsc)
int hist_return_clock(struct kretprobe_instance *ri, struct pt_regs *regs) noexcept;  // --hist, no TSC
// The other slots' (Probe::session).
int count_pre_other(struct kprobe *kp, struct pt_regs *regs) noexcept;
int count_light_other(struct kprobe *kp, struct pt_regs *regs) noexcept;
int fetch_pre_other(struct kprobe *kp, struct pt_regs *regs) noexcept;
int event_return_other(struct kretprobe_instance *ri, struct pt_regs *regs) noexcept;
int fetch_return_other(struct kretprobe_instance *ri, struct pt_regs *regs) noexcept;
int value_return_other(struct kretprobe_instance *ri, struct pt_regs *regs) noexcept;
int hist_return_other(struct kretprobe_instance *ri, struct pt_regs *regs) noexcept;  // with or without the TSC
// --hist and the per-event modes' unwind handler: a call that left without returning (an
// exception, a longjmp, its thread's exit), counted in its thread's count row, so that the
// totals hold every call as --count's do.
int left_call(struct kretprobe_instance *ri, struct pt_regs *regs) noexcept;
// --count of a function that jumps back to its own entry (core::entry_is_jumped_to): a
// kretprobe's entry handler, which the engine runs once a call, not once a turn.
int count_entry(struct kretprobe_instance *ri, struct pt_regs *regs) noexcept;
int count_entry_other(struct kretprobe_instance *ri, struct pt_regs *regs) noexcept;
// --filter (Probe::filter) in --count and --hist: a call counted, or its time added, only if
// it passes. At a return (entry_regs at the entry), and at an instruction for --count.
int count_filtered(struct kretprobe_instance *ri, struct pt_regs *regs) noexcept;
int count_pre_filtered(struct kprobe *kp, struct pt_regs *regs) noexcept;
int hist_filtered(struct kretprobe_instance *ri, struct pt_regs *regs) noexcept;
// A call's --filter that reads its arguments only (not retval, nor duration), at its entry:
// entry_cycles's stamp if it passes; 1 if not, which declines the call (no return handler).
int filter_entry(struct kretprobe_instance *ri, struct pt_regs *regs) noexcept;
// Every slot's: they write only into the instance.
int entry_cycles(struct kretprobe_instance *ri, struct pt_regs *regs) noexcept;  // FUNC, --hist: the TSC
int entry_regs(struct kretprobe_instance *ri, struct pt_regs *regs) noexcept;  // r:: the time, arguments, sp
// --tree (Mode::tree): entry_regs's work, then an entry event (rings.hpp's kEntryEvent), so
// that the reader draws a call when it begins. Slot 0's, and the other slots'.
int tree_entry(struct kretprobe_instance *ri, struct pt_regs *regs) noexcept;
int tree_entry_other(struct kretprobe_instance *ri, struct pt_regs *regs) noexcept;
// --tree's unwind handler: left_call's count, and a left event (rings.hpp's kLeftEvent).
int tree_left(struct kretprobe_instance *ri, struct pt_regs *regs) noexcept;
// hist_return's common case as the light return's inline body (hist_return.S; core::
// set_kret_return_inline): not a C function, an address to jump to.
extern "C" void lp_trace_hist_inline();

// Plain copies for the hit path (libc's memcpy and memset use vector registers).
inline void copy_plain(void *dst, const void *src, size_t n) noexcept
{
    auto *d = static_cast<unsigned char *>(dst);
    const auto *s = static_cast<const unsigned char *>(src);
    for (; n >= 8; n -= 8, d += 8, s += 8) *reinterpret_cast<uint64_t *>(d) = *reinterpret_cast<const uint64_t *>(s);
    for (; n; --n) *d++ = *s++;
}
inline void zero_plain(void *dst, size_t n) noexcept
{
    auto *d = static_cast<unsigned char *>(dst);
    for (; n; --n) *d++ = 0;
}

}  // namespace liveprobe::trace
