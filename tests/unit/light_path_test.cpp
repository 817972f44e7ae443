// The light entry of jump-optimized probes (src/arch/x86_64/detour.hpp, jump_light.S): a
// point whose one kprobe has only a pre handler proven never to read its regs and to touch no
// vector state saves only the registers the light dispatcher and that handler write.
//
// White-box: the registry says which probes take it (core::probe_counters), so each test
// checks that the path it is about is the one that ran. The targets and some handlers are
// assembly, so that every general register and flag can be checked around a hit.
#include <gtest/gtest.h>
#include <liveprobe/kprobes.h>

#include <x86intrin.h>

#include <atomic>
#include <cstdint>
#include <cerrno>
#include <cstring>
#include <thread>

#include "arch/x86_64/jump_light.hpp"
#include "arch/x86_64/region.hpp"
#include "core/kretprobe.hpp"
#include "core/probe.hpp"
#include "core/registry.hpp"
#include "core/thread_state.hpp"
#include "skip_if_sanitized.hpp"

// In a library of their own (tests/unit/light_targets.S): liveprobe refuses probes in the
// object it is linked into, and this test links the engine's objects.
extern "C" {
// What lp_l_regs loads into every general register but rsp (in the order rax rbx rcx rdx rsi
// rdi rbp r8 ... r15) and into the flags before its probe point (pat, pat_flags), and what it
// found there after (dump, dump_flags).
struct LightData {
    uint64_t pat[15], dump[15], pat_flags, dump_flags;
};
LightData *lp_l_data();
long lp_l_target(long);
long lp_l_target2(long);
void lp_l_regs();
void *lp_l_regs_probe();  // where lp_l_regs gets probed
int lp_l_clobber(struct kprobe *, struct pt_regs *);
int lp_l_clobber_fault(struct kprobe *, struct pt_regs *);
// A handler calling lp_l_target2(1); what that returned.
int lp_l_nest(struct kprobe *, struct pt_regs *);
long lp_l_nest_result();
}

namespace {

std::atomic<long> g_hits{0};
std::atomic<unsigned long> g_di{0};

int count_hit(kprobe *, pt_regs *)
{
    g_hits.fetch_add(1, std::memory_order_relaxed);
    return 0;
}

int read_di(kprobe *, pt_regs *regs)
{
    g_di = regs->di;
    return 0;
}

kprobe at(void *addr, kprobe_pre_handler_t pre)
{
    kprobe kp{};
    kp.addr = static_cast<kprobe_opcode_t *>(addr);
    kp.pre_handler = pre;
    return kp;
}

liveprobe::core::ProbeCounters counters(const kprobe &kp)
{
    liveprobe::core::ProbeCounters c;
    EXPECT_TRUE(liveprobe::core::probe_counters(&kp, &c));
    return c;
}

void fill(uint64_t flags)
{
    LightData *d = lp_l_data();
    for (int i = 0; i < 15; ++i) d->pat[i] = 0x0101010101010101ul * (i + 1) ^ 0x8000000000000000ul;
    d->pat_flags = flags | 0x2;
    std::memset(d->dump, 0, sizeof d->dump);
    d->dump_flags = 0;
}

void expect_all_back(const char *what)
{
    static const char *names[15] = {"rax", "rbx", "rcx", "rdx", "rsi", "rdi", "rbp", "r8",
                                    "r9",  "r10", "r11", "r12", "r13", "r14", "r15"};
    const LightData *d = lp_l_data();
    for (int i = 0; i < 15; ++i) EXPECT_EQ(d->dump[i], d->pat[i]) << names[i] << " after " << what;
    // CF PF AF ZF SF OF and DF (lp_l_regs clears DF after its dump).
    EXPECT_EQ(d->dump_flags & 0xcd5, d->pat_flags & 0xcd5) << "flags after " << what;
}

TEST(LightPath, TakenByAHandlerThatIgnoresRegsOnly)
{
    LP_SKIP_IF_SANITIZED();
    kprobe a = at(reinterpret_cast<void *>(lp_l_target), count_hit);
    kprobe b = at(reinterpret_cast<void *>(lp_l_target2), read_di);
    ASSERT_EQ(register_kprobe(&a), 0) << liveprobe_strerror(-EINVAL);
    ASSERT_EQ(register_kprobe(&b), 0) << liveprobe_strerror(-EINVAL);
    ASSERT_TRUE(counters(a).optimized) << counters(a).why_not;
    ASSERT_TRUE(counters(b).optimized) << counters(b).why_not;
    EXPECT_TRUE(counters(a).light);
    EXPECT_FALSE(counters(b).light);  // it reads regs->di: the full path builds them
    g_hits = 0;
    EXPECT_EQ(lp_l_target(41), 42);
    EXPECT_EQ(lp_l_target2(40), 42);
    EXPECT_EQ(g_hits.load(), 1);
    EXPECT_EQ(g_di.load(), 40u);
    EXPECT_EQ(counters(a).hits, 1u);
    EXPECT_EQ(counters(b).hits, 1u);
    unregister_kprobe(&a);
    unregister_kprobe(&b);
}

TEST(LightPath, EveryRegisterAndFlagComesBack)
{
    LP_SKIP_IF_SANITIZED();
    for (kprobe_pre_handler_t h : {count_hit, lp_l_clobber}) {
        kprobe kp = at(lp_l_regs_probe(), h);
        ASSERT_EQ(register_kprobe(&kp), 0) << liveprobe_strerror(-EINVAL);
        ASSERT_TRUE(counters(kp).light) << (counters(kp).why_not ? counters(kp).why_not : "optimized");
        // Every arithmetic flag set, none, and each alone; DF set takes the full path.
        for (uint64_t flags : {0x0ul, 0x8d5ul, 0x1ul, 0x4ul, 0x10ul, 0x40ul, 0x80ul, 0x800ul, 0x400ul, 0xcd5ul}) {
            fill(flags);
            lp_l_regs();
            expect_all_back(h == count_hit ? "a counting handler" : "a handler writing every register");
        }
        EXPECT_EQ(counters(kp).hits, 10u);
        unregister_kprobe(&kp);
    }
}

TEST(LightPath, FaultAfterWreckingEveryRegisterLeavesTheProgramIntact)
{
    LP_SKIP_IF_SANITIZED();
    kprobe kp = at(lp_l_regs_probe(), lp_l_clobber_fault);
    ASSERT_EQ(register_kprobe(&kp), 0) << liveprobe_strerror(-EINVAL);
    ASSERT_TRUE(counters(kp).light);
    for (int round = 0; round < 3; ++round) {
        fill(0x8d5);
        lp_l_regs();
        expect_all_back("a handler that wrecked every register and faulted");
    }
    EXPECT_EQ(counters(kp).faults, 3u);
    EXPECT_EQ(counters(kp).hits, 3u);
    unregister_kprobe(&kp);
}

TEST(LightPath, AnotherKprobeAtThePointTakesTheFullPathWhileItIsThere)
{
    LP_SKIP_IF_SANITIZED();
    kprobe a = at(reinterpret_cast<void *>(lp_l_target), count_hit);
    kprobe b = at(reinterpret_cast<void *>(lp_l_target), read_di);
    ASSERT_EQ(register_kprobe(&a), 0) << liveprobe_strerror(-EINVAL);
    ASSERT_TRUE(counters(a).light);
    ASSERT_EQ(register_kprobe(&b), 0) << liveprobe_strerror(-EINVAL);
    EXPECT_FALSE(counters(a).light);
    EXPECT_FALSE(counters(b).light);
    g_hits = 0;
    g_di = 0;
    EXPECT_EQ(lp_l_target(7), 8);
    EXPECT_EQ(g_hits.load(), 1);
    EXPECT_EQ(g_di.load(), 7u);
    unregister_kprobe(&b);
    EXPECT_TRUE(counters(a).light);
    EXPECT_EQ(lp_l_target(8), 9);
    EXPECT_EQ(g_hits.load(), 2);
    EXPECT_EQ(g_di.load(), 7u);
    // Disabled, it runs nothing on the light path either.
    ASSERT_EQ(disable_kprobe(&a), 0);
    EXPECT_EQ(lp_l_target(9), 10);
    EXPECT_EQ(g_hits.load(), 2);
    ASSERT_EQ(enable_kprobe(&a), 0);
    EXPECT_EQ(lp_l_target(9), 10);
    EXPECT_EQ(g_hits.load(), 3);
    unregister_kprobe(&a);
}

// A kretprobe's light entry (lp_kret_light_pre): taken when its entry handler ignores regs and
// is vector-free; the return value, the data, the counts and an entry handler's faults are as on
// the full entry, which a handler reading regs still takes.
std::atomic<long> g_entries{0}, g_returns{0}, g_entry_calls{0};
int *volatile g_null = nullptr;

int light_entry(kretprobe_instance *ri, pt_regs *)
{
    *reinterpret_cast<long *>(ri->data) = g_entries.fetch_add(1, std::memory_order_relaxed) + 1000;
    return 0;
}

int faulting_light_entry(kretprobe_instance *ri, pt_regs *)
{
    if (g_entry_calls.fetch_add(1, std::memory_order_relaxed) % 2) *g_null = 1;  // SIGSEGV
    *reinterpret_cast<long *>(ri->data) = g_entries.fetch_add(1, std::memory_order_relaxed) + 1000;
    return 0;
}

int declining_light_entry(kretprobe_instance *, pt_regs *)
{
    return g_entry_calls.fetch_add(1, std::memory_order_relaxed) % 2;
}

int regs_entry(kretprobe_instance *ri, pt_regs *regs)
{
    *reinterpret_cast<long *>(ri->data) = static_cast<long>(regs->di) + 1000;
    g_entries.fetch_add(1, std::memory_order_relaxed);
    return 0;
}

std::atomic<long> g_data_ok{0};
int check_return(kretprobe_instance *ri, pt_regs *regs)
{
    // lp_l_target returns its argument + 1; the entry handler left 1000 + something.
    if (regs_return_value(regs) > 0) g_returns.fetch_add(1, std::memory_order_relaxed);
    if (*reinterpret_cast<long *>(ri->data) >= 1000) g_data_ok.fetch_add(1, std::memory_order_relaxed);
    return 0;
}

kretprobe kret_at(void *addr, kretprobe_handler_t entry)
{
    kretprobe rp{};
    rp.kp.addr = static_cast<kprobe_opcode_t *>(addr);
    rp.entry_handler = entry;
    rp.handler = check_return;
    rp.data_size = sizeof(long);
    rp.maxactive = 4;
    return rp;
}

TEST(LightPath, AKretprobeWhoseEntryHandlerIgnoresRegsTakesIt)
{
    LP_SKIP_IF_SANITIZED();
    for (kretprobe_handler_t entry : {light_entry, static_cast<kretprobe_handler_t>(nullptr)}) {
        kretprobe rp = kret_at(reinterpret_cast<void *>(lp_l_target), entry);
        ASSERT_EQ(register_kretprobe(&rp), 0) << liveprobe_strerror(-EINVAL);
        ASSERT_TRUE(counters(rp.kp).optimized) << counters(rp.kp).why_not;
        EXPECT_TRUE(counters(rp.kp).light);
        g_entries = 0;
        g_returns = 0;
        g_data_ok = 0;
        for (long i = 0; i < 100; ++i) ASSERT_EQ(lp_l_target(i), i + 1);
        EXPECT_EQ(g_entries.load(), entry ? 100 : 0);
        EXPECT_EQ(g_returns.load(), 100);
        if (entry) {
            EXPECT_EQ(g_data_ok.load(), 100);
        }
        EXPECT_EQ(counters(rp.kp).hits, 100u);
        EXPECT_EQ(rp.nmissed, 0);
        unregister_kretprobe(&rp);
    }
    kretprobe full = kret_at(reinterpret_cast<void *>(lp_l_target), regs_entry);
    ASSERT_EQ(register_kretprobe(&full), 0) << liveprobe_strerror(-EINVAL);
    EXPECT_FALSE(counters(full.kp).light);
    g_entries = 0;
    g_returns = 0;
    for (long i = 1; i <= 10; ++i) ASSERT_EQ(lp_l_target(i), i + 1);
    EXPECT_EQ(g_entries.load(), 10);
    EXPECT_EQ(g_returns.load(), 10);
    unregister_kretprobe(&full);
}

TEST(LightPath, AKretprobeEntryHandlerThatFaultsOrDeclinesGivesItsInstanceBack)
{
    LP_SKIP_IF_SANITIZED();
    kretprobe rp = kret_at(reinterpret_cast<void *>(lp_l_target), faulting_light_entry);
    rp.maxactive = 1;  // a lost instance would show as nmissed at once
    ASSERT_EQ(register_kretprobe(&rp), 0) << liveprobe_strerror(-EINVAL);
    ASSERT_TRUE(counters(rp.kp).light) << counters(rp.kp).why_not;
    g_entries = 0;
    g_returns = 0;
    g_entry_calls = 0;
    for (long i = 1; i <= 100; ++i) ASSERT_EQ(lp_l_target(i), i + 1);
    EXPECT_EQ(g_entries.load(), 50);
    EXPECT_EQ(g_returns.load(), 50) << "a call whose entry handler faulted has no return handler";
    EXPECT_EQ(rp.kp.nmissed, 0);
    EXPECT_EQ(counters(rp.kp).faults, 50u);
    EXPECT_EQ(counters(rp.kp).hits, 100u);
    EXPECT_EQ(rp.nmissed, 0);
    unregister_kretprobe(&rp);

    kretprobe d = kret_at(reinterpret_cast<void *>(lp_l_target), declining_light_entry);
    d.maxactive = 1;
    ASSERT_EQ(register_kretprobe(&d), 0) << liveprobe_strerror(-EINVAL);
    ASSERT_TRUE(counters(d.kp).light) << counters(d.kp).why_not;
    g_returns = 0;
    g_entry_calls = 0;
    for (long i = 1; i <= 100; ++i) ASSERT_EQ(lp_l_target(i), i + 1);
    EXPECT_EQ(g_returns.load(), 50) << "declined calls have no return handler";
    EXPECT_EQ(d.nmissed, 0);
    unregister_kretprobe(&d);
}

// A kprobe and a kretprobe share a point, and then the first one leaves: the one that stays
// runs exactly once per call, whichever detour now serves the point. The kprobe's handler calls
// a function (its light entry saves every caller-saved register); a kretprobe's light entry
// (lp_kret_light_entry) checks that the point's light kprobe is still a kretprobe before doing
// a kretprobe's work, and otherwise runs that kprobe's handler.
__attribute__((noinline)) void count_through_a_call() { g_hits.fetch_add(1, std::memory_order_relaxed); }
int calling_hit(kprobe *, pt_regs *)
{
    count_through_a_call();
    return 0;
}

TEST(LightPath, AKprobeAndAKretprobeShareAPointAndTheOneThatStaysRunsOncePerCall)
{
    LP_SKIP_IF_SANITIZED();
    for (bool kprobe_first : {true, false}) {
        SCOPED_TRACE(kprobe_first ? "the kprobe's detour" : "the kretprobe's detour");
        kprobe a = at(reinterpret_cast<void *>(lp_l_target), calling_hit);
        kretprobe k = kret_at(reinterpret_cast<void *>(lp_l_target), light_entry);
        if (kprobe_first) {
            ASSERT_EQ(register_kprobe(&a), 0) << liveprobe_strerror(-EINVAL);
            ASSERT_TRUE(counters(a).light) << counters(a).why_not;
            ASSERT_EQ(register_kretprobe(&k), 0) << liveprobe_strerror(-EINVAL);
            unregister_kprobe(&a);
        } else {
            ASSERT_EQ(register_kretprobe(&k), 0) << liveprobe_strerror(-EINVAL);
            ASSERT_TRUE(counters(k.kp).light) << counters(k.kp).why_not;
            ASSERT_EQ(register_kprobe(&a), 0) << liveprobe_strerror(-EINVAL);
            unregister_kretprobe(&k);
        }
        g_hits = 0;
        g_entries = 0;
        g_returns = 0;
        for (long i = 0; i < 10; ++i) ASSERT_EQ(lp_l_target(i), i + 1);
        if (kprobe_first) {
            EXPECT_EQ(g_entries.load(), 10);
            EXPECT_EQ(g_returns.load(), 10);
            EXPECT_EQ(counters(k.kp).hits, 10u);
            EXPECT_EQ(k.nmissed, 0);
            unregister_kretprobe(&k);
        } else {
            EXPECT_EQ(g_hits.load(), 10);
            EXPECT_EQ(counters(a).hits, 10u);
            unregister_kprobe(&a);
        }
    }
}

// KPROBE_FLAG_NOVEC on a kretprobe is its caller's word that the handlers never touch vector
// registers: no vector state is saved around ones the prover cannot follow (a call through a
// pointer), as for a kprobe. Without it they get it saved; with KPROBE_FLAG_FPREGS too.
long (*volatile g_through_a_pointer)(long) = lp_l_target;
int unprovable_handler(kretprobe_instance *, pt_regs *)
{
    return g_through_a_pointer(1) == 2 ? 0 : 1;
}

TEST(LightPath, AKretprobeDeclaredNovecSavesNoVectorState)
{
    LP_SKIP_IF_SANITIZED();
    const unsigned int novec = KPROBE_FLAG_NOVEC, fpregs = KPROBE_FLAG_FPREGS;
    for (unsigned int flags : {0u, novec, novec | fpregs}) {
        SCOPED_TRACE(flags);
        kretprobe rp{};
        rp.kp.addr = reinterpret_cast<kprobe_opcode_t *>(&lp_l_target2);
        rp.kp.flags = flags;
        rp.entry_handler = unprovable_handler;
        rp.handler = unprovable_handler;
        rp.unwind_handler = unprovable_handler;
        const long want = lp_l_target2(4);
        ASSERT_EQ(register_kretprobe(&rp), 0) << liveprobe_strerror(-EINVAL);
        const auto *ks = reinterpret_cast<const liveprobe::core::KretState *>(rp.kp.__lp_reserved[0]);
        ASSERT_NE(ks, nullptr);
        const bool saved = flags != novec;
        EXPECT_EQ(ks->entry_vec, saved);
        EXPECT_EQ(ks->return_vec, saved);
        EXPECT_EQ(ks->unwind_vec, saved);
        EXPECT_EQ(lp_l_target2(4), want);
        unregister_kretprobe(&rp);
    }
}

// The light entry saves what the dispatcher says it writes: decoded, the assembly agrees (a
// call through a pointer, the handler's, counts for nothing: handlers are proven apart).
TEST(LightPath, TheDispatcherWritesWhatItDeclares)
{
    using namespace liveprobe::arch;
    for (void (*fn)() : {lp_light_entry, lp_light_mid, lp_light_entry_fenced, lp_light_mid_fenced})
        EXPECT_EQ(function_writes(reinterpret_cast<uint64_t>(fn)), light_dispatcher_writes());
}

// A light handler whose callee hits another light probe: that hit is the full entry's (the
// thread is in a handler), a miss; the outer hit is counted once.
// Probes registered under UncountedRegistrations (liveprobe trace's) run their handlers on
// both paths but write no hit counter: their hits read 0, and the per-thread counter stays as
// it was; a probe registered after the scope counts again.
TEST(LightPath, AnUncountedProbeRunsItsHandlerWithoutCountingHits)
{
    LP_SKIP_IF_SANITIZED();
    kprobe kp = at(reinterpret_cast<void *>(lp_l_target), count_hit);
    {
        liveprobe::core::UncountedRegistrations uncounted;
        ASSERT_EQ(register_kprobe(&kp), 0) << liveprobe_strerror(-EINVAL);
    }
    ASSERT_TRUE(counters(kp).light) << counters(kp).why_not;
    const uint32_t id = static_cast<const liveprobe::core::KprobeState *>(kp.__lp_state)->id;
    const uint64_t before = liveprobe::core::sum_counter(id);
    g_hits = 0;
    for (long i = 0; i < 100; ++i) ASSERT_EQ(lp_l_target(i), i + 1);
    liveprobe_set_optimization(0);  // and on the breakpoint path
    unregister_kprobe(&kp);
    kprobe slow = at(reinterpret_cast<void *>(lp_l_target), count_hit);
    {
        liveprobe::core::UncountedRegistrations uncounted;
        ASSERT_EQ(register_kprobe(&slow), 0) << liveprobe_strerror(-EINVAL);
    }
    EXPECT_FALSE(counters(slow).optimized);
    const uint32_t slow_id = static_cast<const liveprobe::core::KprobeState *>(slow.__lp_state)->id;
    const uint64_t slow_before = liveprobe::core::sum_counter(slow_id);
    for (long i = 0; i < 10; ++i) EXPECT_EQ(lp_l_target(i), i + 1);
    EXPECT_EQ(g_hits.load(), 110);
    EXPECT_EQ(counters(slow).hits, 0u);
    EXPECT_FALSE(counters(slow).counted);
    EXPECT_EQ(liveprobe::core::sum_counter(slow_id), slow_before);
    unregister_kprobe(&slow);
    liveprobe_set_optimization(1);
    EXPECT_EQ(liveprobe::core::sum_counter(id), before) << "the light path wrote the counter";

    kprobe counted = at(reinterpret_cast<void *>(lp_l_target), count_hit);
    ASSERT_EQ(register_kprobe(&counted), 0) << liveprobe_strerror(-EINVAL);
    for (long i = 0; i < 10; ++i) ASSERT_EQ(lp_l_target(i), i + 1);
    EXPECT_TRUE(counters(counted).counted);
    EXPECT_EQ(counters(counted).hits, 10u);
    unregister_kprobe(&counted);
}

// A pre handler's light variant (set_light_variant) runs on the light entry in its place; when
// it returns non-zero, the hit takes the full entry and the pre handler runs there: every hit
// is handled exactly once, by one of the two.
std::atomic<int> g_variant_calls{0}, g_variant_done{0}, g_full_done{0};
int variant_full(kprobe *, pt_regs *)
{
    g_full_done.fetch_add(1, std::memory_order_relaxed);
    return 0;
}
int variant_light(kprobe *, pt_regs *)
{
    if (g_variant_calls.fetch_add(1, std::memory_order_relaxed) % 2) return 1;  // to the full entry
    g_variant_done.fetch_add(1, std::memory_order_relaxed);
    return 0;
}

TEST(LightPath, ALightVariantThatDeclinesSendsTheHitToThePreHandler)
{
    LP_SKIP_IF_SANITIZED();
    liveprobe::core::set_light_variant(variant_full, variant_light);
    kprobe kp = at(reinterpret_cast<void *>(lp_l_target), variant_full);
    {
        liveprobe::core::UncountedRegistrations uncounted;  // as the tracer's (see registry.hpp)
        ASSERT_EQ(register_kprobe(&kp), 0) << liveprobe_strerror(-EINVAL);
    }
    ASSERT_TRUE(counters(kp).light) << counters(kp).why_not;
    g_variant_calls = 0;
    g_variant_done = 0;
    g_full_done = 0;
    for (long i = 0; i < 100; ++i) ASSERT_EQ(lp_l_target(i), i + 1);
    EXPECT_EQ(g_variant_done.load(), 50);
    EXPECT_EQ(g_full_done.load(), 50);
    unregister_kprobe(&kp);
}

// The registered TSC stamp (set_kret_entry_stamp): once the thread's instance cache is warm,
// the light entry stores the stamp itself, without calling the entry handler; the return
// handler finds a TSC value read during the call.
std::atomic<int> g_stamp_calls{0}, g_stamp_ok{0}, g_stamp_returns{0};
uint64_t g_stamp_lo;
int tsc_stamp(kretprobe_instance *ri, pt_regs *)
{
    *reinterpret_cast<uint64_t *>(ri->data) = __rdtsc();
    g_stamp_calls.fetch_add(1, std::memory_order_relaxed);
    return 0;
}
int check_stamp(kretprobe_instance *ri, pt_regs *)
{
    const uint64_t t = *reinterpret_cast<const uint64_t *>(ri->data);
    if (t >= g_stamp_lo && t <= __rdtsc()) g_stamp_ok.fetch_add(1, std::memory_order_relaxed);
    g_stamp_returns.fetch_add(1, std::memory_order_relaxed);
    return 0;
}

kretprobe stamp_kret()
{
    kretprobe rp{};
    rp.kp.addr = reinterpret_cast<kprobe_opcode_t *>(lp_l_target);
    rp.entry_handler = tsc_stamp;
    rp.handler = check_stamp;
    rp.data_size = sizeof(uint64_t);
    return rp;
}

TEST(LightPath, TheRegisteredTscStampIsStoredByTheLightEntryItself)
{
    LP_SKIP_IF_SANITIZED();
    liveprobe::core::set_kret_entry_stamp(tsc_stamp);
    kretprobe rp = stamp_kret();
    ASSERT_EQ(register_kretprobe(&rp), 0) << liveprobe_strerror(-EINVAL);
    liveprobe::core::set_kret_entry_stamp(nullptr);
    ASSERT_TRUE(counters(rp.kp).light) << counters(rp.kp).why_not;
    for (long i = 0; i < 10; ++i) ASSERT_EQ(lp_l_target(i), i + 1);  // the cache warms up
    g_stamp_calls = 0;
    g_stamp_ok = 0;
    g_stamp_returns = 0;
    g_stamp_lo = __rdtsc();
    for (long i = 0; i < 100; ++i) ASSERT_EQ(lp_l_target(i), i + 1);
    EXPECT_EQ(g_stamp_calls.load(), 0) << "the entry handler was called";
    EXPECT_EQ(g_stamp_returns.load(), 100);
    EXPECT_EQ(g_stamp_ok.load(), 100);
    unregister_kretprobe(&rp);

    // Registered without the stamp set: the entry handler runs.
    kretprobe plain = stamp_kret();
    ASSERT_EQ(register_kretprobe(&plain), 0) << liveprobe_strerror(-EINVAL);
    g_stamp_calls = 0;
    for (long i = 0; i < 10; ++i) ASSERT_EQ(lp_l_target(i), i + 1);
    EXPECT_EQ(g_stamp_calls.load(), 10);
    unregister_kretprobe(&plain);
}

TEST(LightPath, AHitInsideALightHandlerIsMissed)
{
    LP_SKIP_IF_SANITIZED();
    kprobe inner = at(reinterpret_cast<void *>(lp_l_target2), count_hit);
    kprobe outer = at(reinterpret_cast<void *>(lp_l_target), lp_l_nest);
    // The outer one first: its handler's callee is decoded before a jmp replaces its start.
    ASSERT_EQ(register_kprobe(&outer), 0);
    ASSERT_EQ(register_kprobe(&inner), 0);
    ASSERT_TRUE(counters(inner).light) << counters(inner).why_not;
    ASSERT_TRUE(counters(outer).light) << counters(outer).why_not;
    g_hits = 0;
    EXPECT_EQ(lp_l_target(1), 2);
    EXPECT_EQ(lp_l_nest_result(), 3);
    EXPECT_EQ(g_hits.load(), 0);  // the inner handler did not run
    EXPECT_EQ(counters(outer).hits, 1u);
    EXPECT_EQ(counters(inner).hits, 0u);
    EXPECT_EQ(inner.nmissed, 1u);
    // Outside any handler, the inner probe runs.
    EXPECT_EQ(lp_l_target2(1), 3);
    EXPECT_EQ(g_hits.load(), 1);
    EXPECT_EQ(counters(inner).hits, 1u);
    unregister_kprobe(&outer);
    unregister_kprobe(&inner);
}

// A thread's first hit finds no record: the light dispatcher takes nothing and returns past
// the light entry's finish into the full entry, which claims one; its next hits are light.
TEST(LightPath, AThreadsFirstHitGoesThroughTheFullEntry)
{
    LP_SKIP_IF_SANITIZED();
    kprobe kp = at(reinterpret_cast<void *>(lp_l_target), count_hit);
    ASSERT_EQ(register_kprobe(&kp), 0);
    ASSERT_TRUE(counters(kp).light);
    g_hits = 0;
    long r1 = 0, r2 = 0;
    std::thread t([&] {
        r1 = lp_l_target(10);
        r2 = lp_l_target(20);
    });
    t.join();
    EXPECT_EQ(r1, 11);
    EXPECT_EQ(r2, 21);
    EXPECT_EQ(g_hits.load(), 2);
    EXPECT_EQ(counters(kp).hits, 2u);
    EXPECT_EQ(kp.nmissed, 0u);
    unregister_kprobe(&kp);
}

}  // namespace
