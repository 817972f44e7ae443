// The tracer's handlers (src/trace/handlers.cpp, built with -mgeneral-regs-only) are proven free
// of vector instructions by the engine (arch::vector_free), so that a hit does not save and
// restore the thread's vector state: on this AVX-512 machine that save was a third of
// `liveprobe trace --hist '*'`'s cost on jq. A change that makes one of them call something
// the prover cannot follow (the clock's slow path calls the vDSO through a pointer) fails here.
#include <gtest/gtest.h>

#include <sys/mman.h>

#include <liveprobe/ktime.h>

#include <cstdint>
#include <new>
#include <utility>

#include "arch/x86_64/call_keeping.hpp"
#include "arch/x86_64/region.hpp"
#include "skip_if_sanitized.hpp"
#include "core/kretprobe.hpp"
#include "os/linux/clock.hpp"
#include "trace/handlers.hpp"
#include "trace/rings.hpp"
#include "trace/thread_rows.hpp"

namespace {

template <typename Fn>
void expect_proven(Fn *fn, const char *name)
{
    const char *why = nullptr;
    EXPECT_TRUE(liveprobe::arch::vector_free(reinterpret_cast<uint64_t>(fn), 2, &why)) << name << ": " << (why ? why : "");
}

// A session's shared memory for 8 probes, mapped privately and made the handlers' of a slot
// (g_slots[slot]): this thread claims a ring in it at its first event. Unmapped, and no handler
// writes into it any more, when the object goes.
struct SessionMapping {
    size_t bytes;
    void *base;
    uint32_t slot;
    explicit SessionMapping(bool hist, uint32_t slot_ = 0)
        : bytes(liveprobe::trace::names_offset(8, hist) + 4096),
          base(mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)),
          slot(slot_)
    {
        using namespace liveprobe::trace;
        if (base == MAP_FAILED) return;
        new (base) Header{};
        header_of(base)->hist = hist ? 1 : 0;
        for (uint32_t i = 0; i < kRings; ++i) new (ring_head(base, i)) RingHead{};
        g_slots[slot].base = base;
        g_slots[slot].capacity = 8;
        g_tsc = liveprobe::os::clock::is_tsc();
        g_slots[slot].generation.fetch_add(1);  // this thread claims a ring again, in this mapping
    }
    ~SessionMapping()
    {
        using namespace liveprobe::trace;
        if (base == MAP_FAILED) return;
        g_slots[slot].silent.store(true);  // nothing more into this mapping
        g_slots[slot].base = nullptr;
        munmap(base, bytes);
        g_slots[slot].generation.fetch_add(1);
        g_slots[slot].silent.store(false);
    }
    // The ring this thread claimed in it: -1 when none.
    int32_t claimed_ring() const
    {
        using namespace liveprobe::trace;
        for (uint32_t i = 0; i < kRings; ++i)
            if (ring_head(base, i)->tid.load() != 0) return static_cast<int32_t>(i);
        return -1;
    }
    SessionMapping(const SessionMapping &) = delete;
    SessionMapping &operator=(const SessionMapping &) = delete;
};

}  // namespace

TEST(TraceHandlers, EveryHandlerIsProvenVectorFree)
{
    LP_SKIP_IF_SANITIZED();
    using namespace liveprobe::trace;
    expect_proven(count_pre, "count_pre");
    expect_proven(entry_cycles, "entry_cycles");
    expect_proven(entry_regs, "entry_regs");
    expect_proven(tree_entry, "tree_entry");
    expect_proven(tree_entry_other, "tree_entry_other");
    expect_proven(tree_left, "tree_left");
    expect_proven(filter_entry, "filter_entry");
    expect_proven(count_pre_filtered, "count_pre_filtered");
    expect_proven(count_filtered, "count_filtered");
    expect_proven(hist_filtered, "hist_filtered");
    expect_proven(event_return, "event_return");
    expect_proven(hist_return, "hist_return");
    expect_proven(hist_return_clock, "hist_return_clock");
    // Called by hist_return through lp_call_keeping, which the prover takes as declared
    // vector-free without following the pointer it calls.
    expect_proven(hist_return_slow, "hist_return_slow");
    expect_proven(fetch_pre, "fetch_pre");
    expect_proven(fetch_return, "fetch_return");
    expect_proven(count_pre_other, "count_pre_other");
    expect_proven(count_light_other, "count_light_other");
    expect_proven(event_return_other, "event_return_other");
    expect_proven(hist_return_other, "hist_return_other");
    expect_proven(fetch_pre_other, "fetch_pre_other");
    expect_proven(fetch_return_other, "fetch_return_other");
}

// --count's handler takes the light entry (arch/x86_64/detour.hpp): it never reads its regs,
// and writes no callee-saved register (handlers.cpp is built with -ffixed for them), so the
// light entry saves only caller-saved registers around it.
TEST(TraceHandlers, CountHandlerTakesTheLightEntryWithCallerSavedRegistersOnly)
{
    LP_SKIP_IF_SANITIZED();
    for (auto fn : {&liveprobe::trace::count_pre, &liveprobe::trace::count_pre_other}) {
        const auto h = reinterpret_cast<uint64_t>(fn);
        const char *why = nullptr;
        EXPECT_TRUE(liveprobe::arch::ignores_second_arg(h, 2, &why)) << why;
        uint32_t writes = 0;
        ASSERT_TRUE(liveprobe::arch::vector_free(h, 2, &why, &writes)) << why;
        EXPECT_EQ(writes & ~liveprobe::arch::kCallerSavedGprs, 0u) << std::hex << writes;
    }
}

// The per-event and --hist return handlers take the light return (kretprobe_trampoline.S): they
// use no field of their regs but those it has (event_return reads ax), and write no
// callee-saved register.
TEST(TraceHandlers, ReturnHandlersTakeTheLightReturn)
{
    LP_SKIP_IF_SANITIZED();
    using namespace liveprobe::trace;
    using Handler = int (*)(struct kretprobe_instance *, struct pt_regs *) noexcept;
    for (auto [h, name] : {std::pair<Handler, const char *>{event_return, "event_return"},
                           std::pair<Handler, const char *>{event_return_other, "event_return_other"},
                           std::pair<Handler, const char *>{hist_return, "hist_return"}}) {
        const auto a = reinterpret_cast<uint64_t>(h);
        const char *why = nullptr;
        EXPECT_TRUE(liveprobe::arch::regs_fields_only(a, 2, liveprobe::core::kLightRegsFields, &why))
            << name << ": " << (why ? why : "");
        uint32_t writes = 0;
        ASSERT_TRUE(liveprobe::arch::vector_free(a, 2, &why, &writes)) << name << ": " << why;
        EXPECT_EQ(writes & ~liveprobe::arch::kCallerSavedGprs, 0u) << name << std::hex << writes;
    }
    // --hist's writes only rax, rdx, rsi and rdi and reads none of its regs: the light return
    // saves neither rcx nor r8 to r11 around it (KretState::return_few).
    {
        const auto a = reinterpret_cast<uint64_t>(&hist_return);
        const char *why = nullptr;
        EXPECT_TRUE(liveprobe::arch::regs_fields_only(a, 2, liveprobe::core::kFewRegsFields, &why)) << (why ? why : "");
        uint32_t writes = 0;
        ASSERT_TRUE(liveprobe::arch::vector_free(a, 2, &why, &writes)) << why;
        EXPECT_EQ(writes & ~liveprobe::arch::kCallKeepingWrites, 0u) << std::hex << writes;
    }
    // fetch_return reads the arguments' registers and sp (r: specs): not light.
    EXPECT_FALSE(liveprobe::arch::regs_fields_only(reinterpret_cast<uint64_t>(&fetch_return), 2,
                                                   liveprobe::core::kLightRegsFields, nullptr));
}

// A full ring drops events and counts them; once the reader has made room, the writer sees it
// (it keeps the ring's tail as last read, and reads the shared one again only when that says
// full) and writes again. Each event's times are the clock's, the entry before the return.
TEST(TraceHandlers, AFullRingDropsAndCountsThenTakesEventsOnceTheReaderMadeRoom)
{
    using namespace liveprobe::trace;
    SessionMapping m(false);
    ASSERT_NE(m.base, MAP_FAILED);
    void *base = m.base;

    Probe p;
    p.index = 3;
    alignas(16) unsigned char inst[sizeof(kretprobe_instance) + sizeof(EntryData)] = {};
    auto *ri = reinterpret_cast<kretprobe_instance *>(inst);
    ri->rp = &p.rp;
    ri->tid = 4242;
    pt_regs regs{};
    regs.ax = 17;
    auto call = [&] {
        entry_cycles(ri, &regs);
        event_return(ri, &regs);
    };
    const uint64_t before = liveprobe_ktime_ns();
    for (uint32_t k = 0; k < kRingRecords + 10; ++k) call();
    int32_t ring = -1;
    for (uint32_t i = 0; i < kRings; ++i)
        if (ring_head(base, i)->head.load() != 0) ring = static_cast<int32_t>(i);
    ASSERT_GE(ring, 0);
    RingHead *h = ring_head(base, static_cast<uint32_t>(ring));
    EXPECT_EQ(h->head.load(), kRingRecords);
    EXPECT_EQ(h->dropped.load(), 10u);
    const Record &first = ring_records(base, static_cast<uint32_t>(ring))[0];
    EXPECT_EQ(first.probe, 3u);
    EXPECT_EQ(first.tid, 4242u);
    EXPECT_EQ(first.retval, 17u);
    EXPECT_LE(first.entry_ns, first.exit_ns);
    EXPECT_GE(first.entry_ns + 1'000'000, before);  // the clock's time (within a millisecond)
    EXPECT_LE(first.exit_ns, liveprobe_ktime_ns() + 1'000'000);

    h->tail.store(100);  // the reader took 100 records
    for (int k = 0; k < 150; ++k) call();
    EXPECT_EQ(h->head.load(), kRingRecords + 100);
    EXPECT_EQ(h->dropped.load(), 60u);

}

// --hist's rows: a call lands in one bucket of its probe's row, and a bucket counts past 2^32
// (a function called 20 million times a second gets there in minutes; the tool takes the
// buckets' sum as the call count).
TEST(TraceHandlers, AHistBucketCountsPastTwoToThe32)
{
    using namespace liveprobe::trace;
    SessionMapping m(true);
    ASSERT_NE(m.base, MAP_FAILED);
    void *base = m.base;
    const auto ret = g_tsc ? hist_return : hist_return_clock;

    Probe p;
    p.index = 5;
    alignas(16) unsigned char inst[sizeof(kretprobe_instance) + sizeof(EntryData)] = {};
    auto *ri = reinterpret_cast<kretprobe_instance *>(inst);
    ri->rp = &p.rp;
    pt_regs regs{};
    entry_cycles(ri, &regs);
    ret(ri, &regs);  // the first call claims a ring (the slow path)
    int32_t ring = -1;
    for (uint32_t i = 0; i < kRings; ++i)
        if (ring_head(base, i)->tid.load() != 0) ring = static_cast<int32_t>(i);
    ASSERT_GE(ring, 0);
    auto sum = [&](uint32_t probe) {
        uint64_t n = 0;
        for (uint32_t b = 0; b < kHistBuckets; ++b) n += hist_of(base, 8, static_cast<uint32_t>(ring), probe)[b].load();
        return n;
    };
    EXPECT_EQ(sum(5), 1u);
    EXPECT_EQ(sum(4) + sum(6), 0u) << "another probe's row was written";
    std::atomic<uint64_t> *row = hist_of(base, 8, static_cast<uint32_t>(ring), 5);
    for (uint32_t b = 0; b < kHistBuckets; ++b) row[b].store(0xffffffffu);
    entry_cycles(ri, &regs);
    ret(ri, &regs);  // the common case (the thread has its rows)
    EXPECT_EQ(sum(5), uint64_t{kHistBuckets} * 0xffffffffu + 1);
    uint32_t past = 0;
    for (uint32_t b = 0; b < kHistBuckets; ++b) past += row[b].load() == uint64_t{1} << 32;
    EXPECT_EQ(past, 1u);

}

// --hist's return handler on the TSC (hist_return.S): the call's nanoseconds by the clock's
// conversion, in bucket 64 - clz (bucket b holds [2^(b-1), 2^b) ns): a stamp not earlier than
// the return is 0 ns (bucket 0); 1.5 us is bucket 11; 3 s is bucket 32; 1000 s, whose cycles
// times the rate pass 64 bits, is in the last bucket (2^39 ns on).
TEST(TraceHandlers, AHistReturnBucketsTheCallsNanoseconds)
{
    using namespace liveprobe::trace;
    namespace clk = liveprobe::os::clock;
    if (!clk::is_tsc()) GTEST_SKIP() << "the clock is not the TSC here: hist_return is not used";
    SessionMapping m(true);
    ASSERT_NE(m.base, MAP_FAILED);
    Probe p;
    p.index = 3;
    alignas(16) unsigned char inst[sizeof(kretprobe_instance) + sizeof(EntryData)] = {};
    auto *ri = reinterpret_cast<kretprobe_instance *>(inst);
    ri->rp = &p.rp;
    auto *d = reinterpret_cast<EntryData *>(ri->data);
    pt_regs regs{};
    d->entry_ns = clk::tsc_unordered();
    hist_return(ri, &regs);  // claims a ring (the slow path)
    int32_t ring = -1;
    for (uint32_t i = 0; i < kRings; ++i)
        if (ring_head(m.base, i)->tid.load() != 0) ring = static_cast<int32_t>(i);
    ASSERT_GE(ring, 0);
    std::atomic<uint64_t> *row = hist_of(m.base, 8, static_cast<uint32_t>(ring), 3);
    for (uint32_t b = 0; b < kHistBuckets; ++b) row[b].store(0);
    // The cycles of ns nanoseconds at the clock's current rate (mult: ns a cycle, 32.32).
    const uint64_t mult = clk::g_conv[clk::g_gen.load() % clk::kRing].mult.load();
    ASSERT_GT(mult, 0u);
    auto cycles_of = [&](long double ns) { return static_cast<uint64_t>(ns * 4294967296.0L / mult); };
    auto bucket_of_call = [&](uint64_t stamp) {
        d->entry_ns = stamp;
        hist_return(ri, &regs);
        int found = -1, n = 0;
        for (uint32_t b = 0; b < kHistBuckets; ++b)
            if (row[b].load()) found = static_cast<int>(b), n += static_cast<int>(row[b].load());
        for (uint32_t b = 0; b < kHistBuckets; ++b) row[b].store(0);
        return n == 1 ? found : -100 - n;
    };
    EXPECT_EQ(bucket_of_call(clk::tsc_unordered() + cycles_of(1e6)), 0) << "a stamp later than the return";
    // The handler reads the TSC a little after the stamp is made: well under 500 ns unless
    // the thread is preempted in between (one retry).
    int b11 = bucket_of_call(clk::tsc_unordered() - cycles_of(1500));
    if (b11 != 11) b11 = bucket_of_call(clk::tsc_unordered() - cycles_of(1500));
    EXPECT_EQ(b11, 11) << "1.5 us";
    EXPECT_EQ(bucket_of_call(clk::tsc_unordered() - cycles_of(3e9)), 32) << "3 s";
    // The TSC counts from boot: a stamp 1000 s old needs a machine up for that long (CI's may
    // have booted minutes ago, and a stamp "older" than the boot wraps to one later than the
    // return). Else the oldest stamp there is, the boot's: at least as old as the uptime.
    if (clk::tsc_unordered() > cycles_of(1e12))
        EXPECT_EQ(bucket_of_call(clk::tsc_unordered() - cycles_of(1e12)), static_cast<int>(kHistBuckets - 1))
            << "1000 s: the last bucket";
    else
        EXPECT_GE(bucket_of_call(1), 32) << "since the boot (more than 4.3 s ago)";
    // Another probe's row is not written.
    for (uint32_t b = 0; b < kHistBuckets; ++b)
        EXPECT_EQ(hist_of(m.base, 8, static_cast<uint32_t>(ring), 2)[b].load() +
                      hist_of(m.base, 8, static_cast<uint32_t>(ring), 4)[b].load(),
                  0u);
}


// Sessions side by side: one thread's calls into probes of two sessions, slot 0's (its
// handlers keep the thread's rows in t_rows) and another slot's (Probe::session, a ring number
// per slot), each land in that session's memory only, in every mode: events, counts and
// histograms. A new session in a slot (its generation moved) sends the thread to claim a ring
// in the new memory.
TEST(TraceHandlers, TwoSessionsEachGetOnlyTheirOwnEvents)
{
    using namespace liveprobe::trace;
    SessionMapping first(true, 0), other(true, 5);
    ASSERT_NE(first.base, MAP_FAILED);
    ASSERT_NE(other.base, MAP_FAILED);
    Probe p0, p5;
    p0.index = 1;
    p5.index = 2;
    p5.session = 5;
    alignas(16) unsigned char inst[sizeof(kretprobe_instance) + sizeof(EntryData)] = {};
    auto *ri = reinterpret_cast<kretprobe_instance *>(inst);
    pt_regs regs{};
    regs.ax = 99;
    auto call = [&](Probe &p, auto ret) {
        ri->rp = &p.rp;
        entry_cycles(ri, &regs);
        ret(ri, &regs);
    };
    for (int k = 0; k < 3; ++k) call(p0, event_return);
    for (int k = 0; k < 5; ++k) call(p5, event_return_other);
    const int32_t r0 = first.claimed_ring(), r5 = other.claimed_ring();
    ASSERT_GE(r0, 0);
    ASSERT_GE(r5, 0);
    EXPECT_EQ(ring_head(first.base, static_cast<uint32_t>(r0))->head.load(), 3u);
    EXPECT_EQ(ring_head(other.base, static_cast<uint32_t>(r5))->head.load(), 5u);
    EXPECT_EQ(ring_records(other.base, static_cast<uint32_t>(r5))[4].probe, 2u);
    EXPECT_EQ(ring_records(other.base, static_cast<uint32_t>(r5))[4].retval, 99u);

    // --count: the light variant counts once the thread has its ring in the slot.
    EXPECT_EQ(count_pre(&p0.kp, &regs), 0);
    EXPECT_EQ(count_pre_other(&p5.kp, &regs), 0);
    EXPECT_EQ(count_light_other(&p5.kp, &regs), 0);
    EXPECT_EQ(count_light(&p0.kp, &regs), 0);
    EXPECT_EQ(count_of(first.base, 8, static_cast<uint32_t>(r0), 1)->load(), 2u);
    EXPECT_EQ(count_of(other.base, 8, static_cast<uint32_t>(r5), 2)->load(), 2u);
    EXPECT_EQ(count_of(first.base, 8, static_cast<uint32_t>(r0), 2)->load() +
                  count_of(other.base, 8, static_cast<uint32_t>(r5), 1)->load(),
              0u);

    // --hist.
    auto sum = [](void *base, int32_t ring, uint32_t probe) {
        uint64_t n = 0;
        for (uint32_t b = 0; b < kHistBuckets; ++b) n += hist_of(base, 8, static_cast<uint32_t>(ring), probe)[b].load();
        return n;
    };
    for (int k = 0; k < 4; ++k) call(p5, hist_return_other);
    call(p0, hist_return_clock);
    EXPECT_EQ(sum(other.base, r5, 2), 4u);
    EXPECT_EQ(sum(first.base, r0, 1), 1u);
    EXPECT_EQ(sum(first.base, r0, 2) + sum(other.base, r5, 1), 0u);

    // A silent slot (a forked child that does not follow) writes nothing; the other goes on.
    g_slots[5].silent.store(true);
    call(p5, event_return_other);
    call(p0, event_return);
    EXPECT_EQ(ring_head(other.base, static_cast<uint32_t>(r5))->head.load(), 5u);
    EXPECT_EQ(ring_head(first.base, static_cast<uint32_t>(r0))->head.load(), 4u);
    g_slots[5].silent.store(false);

    // A new session in slot 5: the thread's next event claims a ring in its memory.
    {
        SessionMapping again(false, 5);
        ASSERT_NE(again.base, MAP_FAILED);
        call(p5, event_return_other);
        const int32_t ra = again.claimed_ring();
        ASSERT_GE(ra, 0);
        EXPECT_EQ(ring_head(again.base, static_cast<uint32_t>(ra))->head.load(), 1u);
    }
    EXPECT_EQ(ring_head(other.base, static_cast<uint32_t>(r5))->head.load(), 5u) << "the old memory was written";
}
