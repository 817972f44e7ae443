#include "trace/handlers.hpp"

#include <pthread.h>
#include <sys/syscall.h>

#include <liveprobe/ktime.h>

#include "arch/x86_64/stack_walk.hpp"
#include "core/kretprobe.hpp"
#include "os/linux/live_tid.hpp"
#include "os/linux/clock.hpp"

#include "os/linux/raw_syscall.hpp"
#include "trace/fetch.hpp"
#include "trace/filter.hpp"
#include "trace/filter_eval.hpp"
#include "trace/hist_layout.h"
#include "trace/rings.hpp"
#include "trace/thread_rows.hpp"

namespace liveprobe::trace {

Slot g_slots[kSessions];
bool g_tsc = false;

namespace clk = liveprobe::os::clock;

constinit thread_local ThreadRows t_rows;
constinit thread_local uint64_t t_other_rings[kSessions - 1];

// What hist_return (hist_return.S) reads.
static_assert(offsetof(ThreadRows, generation) == LP_ROWS_GENERATION && offsetof(ThreadRows, hists) == LP_ROWS_HISTS &&
              offsetof(ThreadRows, pending) == LP_ROWS_PENDING);
static_assert(static_cast<long>(offsetof(Probe, index)) - static_cast<long>(offsetof(Probe, rp)) == LP_PROBE_INDEX_FROM_RP);
static_assert(kHistBuckets == LP_HIST_BUCKETS);
static_assert(sizeof(clk::Conversion) == 1 << LP_CONV_SIZE_LOG2 && offsetof(clk::Conversion, mult) == LP_CONV_MULT &&
              clk::kRing == LP_CONV_RING_MASK + 1);
static_assert(offsetof(EntryData, entry_ns) == 0);  // at LP_RI_DATA (checked in core/kret_hit.cpp)
static_assert(sizeof(clk::g_gen) == 4 && sizeof(Slot::generation) == 8 && offsetof(Slot, generation) == LP_SLOT_GENERATION);

// A fork: every slot's threads claim rings again (the child's threads are others); a slot whose
// session does not follow forks goes silent in the child.
[[gnu::constructor]] static void trace_atfork()
{
    pthread_atfork(nullptr, nullptr, [] {
        for (Slot &s : g_slots) {
            s.generation.fetch_add(1, std::memory_order_release);
            if (!s.follow) s.silent.store(true, std::memory_order_relaxed);
        }
    });
}

// Ring i, just claimed: its process said before its first record, which publishes it (a
// forked child's threads claim rings in the memory it shares with its parent).
[[gnu::always_inline]] static inline int32_t claimed(RingHead *h, int32_t pid, uint32_t i) noexcept
{
    h->pid.store(pid, std::memory_order_relaxed);
    return static_cast<int32_t>(i);
}

// A ring of the session at base for the calling thread, claimed now: -1 when every ring is
// taken (rings of threads that have exited, drained, are taken back). Inline: the engine proves
// the handlers vector-free through a few levels of calls only (arch::vector_free).
[[gnu::always_inline]] static inline int32_t claim_ring(void *base) noexcept
{
    int32_t tid = os::raw_gettid();
    int32_t pid = os::raw_getpid();
    for (uint32_t pass = 0; pass < 2; ++pass) {
        for (uint32_t i = 0; i < kRings; ++i) {
            RingHead *h = ring_head(base, i);
            int32_t owner = h->tid.load(std::memory_order_relaxed);
            // Asked of the ring's own process: a forked child shares the rings of its parent,
            // whose live threads are no threads of the child's.
            const int32_t ring_pid = h->pid.load(std::memory_order_relaxed);
            if (pass == 1 && owner != 0 && owner != tid && h->head.load() == h->tail.load() &&
                os::raw_syscall(SYS_tgkill, ring_pid ? ring_pid : pid, owner, 0) == -ESRCH) {
                // Its thread is gone and the reader has everything: take it.
                if (h->tid.compare_exchange_strong(owner, tid)) return claimed(h, pid, i);
                continue;
            }
            int32_t free = 0;
            if (owner == 0 && h->tid.compare_exchange_strong(free, tid)) return claimed(h, pid, i);
        }
    }
    return -1;
}

// The calling thread's ring in slot 0's session, claimed on its first event, and its rows.
static int32_t first_ring() noexcept
{
    const Slot &sl = g_slots[0];
    uint64_t gen = sl.generation.load(std::memory_order_acquire);
    if (t_rows.generation == gen && t_rows.ring >= 0) return t_rows.ring;
    t_rows.generation = gen;
    t_rows.ring = claim_ring(sl.base);
    const auto ring = static_cast<uint32_t>(t_rows.ring);
    t_rows.counts = t_rows.ring >= 0 ? count_of(sl.base, sl.capacity, ring, 0) : nullptr;
    t_rows.hists = t_rows.ring >= 0 ? hist_of(sl.base, sl.capacity, ring, 0) : nullptr;
    t_rows.tail = t_rows.ring >= 0 ? ring_head(sl.base, ring)->tail.load(std::memory_order_acquire) : 0;
    t_rows.pending = t_rows.ring >= 0 ? &ring_head(sl.base, ring)->hist_pending : nullptr;
    return t_rows.ring;
}

// The calling thread's ring in the session of slot s (not 0) if it has one for the slot's
// generation: -1 otherwise.
static inline int32_t other_ring_set(uint32_t s) noexcept
{
    const uint64_t w = t_other_rings[s - 1];
    const auto gen = static_cast<uint32_t>(g_slots[s].generation.load(std::memory_order_acquire));
    return static_cast<uint32_t>(w >> 32) == gen ? static_cast<int32_t>(static_cast<uint32_t>(w)) - 1 : -1;
}

// ... and claimed on its first event.
static int32_t other_ring(uint32_t s) noexcept
{
    if (int32_t ring = other_ring_set(s); ring >= 0) return ring;
    const auto gen = static_cast<uint32_t>(g_slots[s].generation.load(std::memory_order_acquire));
    const int32_t ring = claim_ring(g_slots[s].base);
    t_other_rings[s - 1] = uint64_t{gen} << 32 | static_cast<uint32_t>(ring + 1);
    return ring;
}

// The thread's ring in slot s's session (kFirst: s is 0), or -1 counted as an event without a
// ring (every ring taken).
template <bool kFirst>
static int32_t ring_or_count_unringed(uint32_t s) noexcept
{
    const int32_t ring = kFirst ? first_ring() : other_ring(s);
    if (ring < 0) header_of(g_slots[s].base)->unringed.fetch_add(1, std::memory_order_relaxed);
    return ring;
}

static const Probe *probe_of_kp(const struct kprobe *kp) noexcept
{
    return reinterpret_cast<const Probe *>(reinterpret_cast<const char *>(kp) - offsetof(Probe, kp));
}

// The slot of a probe's session: 0 for slot 0's handlers, known at compile time.
template <bool kFirst>
static inline uint32_t slot_of(const Probe *p) noexcept
{
    return kFirst ? 0 : p->session;
}

// count_pre's other cases, out of its line: no row yet or any more (a new session, a fork:
// both move the slot's generation), or silent (a child not followed: set with the generation's
// move).
template <bool kFirst>
[[gnu::noinline]] static int count_slow(uint32_t s, uint32_t idx) noexcept
{
    const Slot &sl = g_slots[s];
    if (sl.silent.load(std::memory_order_relaxed)) return 0;
    const int32_t ring = ring_or_count_unringed<kFirst>(s);
    if (ring < 0) return 0;
    std::atomic<uint64_t> *c = count_of(sl.base, sl.capacity, static_cast<uint32_t>(ring), idx);
    c->store(c->load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    return 0;
}

// --count's common case: this thread has its row in this session (and generation): the call
// counted there. False otherwise, nothing done.
template <bool kFirst>
[[gnu::always_inline]] static inline bool count_in_row(const Probe *p) noexcept
{
    std::atomic<uint64_t> *c;
    if constexpr (kFirst) {
        std::atomic<uint64_t> *row = t_rows.counts;
        if (row == nullptr || t_rows.generation != g_slots[0].generation.load(std::memory_order_acquire)) [[unlikely]]
            return false;
        c = row + p->index;
    } else {
        const uint32_t s = p->session;
        const int32_t ring = other_ring_set(s);
        if (ring < 0) [[unlikely]]
            return false;
        c = count_of(g_slots[s].base, g_slots[s].capacity, static_cast<uint32_t>(ring), p->index);
    }
    c->store(c->load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);  // this thread's row only
    return true;
}

template <bool kFirst>
[[gnu::always_inline]] static inline int count_call(const Probe *p) noexcept
{
    return count_in_row<kFirst>(p) ? 0 : count_slow<kFirst>(slot_of<kFirst>(p), p->index);
}
int count_pre(struct kprobe *kp, struct pt_regs *) noexcept { return count_call<true>(probe_of_kp(kp)); }
int count_pre_other(struct kprobe *kp, struct pt_regs *) noexcept { return count_call<false>(probe_of_kp(kp)); }

// count_pre's light variant (core::set_light_variant), what the light entry calls: the common
// case only, which writes four caller-saved registers, so that the light entry saves only those
// (count_pre's rare case calls out, and may write any). Anything else returns 1: the hit takes
// the full entry, which runs count_pre.
int count_light(struct kprobe *kp, struct pt_regs *) noexcept { return count_in_row<true>(probe_of_kp(kp)) ? 0 : 1; }
int count_light_other(struct kprobe *kp, struct pt_regs *) noexcept
{
    return count_in_row<false>(probe_of_kp(kp)) ? 0 : 1;
}

// --count through a kretprobe's entry: counted as count_pre counts, and always accepted (0): the
// recorded call is what lets the engine tell the function's jumps back to its entry from calls.
int count_entry(struct kretprobe_instance *ri, struct pt_regs *) noexcept { return count_call<true>(probe_of_rp(ri->rp)); }
int count_entry_other(struct kretprobe_instance *ri, struct pt_regs *) noexcept
{
    return count_call<false>(probe_of_rp(ri->rp));
}

// The entry's stamp: the TSC read unordered when the clock is the TSC (cheaper than an ordered
// clock read by about 10 ns here), else the clock.
static uint64_t entry_stamp() noexcept { return g_tsc ? clk::tsc_unordered() : liveprobe_ktime_ns(); }

// An entry's stamp in the clock's nanoseconds, read now (an event at the entry, or for a call
// that left without returning: as return_times converts the same stamp).
static uint64_t stamp_ns(uint64_t stamp) noexcept { return g_tsc ? clk::tsc_ns(stamp) : stamp; }

// At a return: the time now and the entry's (from its stamp), in the clock's nanoseconds. With
// the TSC, one unordered read for both; the stamp converted as the clock converted the values
// read since (clock.hpp's tsc_ns_recent), so that a call's callees never begin before it (the
// views infer nesting from the times); a stamp older than that, now less the cycles since it.
struct ReturnTimes {
    uint64_t entry, now;
};
static ReturnTimes return_times(uint64_t stamp) noexcept
{
    if (!g_tsc) return {stamp, liveprobe_ktime_ns()};
    const uint64_t end = clk::tsc_unordered();
    const uint64_t now = clk::tsc_ns(end);
    uint64_t entry;
    if (stamp <= end && clk::tsc_ns_recent(stamp, &entry) && entry <= now) return {entry, now};
    const uint64_t d = tsc_delta_ns(stamp, end);
    return {d >= now ? 0 : now - d, now};
}

// What an expression of a probe reads: `duration` and `caller` at a return; `tid` 0 if the
// caller has not read it (the expression asks the kernel).
[[gnu::always_inline]] static inline EvalContext eval_context(const FetchContext &fc, uint64_t duration, uint32_t tid,
                                                              uint64_t caller) noexcept
{
    EvalContext c;
    c.fetch = fc;
    c.duration = duration;
    c.tid = tid;
    c.caller = caller;
    return c;
}

// --filter: whether p's event passes (a probe without a filter: always).
[[gnu::always_inline]] static inline bool passes(const Probe *p, const EvalContext &c) noexcept
{
    int64_t v = 0;
    return !p->filter || (eval_expr(*p->filter, c, &v) && v != 0);
}
[[gnu::always_inline]] static inline bool passes(const Probe *p, const FetchContext &fc, uint64_t duration, uint32_t tid,
                                                 uint64_t caller) noexcept
{
    return !p->filter || passes(p, eval_context(fc, duration, tid, caller));
}

// The return address at a function's entry (where the kretprobe has not replaced it yet).
static uint64_t entry_caller(const Probe *p, const struct pt_regs *regs) noexcept
{
    return p->spec->offset == 0 ? *reinterpret_cast<const uint64_t *>(regs->sp) : 0;
}

// --by and --value: the event's key and value after the spec's values, as ExtraLayout lays
// them out (session.hpp).
[[gnu::always_inline]] static inline void put_extras(const Probe *p, const EvalContext &c, unsigned char *out) noexcept
{
    uint64_t faults = 0;
    int64_t v = 0;
    if (p->extra.key_comm) {
        char name[17];
        os::raw_thread_name(name);
        copy_plain(out + p->extra.key_at(), name, 16);
    } else if (p->key) {
        if (!eval_expr(*p->key, c, &v)) faults |= 1;
        copy_plain(out + p->extra.key_at(), &v, 8);
    }
    if (p->value) {
        v = 0;
        if (!eval_expr(*p->value, c, &v)) faults |= 2;
        copy_plain(out + p->extra.value_at(), &v, 8);
    }
    copy_plain(out, &faults, 8);
}

// --stacks: the user stack at the probe after the key and value (ExtraLayout): how many frames,
// then the frames. At a return (`func`: the function's entry), the function, then its callers
// from the registers after the return.
[[gnu::always_inline]] static inline void put_stack(const Probe *p, const struct pt_regs *regs, uint64_t func,
                                                    unsigned char *out) noexcept
{
    arch::ReplacedSlot slots[32];
    const size_t ns = core::replaced_slots(slots, 32);
    auto *frames = reinterpret_cast<uint64_t *>(out + 8);
    const uint32_t depth = p->extra.stack_depth;
    size_t n;
    if (func) {
        frames[0] = func;
        n = 1 + arch::walk_stack({regs->ip, regs->sp, regs->bp, true}, slots, ns, core::trampoline(), frames + 1, depth - 1);
    } else {
        n = arch::walk_stack({regs->ip, regs->sp, regs->bp, false}, slots, ns, core::trampoline(), frames, depth);
    }
    *reinterpret_cast<uint64_t *>(out) = n;
}

// FUNC and --hist: the stamp alone. When the clock is the TSC, the light kretprobe entry does
// this itself (core::set_kret_entry_stamp, session.cpp): the stamp is the data's first word.
static_assert(offsetof(EntryData, entry_ns) == 0);
int entry_cycles(struct kretprobe_instance *ri, struct pt_regs *) noexcept
{
    reinterpret_cast<EntryData *>(ri->data)->entry_ns = entry_stamp();
    return 0;
}

int entry_regs(struct kretprobe_instance *ri, struct pt_regs *regs) noexcept
{
    auto *d = reinterpret_cast<EntryData *>(ri->data);
    d->regs[0] = regs->di;
    d->regs[1] = regs->si;
    d->regs[2] = regs->dx;
    d->regs[3] = regs->cx;
    d->regs[4] = regs->r8;
    d->regs[5] = regs->r9;
    d->regs[6] = regs->sp;
    d->entry_ns = entry_stamp();  // last: the arguments' copy is not timed
    return 0;
}

// Declared here, defined below.
template <bool kFirst>
static bool put_event(uint32_t s, uint32_t idx, uint32_t slots, uint32_t tid, uint64_t entry_ns, uint64_t exit_ns,
                      uint64_t retval, const unsigned char *payload, size_t bytes) noexcept;

// --tree: the entry's registers and stamp, then an entry event at the entry's time, which the
// return's event will carry too (return_times converts the same stamp the same way).
template <bool kFirst>
[[gnu::always_inline]] static inline int tree_entry_in(struct kretprobe_instance *ri, struct pt_regs *regs) noexcept
{
    entry_regs(ri, regs);
    const Probe *p = probe_of_rp(ri->rp);
    const uint32_t s = slot_of<kFirst>(p);
    if (g_slots[s].silent.load(std::memory_order_relaxed)) return 0;
    const uint64_t at = stamp_ns(reinterpret_cast<const EntryData *>(ri->data)->entry_ns);
    put_event<kFirst>(s, p->index, 1, os::live_tid(static_cast<uint32_t>(ri->tid)), at, kEntryEvent, 0, nullptr, 0);
    return 0;
}
int tree_entry(struct kretprobe_instance *ri, struct pt_regs *regs) noexcept { return tree_entry_in<true>(ri, regs); }
int tree_entry_other(struct kretprobe_instance *ri, struct pt_regs *regs) noexcept
{
    return tree_entry_in<false>(ri, regs);
}

// Writes one event of `slots` records into the thread's ring in slot s's session: the record,
// then `payload` in the records after it. Returns false when the ring was full (counted).
template <bool kFirst>
static bool put_event(uint32_t s, uint32_t idx, uint32_t slots, uint32_t tid, uint64_t entry_ns, uint64_t exit_ns,
                      uint64_t retval, const unsigned char *payload, size_t bytes) noexcept
{
    const int32_t ring = ring_or_count_unringed<kFirst>(s);
    if (ring < 0) return false;
    void *base = g_slots[s].base;
    RingHead *h = ring_head(base, static_cast<uint32_t>(ring));
    // No call counter: the reader counts the events it reads, and the calls are those and the
    // ones dropped here. The ring's tail as this thread last read it (slot 0's; the others read
    // it when the ring may be full).
    uint64_t other_tail = 0;
    uint64_t &tail = kFirst ? t_rows.tail : other_tail;
    uint64_t head = h->head.load(std::memory_order_relaxed);
    if (head + slots - tail > kRingRecords) [[unlikely]] {
        tail = h->tail.load(std::memory_order_acquire);
        if (head + slots - tail > kRingRecords) {
            h->dropped.fetch_add(1, std::memory_order_relaxed);
            return false;
        }
    }
    Record *recs = ring_records(base, static_cast<uint32_t>(ring));
    Record *r = recs + head % kRingRecords;
    r->probe = idx;
    r->tid = tid;
    r->entry_ns = entry_ns;
    r->exit_ns = exit_ns;
    r->retval = retval;
    for (uint32_t k = 1; k < slots; ++k) {
        size_t off = (k - 1) * sizeof(Record);
        size_t n = bytes - off < sizeof(Record) ? bytes - off : sizeof(Record);
        copy_plain(recs + (head + k) % kRingRecords, payload + off, n);
    }
    h->head.store(head + slots, std::memory_order_release);
    return true;
}

// p:, FUNC+OFF: an event at the instruction, with its values.
template <bool kFirst>
[[gnu::always_inline]] static inline int fetch_pre_in(struct kprobe *kp, struct pt_regs *regs) noexcept
{
    const Probe *p = probe_of_kp(kp);
    const uint32_t s = slot_of<kFirst>(p);
    if (g_slots[s].silent.load(std::memory_order_relaxed)) return 0;
    uint64_t now = liveprobe_ktime_ns();
    alignas(8) unsigned char payload[kMaxPayload + kMaxExtraBytes];
    FetchContext ctx;
    ctx.regs = regs;
    const auto tid = static_cast<uint32_t>(os::raw_gettid());
    if (p->fpregs) fetch_fpregs(&ctx);
    const bool exprs = p->filter || p->key || p->value;  // (the return address read for them only)
    const EvalContext ec = eval_context(ctx, 0, tid, exprs ? entry_caller(p, regs) : 0);
    if (!passes(p, ec)) return 0;
    fetch_all(*p->spec, ctx, payload);
    if (p->extra.bytes()) put_extras(p, ec, payload + p->spec_bytes);
    if (p->extra.stack_depth) put_stack(p, regs, 0, payload + p->spec_bytes + p->extra.stack_at());
    put_event<kFirst>(s, p->index, p->slots, tid, now, now, regs->ip, payload, p->bytes);
    return 0;
}
int fetch_pre(struct kprobe *kp, struct pt_regs *regs) noexcept { return fetch_pre_in<true>(kp, regs); }
int fetch_pre_other(struct kprobe *kp, struct pt_regs *regs) noexcept { return fetch_pre_in<false>(kp, regs); }

// r:: at the return, with its values ($argN as they were at the entry); FUNC (kEntryRegs
// false) when its return value takes more than rax (value_return): no registers kept then.
template <bool kFirst, bool kEntryRegs = true>
[[gnu::always_inline]] static inline int fetch_return_in(struct kretprobe_instance *ri, struct pt_regs *regs) noexcept
{
    const Probe *p = probe_of_rp(ri->rp);
    const uint32_t s = slot_of<kFirst>(p);
    if (g_slots[s].silent.load(std::memory_order_relaxed)) return 0;
    const auto *d = reinterpret_cast<const EntryData *>(ri->data);
    const auto [entry, now] = return_times(d->entry_ns);
    alignas(8) unsigned char payload[kMaxPayload + kMaxExtraBytes];
    FetchContext ctx;
    ctx.regs = regs;
    if (kEntryRegs) ctx.entry = d->regs;
    const uint32_t tid = os::live_tid(static_cast<uint32_t>(ri->tid));
    if (p->fpregs) fetch_fpregs(&ctx);
    const EvalContext ec = eval_context(ctx, now - entry, tid, reinterpret_cast<uint64_t>(ri->ret_addr));
    if (!passes(p, ec)) return 0;
    fetch_all(*p->spec, ctx, payload);
    if (p->extra.bytes()) put_extras(p, ec, payload + p->spec_bytes);
    if (p->extra.stack_depth)
        put_stack(p, regs, reinterpret_cast<uint64_t>(ri->rp->kp.addr), payload + p->spec_bytes + p->extra.stack_at());
    put_event<kFirst>(s, p->index, p->slots, tid, entry, now, regs->ax, payload, p->bytes);
    return 0;
}
int fetch_return(struct kretprobe_instance *ri, struct pt_regs *regs) noexcept { return fetch_return_in<true>(ri, regs); }
int fetch_return_other(struct kretprobe_instance *ri, struct pt_regs *regs) noexcept
{
    return fetch_return_in<false>(ri, regs);
}
int value_return(struct kretprobe_instance *ri, struct pt_regs *regs) noexcept { return fetch_return_in<true, false>(ri, regs); }
int value_return_other(struct kretprobe_instance *ri, struct pt_regs *regs) noexcept
{
    return fetch_return_in<false, false>(ri, regs);
}

// FUNC: the call, its times and return value.
template <bool kFirst>
[[gnu::always_inline]] static inline int event_return_in(struct kretprobe_instance *ri, struct pt_regs *regs) noexcept
{
    // regs->ax only, read first: then regs is dead before anything else runs, and the engine
    // proves that this handler uses no other field (the light return: kretprobe_trampoline.S).
    uint64_t retval = regs->ax;
    asm volatile("" : "+r"(retval));
    const uint32_t s = kFirst ? 0 : probe_of_rp(ri->rp)->session;
    if (g_slots[s].silent.load(std::memory_order_relaxed)) return 0;
    const auto [entry, now] = return_times(reinterpret_cast<const EntryData *>(ri->data)->entry_ns);
    // The index read after the clock (slot 0's: as with one session, nothing kept across it).
    // The thread it returns in (a forked child's own, os/linux/live_tid.hpp), as at its entry
    // otherwise.
    put_event<kFirst>(s, index_of(ri->rp), 1, os::live_tid(static_cast<uint32_t>(ri->tid)), entry, now, retval, nullptr, 0);
    return 0;
}
int event_return(struct kretprobe_instance *ri, struct pt_regs *regs) noexcept { return event_return_in<true>(ri, regs); }
int event_return_other(struct kretprobe_instance *ri, struct pt_regs *regs) noexcept
{
    return event_return_in<false>(ri, regs);
}

// The call's nanoseconds, from its entry's stamp (the TSC's cycles, or the clock's time).
[[gnu::always_inline]] static inline uint64_t call_ns(const struct kretprobe_instance *ri) noexcept
{
    uint64_t stamp = reinterpret_cast<const EntryData *>(ri->data)->entry_ns;
    uint64_t end = g_tsc ? clk::tsc_unordered() : liveprobe_ktime_ns();
    return g_tsc ? tsc_delta_ns(stamp, end) : end <= stamp ? 0 : end - stamp;
}

// hist_return's rare cases (hist_return.S), through lp_call_keeping: no rows yet, or not any
// more (a new session, a fork: a child not followed is silent, and no handler sets its rows
// again then). The whole return, as hist_return does it; hist_return_clock's, without the TSC.
int hist_return_slow(void *arg) noexcept
{
    if (g_slots[0].silent.load(std::memory_order_relaxed)) return 0;
    auto *ri = static_cast<struct kretprobe_instance *>(arg);
    const uint64_t delta = call_ns(ri);
    if (ring_or_count_unringed<true>(0) < 0) return 0;  // first_ring() sets the rows (hists) with the ring
    hist_add(t_rows.hists + size_t{index_of(ri->rp)} * kHistBuckets, delta);
    return 0;
}

int hist_return_clock(struct kretprobe_instance *ri, struct pt_regs *) noexcept { return hist_return_slow(ri); }

// --filter at a return: the call's context for passes(), from its entry's registers.
[[gnu::always_inline]] static inline bool return_passes(const Probe *p, struct kretprobe_instance *ri, struct pt_regs *regs, uint64_t duration) noexcept
{
    FetchContext ctx;
    ctx.regs = regs;
    ctx.entry = reinterpret_cast<const EntryData *>(ri->data)->regs;
    return passes(p, ctx, duration, os::live_tid(static_cast<uint32_t>(ri->tid)), reinterpret_cast<uint64_t>(ri->ret_addr));
}

int count_filtered(struct kretprobe_instance *ri, struct pt_regs *regs) noexcept
{
    const Probe *p = probe_of_rp(ri->rp);
    if (!return_passes(p, ri, regs, call_ns(ri))) return 0;
    return p->session == 0 ? count_call<true>(p) : count_call<false>(p);
}

int filter_entry(struct kretprobe_instance *ri, struct pt_regs *regs) noexcept
{
    const Probe *p = probe_of_rp(ri->rp);
    FetchContext ctx;
    ctx.regs = regs;
    if (!passes(p, ctx, 0, 0, entry_caller(p, regs))) return 1;
    reinterpret_cast<EntryData *>(ri->data)->entry_ns = entry_stamp();
    return 0;
}

int count_pre_filtered(struct kprobe *kp, struct pt_regs *regs) noexcept
{
    const Probe *p = probe_of_kp(kp);
    FetchContext ctx;
    ctx.regs = regs;
    if (!passes(p, ctx, 0, 0, entry_caller(p, regs))) return 0;
    return p->session == 0 ? count_call<true>(p) : count_call<false>(p);
}

int hist_filtered(struct kretprobe_instance *ri, struct pt_regs *regs) noexcept
{
    const Probe *p = probe_of_rp(ri->rp);
    const Slot &sl = g_slots[p->session];
    if (sl.silent.load(std::memory_order_relaxed)) return 0;
    const uint64_t delta = call_ns(ri);
    if (!return_passes(p, ri, regs, delta)) return 0;
    const int32_t ring = p->session == 0 ? ring_or_count_unringed<true>(0) : ring_or_count_unringed<false>(p->session);
    if (ring < 0) return 0;
    hist_add(hist_of(sl.base, sl.capacity, static_cast<uint32_t>(ring), p->index), delta);
    return 0;
}

int left_call(struct kretprobe_instance *ri, struct pt_regs *) noexcept
{
    const Probe *p = probe_of_rp(ri->rp);
    const Slot &sl = g_slots[p->session];
    if (sl.silent.load(std::memory_order_relaxed)) return 0;
    const int32_t ring = p->session == 0 ? ring_or_count_unringed<true>(0) : ring_or_count_unringed<false>(p->session);
    if (ring < 0) return 0;
    std::atomic<uint64_t> *c = count_of(sl.base, sl.capacity, static_cast<uint32_t>(ring), p->index);
    c->store(c->load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);  // this thread's row only
    return 0;
}

int tree_left(struct kretprobe_instance *ri, struct pt_regs *regs) noexcept
{
    left_call(ri, regs);
    const Probe *p = probe_of_rp(ri->rp);
    if (g_slots[p->session].silent.load(std::memory_order_relaxed)) return 0;
    const uint64_t at = stamp_ns(reinterpret_cast<const EntryData *>(ri->data)->entry_ns);
    const uint32_t tid = os::live_tid(static_cast<uint32_t>(ri->tid));
    if (p->session == 0) put_event<true>(0, p->index, 1, tid, at, kLeftEvent, 0, nullptr, 0);
    else put_event<false>(p->session, p->index, 1, tid, at, kLeftEvent, 0, nullptr, 0);
    return 0;
}

// The other slots' --hist, with the TSC or not.
int hist_return_other(struct kretprobe_instance *ri, struct pt_regs *) noexcept
{
    const Probe *p = probe_of_rp(ri->rp);
    const Slot &sl = g_slots[p->session];
    if (sl.silent.load(std::memory_order_relaxed)) return 0;
    const uint64_t delta = call_ns(ri);
    const int32_t ring = ring_or_count_unringed<false>(p->session);
    if (ring < 0) return 0;
    hist_add(hist_of(sl.base, sl.capacity, static_cast<uint32_t>(ring), p->index), delta);
    return 0;
}

}  // namespace liveprobe::trace
