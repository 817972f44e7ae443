// The hit path of return probes (see kretprobe.hpp). Built like the jump path: with
// -mgeneral-regs-only (the return value may be in xmm0/xmm1 and nothing here may touch them
// before a handler's vector state is saved) and, in sanitizer builds, uninstrumented.
#include <sys/mman.h>
#include <sys/syscall.h>

#include <algorithm>

#include "arch/x86_64/light_layout.h"
#include "arch/x86_64/vector_state.hpp"
#include "core/dispatch.hpp"
#include "core/kretprobe.hpp"
#include "os/linux/raw_syscall.hpp"
#include "os/linux/stack_regions.hpp"

namespace liveprobe::core {

// What the light return's assembly (kretprobe_trampoline.S) reads and writes.
static_assert(offsetof(ThreadRecord, kret_busy) + offsetof(BusySlots<const void *>, slot) == LP_REC_KRET_BUSY_SLOT0);
static_assert(offsetof(ThreadRecord, kret_busy) + offsetof(BusySlots<const void *>, depth) == LP_REC_KRET_BUSY_DEPTH);
static_assert(offsetof(ThreadRecord, ret_top) == LP_REC_RET_TOP);
static_assert(offsetof(ThreadRecord, kret_light_sp) == LP_REC_KRET_LIGHT_SP);
static_assert(offsetof(ThreadRecord, kret_light_h) == LP_REC_KRET_LIGHT_H);
static_assert(offsetof(ThreadRecord, kret_light) == LP_REC_KRET_LIGHT);
static_assert(offsetof(ThreadRecord, kret_cache) == LP_REC_KRET_CACHE);
static_assert(sizeof(ThreadRecord::KretCache) == 32 && offsetof(ThreadRecord::KretCache, ks) == 0 &&
              offsetof(ThreadRecord::KretCache, hot) == 8 &&
              offsetof(ThreadRecord::KretCache, head) == LP_CACHE_HEAD &&
              offsetof(ThreadRecord::KretCache, n) == LP_CACHE_N && sizeof(ThreadRecord::KretCache::n) == 4 &&
              ThreadRecord::kKretCacheMax == LP_CACHE_MAX);
static_assert(offsetof(ThreadRecord, kret_seen_unregistrations) == LP_REC_KRET_SEEN);
static_assert(offsetof(Inst, below) == LP_INST_BELOW && offsetof(Inst, slot) == LP_INST_SLOT &&
              offsetof(Inst, ks) == LP_INST_KS && offsetof(Inst, next_free) == LP_INST_NEXT_FREE &&
              sizeof(Inst) == LP_INST_RI);
static_assert(offsetof(struct kretprobe_instance, ret_addr) == LP_RI_RET_ADDR);
static_assert(offsetof(struct kretprobe_instance, tid) == LP_RI_TID && sizeof(pid_t) == 4);
static_assert(offsetof(struct kretprobe_instance, data) == LP_RI_DATA);
static_assert(offsetof(KretState, entry_stamp) == LP_KRS_ENTRY_STAMP);
static_assert(offsetof(KretState, return_few) == LP_KRS_RETURN_FEW);
static_assert(offsetof(KretState, return_inline) == LP_KRS_RETURN_INLINE);
static_assert(offsetof(struct kprobe, __lp_reserved) == LP_KP_KRET_STATE);
static_assert(offsetof(struct kretprobe, entry_handler) == LP_RP_ENTRY_HANDLER);
static_assert(offsetof(KretState, entry_bare) == LP_KRS_ENTRY_BARE && offsetof(KretState, entry_direct) == LP_KRS_ENTRY_DIRECT);
static_assert(offsetof(ThreadRecord, owner) == 0 && sizeof(ThreadRecord::owner) == 4);
static_assert(offsetof(KretState, rp) == LP_KRS_RP && offsetof(KretState, live) == LP_KRS_LIVE &&
              offsetof(KretState, return_light) == LP_KRS_RETURN_LIGHT &&
              offsetof(KretState, return_saves) == LP_KRS_RETURN_SAVES &&
              offsetof(KretState, cache_slot) == LP_KRS_CACHE_SLOT && sizeof(KretState::cache_slot) == 4);
static_assert(offsetof(struct kretprobe, handler) == LP_RP_HANDLER);
static_assert(sizeof(std::atomic<bool>) == 1 && sizeof(std::atomic<uint64_t>) == 8);
static_assert(kInstRsb == 1);

namespace {

// The cache entry a probe's instances go to (KretState::cache_slot).
ThreadRecord::KretCache &cache_entry(ThreadRecord *rec, const KretState *ks) noexcept
{
    return rec->kret_cache[ks->cache_slot];
}

ThreadRecord::KretCache *cache_of(ThreadRecord *rec, const KretState *ks) noexcept
{
    ThreadRecord::KretCache &c = cache_entry(rec, ks);
    return c.ks == ks ? &c : nullptr;
}

// A cache entry holds a reference on the state it names (KretState::refs) for as long as it
// names it, whether it holds instances or not: flush_dead_walk reads the state of every entry,
// and an entry emptied by its calls in flight still names its probe after the last instance
// went back (issue 30: an unregistration while a call was in flight freed the state under it).
void adopt(ThreadRecord::KretCache &c, KretState *ks) noexcept
{
    ks->refs.fetch_add(1, std::memory_order_relaxed);
    c.ks = ks;
}

// Gives a cache's instances back to their pool (its probe is gone, or the slot is needed), and
// the entry's reference on the state.
void flush(ThreadRecord::KretCache &c) noexcept
{
    auto *ks = const_cast<KretState *>(static_cast<const KretState *>(c.ks));
    c.ks = nullptr;
    if (auto *in = static_cast<Inst *>(c.hot)) {
        c.hot = nullptr;
        kret_put(ks, in);
    }
    while (auto *in = static_cast<Inst *>(c.head)) {
        c.head = in->below;
        kret_put(ks, in);
    }
    c.n = 0;
    kret_unref(ks);
}

[[gnu::noinline]] void flush_dead_walk(ThreadRecord *rec, uint64_t now) noexcept
{
    rec->kret_seen_unregistrations = now;
    for (auto &c : rec->kret_cache)
        if (c.ks && !static_cast<const KretState *>(c.ks)->live.load(std::memory_order_relaxed)) flush(c);
}

// Flushes the caches of probes being unregistered (their memory waits for it). The check
// inline, the walk (after an unregistration) out of line.
inline void flush_dead(ThreadRecord *rec) noexcept
{
    const uint64_t now = g_kret_unregistrations.load(std::memory_order_acquire);
    if (now != rec->kret_seen_unregistrations) [[unlikely]]
        flush_dead_walk(rec, now);
}

Inst *take_global(KretState *ks) noexcept;

// Keeps `in` in its probe's cache entry c: as the hot one, else on the list while it has room.
inline bool keep(ThreadRecord::KretCache &c, Inst *in) noexcept
{
    if (!c.hot) [[likely]] {
        c.hot = in;
        return true;
    }
    if (c.n < ThreadRecord::kKretCacheMax) {
        in->below = static_cast<Inst *>(c.head);
        c.head = in;
        c.n++;
        return true;
    }
    return false;
}

// An instance: from this thread's cache, else from the pool.
inline Inst *take(ThreadRecord *rec, KretState *ks) noexcept
{
    if (ThreadRecord::KretCache *c = cache_of(rec, ks)) [[likely]] {
        if (auto *in = static_cast<Inst *>(c->hot)) [[likely]] {
            c->hot = nullptr;
            return in;
        }
        if (auto *in = static_cast<Inst *>(c->head)) {
            c->head = in->below;
            c->n--;
            return in;
        }
    }
    return take_global(ks);
}

// give_back's other cases: the entry holds another probe's instances, or none, or is full,
// or the probe is being unregistered.
[[gnu::noinline]] void give_back_slow(ThreadRecord *rec, Inst *in) noexcept
{
    KretState *ks = in->ks;
    if (ks->live.load(std::memory_order_relaxed)) {
        ThreadRecord::KretCache &c = cache_entry(rec, ks);
        if (c.ks != ks) {
            if (c.ks) flush(c);  // another probe's: the one used last keeps the entry
            adopt(c, ks);
        }
        if (keep(c, in)) return;
    }
    kret_put(ks, in);
}

// Back to this thread's cache while the probe lives and the cache has room, else the pool.
[[gnu::always_inline]] inline void give_back(ThreadRecord *rec, Inst *in) noexcept
{
    KretState *ks = in->ks;
    ThreadRecord::KretCache &c = cache_entry(rec, ks);
    if (c.ks == ks && ks->live.load(std::memory_order_relaxed) && keep(c, in)) [[likely]]
        return;
    give_back_slow(rec, in);
}

// Makes instance i's memory read-write, and more with it (the committed range at least doubles);
// false when the system has no memory for it. Async-signal-safe (a raw system call). Threads
// racing here may change the same pages: harmless.
[[gnu::noinline]] bool commit_instances(KretState *ks, uint32_t i) noexcept
{
    constexpr uint64_t kPage = 4096;
    uint32_t have = ks->committed.load(std::memory_order_acquire);
    if (i < have) return true;
    const uint32_t want = std::min(ks->count, std::max({i + 1, have * 2, 64u}));
    const uint64_t from = reinterpret_cast<uint64_t>(ks->at(have)) & ~(kPage - 1);
    const uint64_t to = (reinterpret_cast<uint64_t>(ks->at(want)) + kPage - 1) & ~(kPage - 1);
    if (os::raw_syscall(SYS_mprotect, static_cast<long>(from), static_cast<long>(to - from),
                        PROT_READ | PROT_WRITE) != 0)
        return false;
    while (have < want &&
           !ks->committed.compare_exchange_weak(have, want, std::memory_order_release, std::memory_order_acquire)) {
    }
    return true;
}

Inst *take_global(KretState *ks) noexcept
{
    uint64_t top = ks->free_top.load(std::memory_order_acquire);
    for (;;) {
        uint32_t idx1 = static_cast<uint32_t>(top);
        if (idx1 == 0) {
            // No instance came back yet: a fresh one, built here (its memory is touched first now).
            uint32_t i = ks->fresh.load(std::memory_order_relaxed);
            do {
                if (i >= ks->count) return nullptr;
            } while (!ks->fresh.compare_exchange_weak(i, i + 1, std::memory_order_relaxed));
            // Its memory, the first time an instance this far is taken (without it, this
            // index stays unused: the call is missed).
            if (i >= ks->committed.load(std::memory_order_acquire) && !commit_instances(ks, i)) return nullptr;
            Inst *in = new (ks->at(i)) Inst();
            in->index = i;
            ks->refs.fetch_add(1, std::memory_order_relaxed);
            return in;
        }
        Inst *in = ks->at(idx1 - 1);
        // A stale next_free (another thread took `in` meanwhile) fails the CAS: the tag moved.
        uint64_t next = ((top >> 32) + 1) << 32 | in->next_free;
        if (ks->free_top.compare_exchange_weak(top, next, std::memory_order_acq_rel, std::memory_order_acquire)) {
            ks->refs.fetch_add(1, std::memory_order_relaxed);
            return in;
        }
    }
}

void release_memory(KretState *ks) noexcept
{
    if (ks->retired) g_kret_retired.fetch_sub(1, std::memory_order_relaxed);
    os::raw_munmap(ks->base, ks->map_size);
}

enum class Which { kReturn, kUnwind };

// Handlers run with the vector state saved see it through liveprobe_get_fpregs. When an outer
// level exposed the thread's registers already, those stay: on the breakpoint path the entry
// handler runs inside the pre handlers of a signal handler, whose live registers are not the
// thread's (the kernel resets them); on the jump path the outer save is restored last.
FpregsExposed expose_fpregs(ThreadRecord *rec, void *area) noexcept
{
    if (!area || rec->saved_xmm) return FpregsExposed(rec, rec->saved_xmm, rec->saved_xmm_stride, rec->saved_st);
    uint64_t stride = 0;
    uint8_t *xmm = arch::saved_xmm0(area, &stride);
    return FpregsExposed(rec, xmm, stride, arch::saved_st0(area));
}

// Runs rp's return or unwind handler for `in` under a fault guard, with the vector state saved
// around it when it may touch it, unless rp is being unregistered (the busy protocol of
// dispatch.hpp, on kret_busy: rp is read only once live is seen true with kret_busy set).
[[gnu::noinline]] void call_handler(ThreadRecord *rec, Inst *in, Which which, struct pt_regs *regs) noexcept
{
    KretState *ks = in->ks;
    const BusyMark prev = rec->kret_busy.mark();
    if (publish_busy<const void *>(rec->kret_busy, ks) && ks->live.load(std::memory_order_acquire)) {
        struct kretprobe *rp = ks->rp;
        kretprobe_handler_t h = which == Which::kReturn ? rp->handler : rp->unwind_handler;
        bool vec = which == Which::kReturn ? ks->return_vec : ks->unwind_vec;
        if (h) {
            enter_handler(rec, __builtin_frame_address(0));
            struct kretprobe_instance *ri = in->ri();
            arch::maybe_with_vectors_saved(vec, [&](void *area) {
                auto x = expose_fpregs(rec, area);
                if (!run_guarded(rec, [&] { h(ri, regs); }) && ks->fault_id) count(rec, ks->fault_id);
            });
            leave_handler(rec);
        }
    }
    rec->kret_busy.release(prev);
}

// A return handler from kretprobe_return, `next` the calls of the same slot after it (they
// return to `ret`, and the trampoline leaves by ret when `rsb`): with no vector state to save
// (and outside sanitizer builds), without a setjmp guard: a fault in it resumes the trampoline
// through lp_kret_fault (kret_fault_resume), which finishes the return from kret_guard.
[[gnu::always_inline]] inline void call_return_handler(ThreadRecord *rec, Inst *in, struct pt_regs *regs,
                                                      Inst *next, uint64_t ret, uint64_t rsb) noexcept
{
#ifndef LIVEPROBE_SANITIZED
    KretState *ks = in->ks;
    if (!ks->return_vec) [[likely]] {
        const BusyMark prev = rec->kret_busy.mark();
        if (publish_busy<const void *>(rec->kret_busy, ks) && ks->live.load(std::memory_order_acquire)) [[likely]] {
            if (kretprobe_handler_t h = ks->rp->handler) [[likely]] {
                rec->in_handler++;
                rec->kret_guard = {regs, in, next, prev, ret, rsb};
                std::atomic_signal_fence(std::memory_order_seq_cst);
                h(in->ri(), regs);
                std::atomic_signal_fence(std::memory_order_seq_cst);
                rec->kret_guard.regs = nullptr;
                rec->in_handler--;
            }
        }
        rec->kret_busy.release(prev);
        return;
    }
#else
    (void)next, (void)ret, (void)rsb;
#endif
    call_handler(rec, in, Which::kReturn, regs);
}

// The entry handler, guarded, with the vector state saved around it when it may touch it.
// False when it faulted or returned non-zero.
bool call_entry_handler(ThreadRecord *rec, KretState *ks, struct kretprobe *rp, struct kretprobe_instance *ri,
                        struct pt_regs *regs) noexcept
{
    int r = 0;
    bool ok = arch::maybe_with_vectors_saved(ks->entry_vec, [&](void *area) {
        auto x = expose_fpregs(rec, area);
        return run_guarded(rec, [&] { r = rp->entry_handler(ri, regs); });
    });
    if (!ok && ks->fault_id) count(rec, ks->fault_id);
    return ok && r == 0;
}

void remember_reaped(ThreadRecord *rec, Inst *in) noexcept
{
    uint32_t i = rec->reaped_next++ % ThreadRecord::kReaped;
    rec->reaped_slot[i] = in->slot;
    rec->reaped_ret[i] = reinterpret_cast<uint64_t>(in->ri()->ret_addr);
}

// A call that left without returning: unwind_handler, instance back.
void reap(ThreadRecord *rec, Inst *in) noexcept
{
    remember_reaped(rec, in);
    call_handler(rec, in, Which::kUnwind, nullptr);
    give_back(rec, in);
}

// Reaps the calls of rec's thread whose frames lie below `slot` on the same stack (and, with
// `at_slot_unless_trampoline`, the one at `slot` when it no longer holds the trampoline's
// address: a new call reuses it). Entries on other stacks are stepped over.
[[gnu::noinline]] void reap_below_walk(ThreadRecord *rec, uint64_t slot, bool at_slot_unless_trampoline) noexcept
{
    uint32_t region = os::stack_region(slot);
    Inst **link = reinterpret_cast<Inst **>(&rec->ret_top);
    while (Inst *e = *link) {
        if (os::stack_region(e->slot) != region) {
            link = &e->below;
            continue;
        }
        bool gone = e->slot < slot ||
                    (at_slot_unless_trampoline && e->slot == slot &&
                     *reinterpret_cast<const uint64_t *>(slot) != trampoline());
        if (!gone) break;
        *link = e->below;
        reap(rec, e);
    }
}

// The common cases first, inline: no call in flight, or the newest one is on this stack and
// not gone (an outer call, or this very slot's): nothing to reap, no walk.
inline void reap_below(ThreadRecord *rec, uint64_t slot, bool at_slot_unless_trampoline) noexcept
{
    const auto *top = static_cast<const Inst *>(rec->ret_top);
    if (!top) return;
    const bool kept = top->slot > slot ||
                      (top->slot == slot && (!at_slot_unless_trampoline ||
                                             *reinterpret_cast<const uint64_t *>(slot) == trampoline()));
    if (kept && os::stack_region(top->slot) == os::stack_region(slot)) return;
    reap_below_walk(rec, slot, at_slot_unless_trampoline);
}

// The real return address of the call whose return slot is `slot` (a tail call's callee
// returns through its caller's), from the live entries or the reaped ring; 0 if none.
uint64_t return_address_of(ThreadRecord *rec, uint64_t slot) noexcept
{
    for (Inst *e = static_cast<Inst *>(rec->ret_top); e; e = e->below)
        if (e->slot == slot) return reinterpret_cast<uint64_t>(e->ri()->ret_addr);
    for (uint32_t k = 0; k < ThreadRecord::kReaped; ++k) {
        uint32_t i = (rec->reaped_next - 1 - k) % ThreadRecord::kReaped;
        if (rec->reaped_slot[i] == slot && rec->reaped_ret[i]) return rec->reaped_ret[i];
    }
    return 0;
}

[[noreturn]] void lost_return(uint64_t slot) noexcept
{
    static const char msg[] =
        "liveprobe: a function returned through the kretprobe trampoline with no record of "
        "where it returns to; aborting\n";
    os::raw_write(2, msg, sizeof msg - 1);
    (void)slot;
    __builtin_trap();
}

}  // namespace

std::atomic<uint64_t> g_kret_unregistrations{0};
std::atomic<int64_t> g_kret_retired{0};

void kret_reap_below(ThreadRecord *rec, uint64_t slot, bool at_slot) noexcept { reap_below(rec, slot, at_slot); }

void kret_reap_overwritten() noexcept
{
    ThreadRecord *rec = this_thread_if_any();
    if (!rec) return;
    Inst **link = reinterpret_cast<Inst **>(&rec->ret_top);
    while (Inst *e = *link) {
        // Only on the thread's own stack, which stays mapped (a signal stack may be gone).
        if (os::stack_region(e->slot) == 0 && *reinterpret_cast<const uint64_t *>(e->slot) != trampoline()) {
            *link = e->below;
            reap(rec, e);
        } else {
            link = &e->below;
        }
    }
}

void kret_abandon_entry(ThreadRecord *rec) noexcept
{
    if (auto *in = static_cast<Inst *>(rec->kret_entry)) {
        rec->kret_entry = nullptr;
        give_back(rec, in);
    }
}

void kret_put(KretState *ks, Inst *in) noexcept
{
    uint64_t top = ks->free_top.load(std::memory_order_acquire);
    for (;;) {
        in->next_free = static_cast<uint32_t>(top);
        uint64_t next = ((top >> 32) + 1) << 32 | (in->index + 1);
        if (ks->free_top.compare_exchange_weak(top, next, std::memory_order_acq_rel, std::memory_order_acquire))
            break;
    }
    kret_unref(ks);
}

size_t replaced_slots(arch::ReplacedSlot *out, size_t max) noexcept
{
    const ThreadRecord *rec = tl_rec;
    size_t n = 0;
    if (!rec) return 0;
    for (Inst *e = static_cast<Inst *>(rec->ret_top); e && n < max; e = e->below)
        out[n++] = {e->slot, reinterpret_cast<uint64_t>(e->ri()->ret_addr)};
    return n;
}

void kret_unref(KretState *ks) noexcept
{
    if (ks->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) release_memory(ks);
}

namespace {

// Whether a call of ks is in flight on rec's thread with its return slot at `slot`.
bool in_flight_at(const ThreadRecord *rec, const KretState *ks, uint64_t slot) noexcept
{
    for (const Inst *e = static_cast<const Inst *>(rec->ret_top); e; e = e->below) {
        if (e->slot == slot && e->ks == ks) return true;
        if (e->slot > slot && os::stack_region(e->slot) == os::stack_region(slot)) return false;  // outer calls
    }
    return false;
}

// A call's entry, for kret_pre and the light entry: reaps what left, takes an instance, runs
// the entry handler by `call_entry(in, ri)` (true: it accepted the call), records the call and
// replaces the return slot. The instance recorded, or null (missed, or declined).
template <typename CallEntry>
[[gnu::always_inline]] inline Inst *enter(ThreadRecord *rec, struct kretprobe *rp, KretState *ks, uint64_t slot,
                                          CallEntry call_entry) noexcept
{
    reap_below(rec, slot, true);

    uint64_t ret = *reinterpret_cast<const uint64_t *>(slot);
    if (ret == trampoline()) [[unlikely]] {
        // The function jumped back to its own entry (a loop whose head is its first
        // instruction, a tail call to itself): the frame is the same, and so is the call, whose
        // instance of this probe is in flight at this slot. For a probe that counts calls (the
        // tracer's), not a call: no instance, no miss. The kernel's kretprobes take one.
        if (ks->calls_only && in_flight_at(rec, ks, slot)) return nullptr;
        // A tail call: this function returns through its caller's slot, already ours.
        ret = return_address_of(rec, slot);
        if (ret == 0) {
            __atomic_fetch_add(&rp->nmissed, 1, __ATOMIC_RELAXED);
            return nullptr;
        }
    }
    flush_dead(rec);
    Inst *in = take(rec, ks);
    if (!in) [[unlikely]] {
        __atomic_fetch_add(&rp->nmissed, 1, __ATOMIC_RELAXED);
        return nullptr;
    }
    in->ks = ks;
    in->slot = slot;
    in->next_free = 0;
    struct kretprobe_instance *ri = in->ri();
    ri->rp = rp;
    ri->ret_addr = reinterpret_cast<kprobe_opcode_t *>(ret);
    ri->tid = rec->owner.load(std::memory_order_relaxed);
    if (rp->entry_handler && !call_entry(in, ri)) [[unlikely]] {
        give_back(rec, in);
        return nullptr;
    }
    in->below = static_cast<Inst *>(rec->ret_top);
    rec->ret_top = in;
    *reinterpret_cast<uint64_t *>(slot) = trampoline();
    return in;
}

}  // namespace

int kret_pre(struct kprobe *kp, struct pt_regs *regs) noexcept
{
    auto *rp = reinterpret_cast<struct kretprobe *>(kp);  // kp is rp's first member
    auto *ks = reinterpret_cast<KretState *>(kp->__lp_reserved[0]);
    ThreadRecord *rec = this_thread();
    if (!ks || !rec) [[unlikely]]
        return 0;
    // At a function's entry, the stack pointer is the return slot.
    Inst *in = enter(rec, rp, ks, regs->sp, [&](Inst *taken, struct kretprobe_instance *ri) {
        bool ok;
        if (rec->jump_regs == regs && !ks->entry_vec) [[likely]] {
            // On the jump path's fast path, which guards this handler already: a fault resumes
            // the detour through lp_jump_fault, which counts it (on this kprobe's fault_id, as
            // call_entry_handler would) and gives the instance back (kret_abandon_entry).
            rec->kret_entry = taken;
            ok = rp->entry_handler(ri, regs) == 0;
            rec->kret_entry = nullptr;
        } else {
            ok = call_entry_handler(rec, ks, rp, ri, regs);
        }
        return ok;
    });
    // On the jump path's fast path (its detour's registers are these), the detour may push the
    // trampoline's address onto the return stack buffer (lp_jump_pre, kret_take_rsb).
    if (in && rec->jump_regs == regs) [[likely]]
        rec->kret_rsb = in;
    return 0;
}

}  // namespace liveprobe::core

// The light entry of a kretprobe, for what lp_kret_light_pre (jump_light.S) does not do
// itself: it passes the thread's record rec (the thread has a record, runs no handler and
// dispatches nothing else, ks is enabled). The optimizer gave the probe a light entry only when
// its entry handler, if any, is proven vector-free and never to read its regs (it gets none)
// and the entry is a function's (slot: the stack pointer there). The entry handler runs through
// lp_kret_call_saving (or lp_kret_call_bare): a fault in it returns 1 from there
// (arch::light_fault_resume counts the fault), and the instance goes back as for a handler
// that declined. Returns arch::kLightKret when the slot was replaced: the detour goes on
// through lp_kret_rsb_call, so the instance is marked for the trampoline's predicted `ret`
// home.
extern "C" int lp_kret_light_c(struct kprobe *kp, uint64_t slot, liveprobe::core::ThreadRecord *rec) noexcept
{
    using namespace liveprobe::core;
    auto *rp = reinterpret_cast<struct kretprobe *>(kp);
    auto *ks = reinterpret_cast<KretState *>(kp->__lp_reserved[0]);
    if (!ks) [[unlikely]]
        return 0;
    Inst *in = enter(rec, rp, ks, slot, [&](Inst *, struct kretprobe_instance *ri) {
        std::atomic_signal_fence(std::memory_order_seq_cst);
        rec->kret_light_h = reinterpret_cast<void *>(rp->entry_handler);
        const bool ok =
            (ks->entry_bare ? lp_kret_call_bare(ri, nullptr, rec) : lp_kret_call_saving(ri, nullptr, rec)) == 0;
        std::atomic_signal_fence(std::memory_order_seq_cst);
        rec->kret_light_sp = nullptr;
        rec->kret_light_h = nullptr;  // set only while a handler runs (kret_fault_resume)
        return ok;
    });
    if (!in) return 0;
    in->next_free = kInstRsb;
    return 3;  // arch::kLightKret
}

namespace liveprobe::core {

void kret_thread_gone(ThreadRecord *rec) noexcept
{
    while (Inst *e = static_cast<Inst *>(rec->ret_top)) {
        rec->ret_top = e->below;
        reap(rec, e);
    }
    for (auto &c : rec->kret_cache)
        if (c.ks) flush(c);
}

// In a forked child: the calls the forking thread had in flight return in the child too, under
// the child's thread (a call entered before fork() that returns in the child is the child's).
// The instances in its cache entries are set when taken (lp_kret_light_pre compares ri->tid).
void kret_thread_forked(ThreadRecord *rec, int tid) noexcept
{
    for (Inst *e = static_cast<Inst *>(rec->ret_top); e; e = e->below) e->ri()->tid = tid;
}

namespace {
const bool g_hooked = (g_thread_gone_hook = kret_thread_gone, g_thread_forked_hook = kret_thread_forked, true);
}

}  // namespace liveprobe::core

using namespace liveprobe::core;

namespace {

// Runs the return handlers of `e` and the calls after it (one return slot), gives their
// instances back, and says where the trampoline goes.
[[gnu::always_inline]] inline KretReturn finish_return(ThreadRecord *rec, struct pt_regs *regs, Inst *e, uint64_t ret,
                                                      uint64_t rsb) noexcept
{
    while (e) {
        Inst *next = e->below;  // give_back reuses `below`
        regs->ip = ret;
        call_return_handler(rec, e, regs, next, ret, rsb);
        give_back(rec, e);
        e = next;
    }
    flush_dead(rec);
    return {regs->ip, rsb};
}

// The newest call in flight of rec's thread when it alone returns through `slot`, else null: the
// one below it neither returns through the slot too (no tail call shares it) nor is a frame of
// another stack, which return_walk would step over. Nothing is to be reaped then: return_walk's
// reap_below looks at the newest call only, this one.
inline Inst *common_return(ThreadRecord *rec, uint64_t slot) noexcept
{
    auto *e = static_cast<Inst *>(rec->ret_top);
    if (!e || e->slot != slot) [[unlikely]]
        return nullptr;
    const Inst *below = e->below;
    if (below && (below->slot == slot ||
                  liveprobe::os::stack_region(below->slot) != liveprobe::os::stack_region(slot))) [[unlikely]]
        return nullptr;
    return e;
}

// The general case of kretprobe_return: calls below this one to reap, several calls returning
// through one slot, or none.
[[gnu::noinline]] KretReturn return_walk(ThreadRecord *rec, struct pt_regs *regs, uint64_t slot) noexcept
{
    // Calls below this one on its stack left without returning (longjmp, an exception).
    reap_below(rec, slot, false);
    // The calls returning through this slot: one, or several after tail calls (innermost
    // first). They are the first entries of this stack from the top.
    uint32_t region = liveprobe::os::stack_region(slot);
    // They leave the stack first, all of them (a handler that starts an unwinder must not meet
    // this slot's entries), chained through their own `below` in the same order: any number
    // of tail calls, nothing allocated.
    Inst *done = nullptr;
    Inst **done_tail = &done;
    uint64_t ret = 0;
    uint64_t rsb = 0;  // the outermost call's (the one that replaced the slot)
    Inst **link = reinterpret_cast<Inst **>(&rec->ret_top);
    while (Inst *e = *link) {
        if (liveprobe::os::stack_region(e->slot) != region) {
            link = &e->below;
            continue;
        }
        if (e->slot != slot) break;
        *link = e->below;
        ret = reinterpret_cast<uint64_t>(e->ri()->ret_addr);
        rsb = e->next_free == kInstRsb;
        e->below = nullptr;
        *done_tail = e;
        done_tail = &e->below;
    }
    if (done == nullptr) {
        ret = return_address_of(rec, slot);  // reaped too early: it still goes home
        if (ret == 0) lost_return(slot);
        regs->ip = ret;
        return {ret, 0};
    }
    return finish_return(rec, regs, done, ret, rsb);
}

KretReturn kretprobe_return(struct pt_regs *regs) noexcept
{
    ThreadRecord *rec = this_thread();
    const uint64_t slot = regs->sp - 8;
    if (!rec) lost_return(slot);
    // The common case, without return_walk's walk (common_return).
    if (Inst *e = common_return(rec, slot)) [[likely]] {
        rec->ret_top = e->below;
        const uint64_t ret = reinterpret_cast<uint64_t>(e->ri()->ret_addr);
        const uint64_t rsb = e->next_free == kInstRsb;
        e->below = nullptr;
        return finish_return(rec, regs, e, ret, rsb);
    }
    return return_walk(rec, regs, slot);
}

}  // namespace

// The light return (kretprobe_trampoline.S, lp_kretprobe_trampoline), which has saved the
// caller-saved registers and rbp only. It declines (returns rsb 2), with nothing changed, unless
// the thread is at the outermost level (no handler, no return handler running), the newest call
// in flight returns through `slot` and no other shares it (nor is the one below on another
// stack: the common case of kretprobe_return), and its probe's return handler is light
// (KretState::return_light). It then takes the call off the return stack and writes its real
// return address into the slot (the trampoline's frame is the probed function's at its return,
// for unwinders), runs the handler under a level of kret_busy unless the probe is going away,
// gives the instance back and says where the trampoline goes. The handler runs through
// lp_kret_call_bare, or lp_kret_call_saving when it writes callee-saved registers other than
// rbp (KretState::return_saves, return_rbx), so that a fault in it (kret_fault_resume) returns
// 1 from there with this function's registers intact; its regs is the trampoline's frame (the
// slot - 128).
extern "C" KretReturn lp_kret_light_return(uint64_t slot) noexcept
{
    ThreadRecord *rec = tl_rec;
    if (!rec || rec->in_handler || rec->kret_busy.mark() != 0) [[unlikely]]
        return {0, 2};
    Inst *e = common_return(rec, slot);
    if (!e) [[unlikely]]
        return {0, 2};
    KretState *ks = e->ks;
    if (!ks->return_light) [[unlikely]]
        return {0, 2};
    // Named first, then taken, as the trampoline's fast path does (kret_abandon_return).
    rec->kret_light = e;
    rec->in_handler = 1;
    std::atomic_signal_fence(std::memory_order_seq_cst);
    rec->ret_top = e->below;
    e->below = nullptr;
    struct kretprobe_instance *ri = e->ri();
    const uint64_t ret = reinterpret_cast<uint64_t>(ri->ret_addr);
    const uint64_t rsb = e->next_free == kInstRsb;
    *reinterpret_cast<uint64_t *>(slot) = ret;
    if (publish_busy<const void *>(rec->kret_busy, ks) && ks->live.load(std::memory_order_acquire)) [[likely]] {
        if (kretprobe_handler_t h = ks->rp->handler) [[likely]] {
            rec->kret_light_h = reinterpret_cast<void *>(h);
            std::atomic_signal_fence(std::memory_order_seq_cst);
            auto *regs = reinterpret_cast<struct pt_regs *>(slot - 128);
            if (ks->return_saves || ks->return_rbx) [[unlikely]]
                lp_kret_call_saving(ri, regs, rec);
            else
                lp_kret_call_bare(ri, regs, rec);
            std::atomic_signal_fence(std::memory_order_seq_cst);
            rec->kret_light_sp = nullptr;
            rec->kret_light_h = nullptr;
        }
    }
    rec->kret_busy.release(0);
    std::atomic_signal_fence(std::memory_order_seq_cst);
    rec->kret_light = nullptr;
    rec->in_handler = 0;
    std::atomic_signal_fence(std::memory_order_seq_cst);
    give_back(rec, e);
    flush_dead(rec);
    return {ret, rsb};
}

uint64_t liveprobe::core::kret_abandoned_frame(const ThreadRecord *rec) noexcept
{
    // The trampoline was entered by the function's ret (rsp = slot + 8) and pushed its frame
    // from there: a hit at the slot or above (the next call at the same depth) is past it.
    return rec->kret_light ? static_cast<const Inst *>(rec->kret_light)->slot - 1 : 0;
}

void liveprobe::core::kret_abandon_return(ThreadRecord *rec) noexcept
{
    // A light return names its call before it takes it off the return stack: until then the
    // call is still there, and is reaped as any call left by a jump.
    if (rec->kret_light) {
        if (rec->kret_light != rec->ret_top) give_back(rec, static_cast<Inst *>(rec->kret_light));
    }
    else if (rec->kret_guard.regs && rec->kret_guard.inst) give_back(rec, static_cast<Inst *>(rec->kret_guard.inst));
}

// The light return's assembly fast path (kretprobe_trampoline.S) when its inline give-back does
// not apply: e (unless null: it went back already) back to the thread's cache or its pool, and
// the caches of probes being unregistered flushed.
extern "C" void lp_kret_light_finish(ThreadRecord *rec, Inst *e) noexcept
{
    if (e) give_back(rec, e);
    flush_dead(rec);
}

// Where a fault in a return handler run by call_return_handler resumes (kret_fault_resume), in
// place of lp_kretprobe_return's return to the trampoline: the fault counted, the call's
// instance back, the calls after it run, and the trampoline goes on.
extern "C" KretReturn lp_kret_fault(ThreadRecord *rec, struct pt_regs *regs) noexcept
{
    ThreadRecord::KretGuard g = rec->kret_guard;
    rec->kret_guard.regs = nullptr;
    auto *in = static_cast<Inst *>(g.inst);
    if (in->ks->fault_id) count(rec, in->ks->fault_id);
    rec->in_handler--;
    rec->kret_busy.release(g.prev_busy);
    give_back(rec, in);
    return finish_return(rec, regs, static_cast<Inst *>(g.next), g.ret, g.rsb);
}

bool liveprobe::core::kret_fault_resume(int sig, ucontext_t *uc) noexcept
{
    (void)sig;
    ThreadRecord *rec = this_thread_if_any();
    if (!rec) return false;
    if (rec->kret_light && rec->in_handler && rec->kret_light_h) {
        // A light return's handler (kret_light_h: while it runs, not the rest of the return,
        // where a fault is a signal handler's that landed there): abandoned.
        auto *in = static_cast<Inst *>(rec->kret_light);
        if (in->ks->fault_id) count(rec, in->ks->fault_id);
        greg_t *g = uc->uc_mcontext.gregs;
        if (uint64_t *sp = rec->kret_light_sp) {
            // Called through lp_kret_call_bare or lp_kret_call_saving (lp_kret_light_return, or
            // the trampoline for a handler that writes callee-saved registers): that call
            // returns 1, with the callee-saved registers the handler may write restored.
            rec->kret_light_sp = nullptr;
            g[REG_RSP] = reinterpret_cast<greg_t>(sp + 1);
            g[REG_RIP] = static_cast<greg_t>(sp[0]);
            return true;
        }
        // Called by the trampoline itself (its fast path), with the stack pointer the slot - 88:
        // it resumes after that call, as if the handler had returned. The handler wrote no
        // callee-saved register but rbp and rbx, which the trampoline restores from its frame.
        g[REG_RSP] = static_cast<greg_t>(in->slot - 88);
        g[REG_RIP] = reinterpret_cast<greg_t>(&lp_kret_light_after);
        return true;
    }
    if (!rec->kret_guard.regs) return false;
    // lp_kretprobe_dispatch called lp_kretprobe_return with rsp = regs rounded down to 16: its
    // return address is just below; rbx holds regs across the call, as the trampoline needs.
    auto regs = reinterpret_cast<uint64_t>(rec->kret_guard.regs);
    greg_t *g = uc->uc_mcontext.gregs;
    g[REG_RSP] = static_cast<greg_t>((regs & ~uint64_t{15}) - 8);
    g[REG_RBX] = static_cast<greg_t>(regs);
    g[REG_RDI] = reinterpret_cast<greg_t>(rec);
    g[REG_RSI] = static_cast<greg_t>(regs);
    g[REG_RIP] = reinterpret_cast<greg_t>(&lp_kret_fault);
    return true;
}

// Called by the return trampoline with the registers after the return (the return value in
// rax/rdx, xmm0/xmm1 or st(0)).
extern "C" KretReturn lp_kretprobe_return(struct pt_regs *regs) noexcept
{
#ifdef LIVEPROBE_SANITIZED
    // Sanitizer builds: what this calls before a handler's own save is instrumented, and the
    // runtimes use vector registers anywhere: the return value would be gone by then. Save
    // around everything; the handlers see (and may change) the saved registers.
    return liveprobe::arch::with_vectors_saved([&](void *area) {
        ThreadRecord *rec = this_thread();
        if (!rec) return kretprobe_return(regs);
        auto x = expose_fpregs(rec, area);
        return kretprobe_return(regs);
    });
#else
    return kretprobe_return(regs);
#endif
}
