#include "trace/handlers.hpp"

#include <pthread.h>
#include <sys/syscall.h>

#include <liveprobe/ktime.h>

#include "os/linux/clock.hpp"

#include "os/linux/raw_syscall.hpp"
#include "trace/fetch.hpp"
#include "trace/hist_layout.h"
#include "trace/rings.hpp"
#include "trace/thread_rows.hpp"

namespace liveprobe::trace {

void *g_base = nullptr;
uint32_t g_capacity = 0;
std::atomic<uint64_t> g_generation{0};
bool g_follow = true;
std::atomic<bool> g_silent{false};
bool g_tsc = false;

namespace clk = liveprobe::os::clock;

constinit thread_local ThreadRows t_rows;

// What hist_return (hist_return.S) reads.
static_assert(offsetof(ThreadRows, generation) == LP_ROWS_GENERATION && offsetof(ThreadRows, hists) == LP_ROWS_HISTS &&
              offsetof(ThreadRows, pending) == LP_ROWS_PENDING);
static_assert(static_cast<long>(offsetof(Probe, index)) - static_cast<long>(offsetof(Probe, rp)) == LP_PROBE_INDEX_FROM_RP);
static_assert(kHistBuckets == LP_HIST_BUCKETS);
static_assert(sizeof(clk::Conversion) == 1 << LP_CONV_SIZE_LOG2 && offsetof(clk::Conversion, mult) == LP_CONV_MULT &&
              clk::kRing == LP_CONV_RING_MASK + 1);
static_assert(offsetof(EntryData, entry_ns) == 0);  // at LP_RI_DATA (checked in core/kret_hit.cpp)
static_assert(sizeof(clk::g_gen) == 4 && sizeof(g_generation) == 8);

[[gnu::constructor]] static void trace_atfork()
{
    pthread_atfork(nullptr, nullptr, [] {
        g_generation.fetch_add(1, std::memory_order_release);
        if (!g_follow) g_silent.store(true, std::memory_order_relaxed);
    });
}

// The calling thread's ring, claimed on its first event: -1 when every ring is taken (rings of
// threads that have exited, drained, are taken back).
static int32_t my_ring() noexcept
{
    uint64_t gen = g_generation.load(std::memory_order_acquire);
    if (t_rows.generation == gen && t_rows.ring >= 0) return t_rows.ring;
    t_rows.generation = gen;
    t_rows.ring = -1;
    int32_t tid = os::raw_gettid();
    int32_t pid = os::raw_getpid();
    for (uint32_t pass = 0; pass < 2 && t_rows.ring < 0; ++pass) {
        for (uint32_t i = 0; i < kRings; ++i) {
            RingHead *h = ring_head(g_base, i);
            int32_t owner = h->tid.load(std::memory_order_relaxed);
            if (pass == 1 && owner != 0 && owner != tid && h->head.load() == h->tail.load() &&
                os::raw_syscall(SYS_tgkill, pid, owner, 0) == -ESRCH) {
                // Its thread is gone and the reader has everything: take it.
                if (h->tid.compare_exchange_strong(owner, tid)) {
                    t_rows.ring = static_cast<int32_t>(i);
                    break;
                }
                continue;
            }
            int32_t free = 0;
            if (owner == 0 && h->tid.compare_exchange_strong(free, tid)) {
                t_rows.ring = static_cast<int32_t>(i);
                break;
            }
        }
    }
    t_rows.counts = t_rows.ring >= 0 ? count_of(g_base, g_capacity, static_cast<uint32_t>(t_rows.ring), 0) : nullptr;
    t_rows.hists = t_rows.ring >= 0 ? hist_of(g_base, g_capacity, static_cast<uint32_t>(t_rows.ring), 0) : nullptr;
    t_rows.tail = t_rows.ring >= 0 ? ring_head(g_base, static_cast<uint32_t>(t_rows.ring))->tail.load(std::memory_order_acquire) : 0;
    t_rows.pending = t_rows.ring >= 0 ? &ring_head(g_base, static_cast<uint32_t>(t_rows.ring))->hist_pending : nullptr;
    return t_rows.ring;
}

// my_ring(), or -1 counted as an event without a ring (every ring taken).
static int32_t ring_or_count_unringed() noexcept
{
    const int32_t ring = my_ring();
    if (ring < 0) header_of(g_base)->unringed.fetch_add(1, std::memory_order_relaxed);
    return ring;
}

// count_pre's other cases, out of its line: no row yet or any more (a new session, a fork:
// both move g_generation), or silent (a child not followed: set with the generation's move).
[[gnu::noinline]] static int count_slow(uint32_t idx) noexcept
{
    if (g_silent.load(std::memory_order_relaxed)) return 0;
    if (ring_or_count_unringed() < 0) return 0;
    std::atomic<uint64_t> *c = t_rows.counts + idx;
    c->store(c->load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    return 0;
}

static uint32_t index_of(const struct kprobe *kp) noexcept
{
    return reinterpret_cast<const Probe *>(reinterpret_cast<const char *>(kp) - offsetof(Probe, kp))->index;
}

// --count's common case: this thread has its row in this session (and generation): the call
// counted there. False otherwise, nothing done.
[[gnu::always_inline]] static inline bool count_in_row(uint32_t idx) noexcept
{
    std::atomic<uint64_t> *row = t_rows.counts;
    if (row == nullptr || t_rows.generation != g_generation.load(std::memory_order_acquire)) [[unlikely]]
        return false;
    std::atomic<uint64_t> *c = row + idx;
    c->store(c->load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);  // this thread's row only
    return true;
}

int count_pre(struct kprobe *kp, struct pt_regs *) noexcept
{
    const uint32_t idx = index_of(kp);
    return count_in_row(idx) ? 0 : count_slow(idx);
}

// count_pre's light variant (core::set_light_variant), what the light entry calls: the common
// case only, which writes four caller-saved registers, so that the light entry saves only those
// (count_pre's rare case calls out, and may write any). Anything else returns 1: the hit takes
// the full entry, which runs count_pre.
int count_light(struct kprobe *kp, struct pt_regs *) noexcept { return count_in_row(index_of(kp)) ? 0 : 1; }

// The entry's stamp: the TSC read unordered when the clock is the TSC (cheaper than an ordered
// clock read by about 10 ns here), else the clock.
static uint64_t entry_stamp() noexcept { return g_tsc ? clk::tsc_unordered() : liveprobe_ktime_ns(); }

// At a return: the time now and the entry's (from its stamp), in the clock's nanoseconds. With
// the TSC, one unordered read for both: the entry is now less the cycles since the stamp.
struct ReturnTimes {
    uint64_t entry, now;
};
static ReturnTimes return_times(uint64_t stamp) noexcept
{
    if (!g_tsc) return {stamp, liveprobe_ktime_ns()};
    const uint64_t end = clk::tsc_unordered();
    const uint64_t now = clk::tsc_ns(end);
    const uint64_t d = tsc_delta_ns(stamp, end);
    return {d >= now ? 0 : now - d, now};
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

// Writes one event of `slots` records into the thread's ring: the record, then `payload` in the
// records after it. Returns false when the ring was full (counted).
static bool put_event(uint32_t idx, uint32_t slots, uint32_t tid, uint64_t entry_ns, uint64_t exit_ns, uint64_t retval,
               const unsigned char *payload, size_t bytes) noexcept
{
    const int32_t ring = ring_or_count_unringed();
    if (ring < 0) return false;
    RingHead *h = ring_head(g_base, static_cast<uint32_t>(ring));
    // No call counter: the reader counts the events it reads, and the calls are those and the
    // ones dropped here.
    uint64_t head = h->head.load(std::memory_order_relaxed);
    if (head + slots - t_rows.tail > kRingRecords) [[unlikely]] {
        t_rows.tail = h->tail.load(std::memory_order_acquire);
        if (head + slots - t_rows.tail > kRingRecords) {
            h->dropped.fetch_add(1, std::memory_order_relaxed);
            return false;
        }
    }
    Record *recs = ring_records(g_base, static_cast<uint32_t>(ring));
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

static const Probe *probe_of_kp(const struct kprobe *kp) noexcept
{
    return reinterpret_cast<const Probe *>(reinterpret_cast<const char *>(kp) - offsetof(Probe, kp));
}

// p:, FUNC+OFF: an event at the instruction, with its values.
int fetch_pre(struct kprobe *kp, struct pt_regs *regs) noexcept
{
    if (g_silent.load(std::memory_order_relaxed)) return 0;
    uint64_t now = liveprobe_ktime_ns();
    const Probe *p = probe_of_kp(kp);
    alignas(8) unsigned char payload[kMaxPayload];
    FetchContext ctx;
    ctx.regs = regs;
    fetch_all(*p->spec, ctx, payload);
    put_event(p->index, p->slots, static_cast<uint32_t>(os::raw_gettid()), now, now, regs->ip, payload,
              p->bytes);
    return 0;
}

// r:: at the return, with its values ($argN as they were at the entry).
int fetch_return(struct kretprobe_instance *ri, struct pt_regs *regs) noexcept
{
    if (g_silent.load(std::memory_order_relaxed)) return 0;
    const auto *d = reinterpret_cast<const EntryData *>(ri->data);
    const auto [entry, now] = return_times(d->entry_ns);
    const Probe *p = probe_of_rp(ri->rp);
    alignas(8) unsigned char payload[kMaxPayload];
    FetchContext ctx;
    ctx.regs = regs;
    ctx.entry = d->regs;
    fetch_all(*p->spec, ctx, payload);
    put_event(p->index, p->slots, static_cast<uint32_t>(ri->tid), entry, now, regs->ax, payload, p->bytes);
    return 0;
}

int event_return(struct kretprobe_instance *ri, struct pt_regs *regs) noexcept
{
    // regs->ax only, read first: then regs is dead before anything else runs, and the engine
    // proves that this handler uses no other field (the light return: kretprobe_trampoline.S).
    uint64_t retval = regs->ax;
    asm volatile("" : "+r"(retval));
    if (g_silent.load(std::memory_order_relaxed)) return 0;
    const auto [entry, now] = return_times(reinterpret_cast<const EntryData *>(ri->data)->entry_ns);
    put_event(index_of(ri->rp), 1, static_cast<uint32_t>(ri->tid), entry, now, retval, nullptr, 0);
    return 0;
}

// hist_return's rare cases (hist_return.S), through lp_call_keeping: no rows yet, or not any
// more (a new session, a fork: a child not followed is silent, and no handler sets its rows
// again then). The whole return, as hist_return does it; hist_return_clock's, without the TSC.
int hist_return_slow(void *arg) noexcept
{
    if (g_silent.load(std::memory_order_relaxed)) return 0;
    auto *ri = static_cast<struct kretprobe_instance *>(arg);
    uint64_t stamp = reinterpret_cast<const EntryData *>(ri->data)->entry_ns;
    uint64_t end = g_tsc ? clk::tsc_unordered() : liveprobe_ktime_ns();
    uint64_t delta = g_tsc ? tsc_delta_ns(stamp, end) : end <= stamp ? 0 : end - stamp;
    if (ring_or_count_unringed() < 0) return 0;  // my_ring() sets the rows (hists) with the ring
    hist_add(index_of(ri->rp), delta);
    return 0;
}

int hist_return_clock(struct kretprobe_instance *ri, struct pt_regs *) noexcept { return hist_return_slow(ri); }

}  // namespace liveprobe::trace
