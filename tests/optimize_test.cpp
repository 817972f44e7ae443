// Jump-optimized probes: state and reasons, every register preserved across a mid-function
// probe whose handlers clobber vector state, threads stopped inside a region being patched,
// sleeping threads not disturbed. (Under the "noopt." prefix ctest runs this binary with
// LIVEPROBE_OPTIMIZE=0: the same checks hold on the breakpoint path.)
#include <liveprobe/kprobes.h>

#include <gtest/gtest.h>
#include <signal.h>
#include <time.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "support/asm_targets.hpp"
#include "support/optimizing.hpp"

namespace {

kprobe at(void *addr, kprobe_pre_handler_t pre = nullptr, kprobe_post_handler_t post = nullptr)
{
    kprobe kp{};
    kp.addr = static_cast<kprobe_opcode_t *>(addr);
    kp.pre_handler = pre;
    kp.post_handler = post;
    return kp;
}

std::string why(const kprobe &kp)
{
    liveprobe_info info{};
    if (liveprobe_kprobe_info(&kp, &info) != 0) return "(not registered)";
    return info.why_not_optimized ? info.why_not_optimized : "";
}

int empty_pre(kprobe *, pt_regs *) { return 0; }

TEST(Optimize, StateFlagsAndReasons)
{
    kprobe tiny{};
    tiny.symbol_name = "lp_o_tiny";
    tiny.pre_handler = empty_pre;
    ASSERT_EQ(register_kprobe(&tiny), 0) << liveprobe_strerror(-1);
    kprobe sw{};
    sw.symbol_name = "lp_o_switch";
    sw.pre_handler = empty_pre;
    ASSERT_EQ(register_kprobe(&sw), 0);
    kprobe into{};
    into.symbol_name = "lp_o_goto_into";
    into.pre_handler = empty_pre;
    ASSERT_EQ(register_kprobe(&into), 0);
    liveprobe_info info{};
    ASSERT_EQ(liveprobe_kprobe_info(&tiny, &info), 0);
    if (optimizing()) {
        // lea + ret: 5 bytes, a ret ends the region.
        EXPECT_TRUE(tiny.flags & KPROBE_FLAG_OPTIMIZED) << why(tiny);
        EXPECT_EQ(info.optimized, 1);
        EXPECT_EQ(info.why_not_optimized, nullptr);
    } else {
        EXPECT_FALSE(tiny.flags & KPROBE_FLAG_OPTIMIZED);
        EXPECT_NE(why(tiny).find("turned off"), std::string::npos) << why(tiny);
    }
    EXPECT_EQ(lp_o_tiny(41), 42);
    // A jump through a register: where it goes is computed, past the replaced bytes; nothing
    // the program stores points inside them. One that computes a target inside them is refused.
    EXPECT_EQ(static_cast<bool>(sw.flags & KPROBE_FLAG_OPTIMIZED), optimizing()) << why(sw);
    EXPECT_FALSE(into.flags & KPROBE_FLAG_OPTIMIZED);
    if (optimizing()) {
        EXPECT_NE(why(into).find("a lea at +0xc in the function computes the address of byte 2 of the region"),
                  std::string::npos)
            << why(into);
    }
    EXPECT_EQ(lp_o_switch(5), 5);
    EXPECT_EQ(lp_o_goto_into(5), 7);
    EXPECT_EQ(sw.nmissed + into.nmissed, 0u);

    // Shorter than the jump: the jmp takes the ret and a byte of the alignment padding after it,
    // and the removal puts the padding back with the rest.
    const auto *short_fn = reinterpret_cast<const unsigned char *>(&lp_o_short);
    const size_t short_span = reinterpret_cast<const unsigned char *>(&lp_o_short_after) - short_fn;
    const std::vector<unsigned char> short_before(short_fn, short_fn + short_span);
    kprobe shortp{};
    shortp.symbol_name = "lp_o_short";
    shortp.pre_handler = empty_pre;
    ASSERT_EQ(register_kprobe(&shortp), 0);
    EXPECT_EQ(static_cast<bool>(shortp.flags & KPROBE_FLAG_OPTIMIZED), optimizing()) << why(shortp);
    EXPECT_EQ(lp_o_short(9), 9);
    EXPECT_EQ(shortp.nmissed, 0u);
    unregister_kprobe(&shortp);
    EXPECT_EQ(std::vector<unsigned char>(short_fn, short_fn + short_span), short_before);

    // Turning optimization off at run time puts every probe on the breakpoint path, and on
    // again optimizes them again.
    liveprobe_set_optimization(0);
    EXPECT_FALSE(tiny.flags & KPROBE_FLAG_OPTIMIZED);
    EXPECT_EQ(*reinterpret_cast<volatile unsigned char *>(&lp_o_tiny), 0xcc);
    EXPECT_EQ(lp_o_tiny(1), 2);
    liveprobe_set_optimization(1);
    EXPECT_TRUE(tiny.flags & KPROBE_FLAG_OPTIMIZED) << why(tiny);
    EXPECT_EQ(*reinterpret_cast<volatile unsigned char *>(&lp_o_tiny), 0xe9);
    EXPECT_EQ(lp_o_tiny(2), 3);
    if (!optimizing()) liveprobe_set_optimization(0);

    unregister_kprobe(&tiny);
    unregister_kprobe(&sw);
    unregister_kprobe(&into);
    // The original bytes are back: lea 1(%rdi),%rax = 48 8d 47 01.
    EXPECT_EQ(*reinterpret_cast<volatile unsigned char *>(&lp_o_tiny), 0x48);
    EXPECT_EQ(lp_o_tiny(3), 4);
}

// A probe placed later inside the bytes an optimized probe's jmp replaced (another session's or
// module's probe a few bytes into the same function): its int3 went into the middle of the jmp
// and the next call crashed. The optimized one goes back to the breakpoint path, both count
// every call, and once the inner one goes the outer one is optimized again.
std::atomic<int> g_outer_hits{0}, g_inner_hits{0};
int count_outer(kprobe *, pt_regs *)
{
    g_outer_hits.fetch_add(1, std::memory_order_relaxed);
    return 0;
}
int count_inner(kprobe *, pt_regs *)
{
    g_inner_hits.fetch_add(1, std::memory_order_relaxed);
    return 0;
}

TEST(Optimize, AProbeInsideAnotherProbesJmpPutsThatOneBackOnTheBreakpointPath)
{
    g_outer_hits = 0;
    g_inner_hits = 0;
    kprobe outer = at(reinterpret_cast<void *>(&lp_o_tiny), count_outer);
    ASSERT_EQ(register_kprobe(&outer), 0) << liveprobe_strerror(-1);
    if (optimizing()) {
        EXPECT_TRUE(outer.flags & KPROBE_FLAG_OPTIMIZED) << why(outer);
    }
    // lp_o_tiny: lea 1(%rdi),%rax (4 bytes), ret: the inner probe on the ret, byte 4 of the jmp.
    kprobe inner = at(reinterpret_cast<char *>(&lp_o_tiny) + 4, count_inner);
    ASSERT_EQ(register_kprobe(&inner), 0) << liveprobe_strerror(-1);
    EXPECT_FALSE(outer.flags & KPROBE_FLAG_OPTIMIZED);
    if (optimizing()) {
        EXPECT_NE(why(outer).find("another probe at +4"), std::string::npos) << why(outer);
    }
    for (long i = 0; i < 1000; ++i) ASSERT_EQ(lp_o_tiny(i), i + 1);
    EXPECT_EQ(g_outer_hits.load(), 1000);
    EXPECT_EQ(g_inner_hits.load(), 1000);
    unregister_kprobe(&inner);
    if (optimizing()) {
        EXPECT_TRUE(outer.flags & KPROBE_FLAG_OPTIMIZED) << why(outer);
        EXPECT_EQ(*reinterpret_cast<volatile unsigned char *>(&lp_o_tiny), 0xe9);
    }
    for (long i = 0; i < 1000; ++i) ASSERT_EQ(lp_o_tiny(i), i + 1);
    EXPECT_EQ(g_outer_hits.load(), 2000);
    EXPECT_EQ(g_inner_hits.load(), 1000);
    unregister_kprobe(&outer);
    EXPECT_EQ(*reinterpret_cast<volatile unsigned char *>(&lp_o_tiny), 0x48);
}

// A switch's jump table: its targets are read, so the function is optimized, and one of them
// landing inside the entry's region keeps the other function on the breakpoint path.
std::atomic<int> g_table_hits{0};
int count_table(kprobe *, pt_regs *)
{
    g_table_hits.fetch_add(1, std::memory_order_relaxed);
    return 0;
}

TEST(Optimize, AFunctionWithAJumpTableIsOptimizedAndEveryCaseStillRuns)
{
    kprobe t{};
    t.symbol_name = "lp_o_table";
    t.pre_handler = count_table;
    ASSERT_EQ(register_kprobe(&t), 0) << liveprobe_strerror(-1);
    kprobe back{};
    back.symbol_name = "lp_o_table_back";
    back.pre_handler = count_table;
    ASSERT_EQ(register_kprobe(&back), 0) << liveprobe_strerror(-1);
    if (optimizing()) {
        EXPECT_TRUE(t.flags & KPROBE_FLAG_OPTIMIZED) << why(t);
        EXPECT_FALSE(back.flags & KPROBE_FLAG_OPTIMIZED);
        EXPECT_NE(why(back).find("targets byte 3 of the region"), std::string::npos) << why(back);
    }
    g_table_hits = 0;
    const long want[] = {-1, 10, 20, 30, 40, -1, -1};
    for (long x = -1; x <= 5; ++x) EXPECT_EQ(lp_o_table(x), want[x + 1]) << x;
    EXPECT_EQ(g_table_hits.load(), 7);
    EXPECT_EQ(lp_o_table_back(1), 0);
    EXPECT_EQ(lp_o_table_back(2), 0);  // case 1 jumped back into the region
    EXPECT_EQ(lp_o_table_back(5), 4);
    EXPECT_EQ(g_table_hits.load(), 10);
    unregister_kprobe(&t);
    unregister_kprobe(&back);
    EXPECT_EQ(lp_o_table(2), 30);
    EXPECT_EQ(g_table_hits.load(), 10);
}

// ---- Every register survives a probe whose handlers clobber vector state ----

std::atomic<int> g_handler_runs{0};
char g_scratch_a[4096], g_scratch_b[4096];

// Uses printf's formatting (floating point through xmm registers) and memcpy (glibc's
// AVX-512 copy here), then clobbers zmm and k registers on purpose.
__attribute__((target("avx512f"))) void clobber_everything()
{
    char buf[128];
    std::snprintf(buf, sizeof buf, "%f %g", 3.25 * g_handler_runs.load(), 1e300 / 7.0);
    void *(*volatile copy)(void *, const void *, size_t) = std::memcpy;
    copy(g_scratch_a, g_scratch_b, sizeof g_scratch_a);
    copy(g_scratch_b, buf, std::strlen(buf));
    asm volatile("vpternlogd $0xff, %%zmm0, %%zmm0, %%zmm0\n\t"
                 "vpternlogd $0xff, %%zmm16, %%zmm16, %%zmm16\n\t"
                 "vpternlogd $0xff, %%zmm31, %%zmm31, %%zmm31\n\t"
                 "kxnorq %%k1, %%k1, %%k1\n\t"
                 "kxnorq %%k7, %%k7, %%k7\n\t"
                 "vzeroupper" ::
                     : "xmm0", "xmm16", "xmm31", "k1", "k7", "memory");
}

int clobber_pre(kprobe *, pt_regs *)
{
    g_handler_runs++;
    clobber_everything();
    return 0;
}
void clobber_post(kprobe *, pt_regs *, unsigned long)
{
    g_handler_runs++;
    clobber_everything();
}

void fill_patterns()
{
    for (int i = 0; i < 2048; ++i) lp_o_pat_z[i] = static_cast<unsigned char>(i * 37 + 11);
    for (int i = 0; i < 15; ++i) lp_o_pat_g[i] = 0x0101010101010101ul * (i + 1) ^ 0x8000000000000000ul;
    for (int i = 0; i < 8; ++i) lp_o_pat_k[i] = 0x1111111111111111ul * (i + 1);
    lp_o_pat_flags = 0x8d5 | 0x2;  // CF PF AF ZF SF OF
    std::memset(lp_o_dump_z, 0, sizeof lp_o_dump_z);
    std::memset(lp_o_dump_g, 0, sizeof lp_o_dump_g);
    std::memset(lp_o_dump_k, 0, sizeof lp_o_dump_k);
    lp_o_dump_flags = 0;
}

void expect_all_preserved(bool flags = true)
{
    static const char *names[15] = {"rax", "rbx", "rcx", "rdx", "rsi", "rdi", "rbp", "r8",
                                    "r9",  "r10", "r11", "r12", "r13", "r14", "r15"};
    for (int i = 0; i < 15; ++i) EXPECT_EQ(lp_o_dump_g[i], lp_o_pat_g[i]) << names[i];
    if (flags) {
        EXPECT_EQ(lp_o_dump_flags & 0xcd5, lp_o_pat_flags & 0xcd5) << "flags (and DF clear)";
    }
    for (int r = 0; r < 32; ++r)
        EXPECT_EQ(std::memcmp(lp_o_dump_z + 64 * r, lp_o_pat_z + 64 * r, 64), 0) << "zmm" << r;
    for (int k = 1; k < 8; ++k) EXPECT_EQ(lp_o_dump_k[k], lp_o_pat_k[k]) << "k" << k;
}

TEST(Optimize, MidFunctionProbePreservesEveryRegister)
{
    if (!__builtin_cpu_supports("avx512f")) {
        GTEST_SKIP() << "this CPU has no AVX-512: lp_o_regs needs it";
    }
    fill_patterns();
    lp_o_regs();
    expect_all_preserved();  // the harness itself, without a probe

    kprobe kp = at(lp_o_regs_probe, clobber_pre, clobber_post);
    ASSERT_EQ(register_kprobe(&kp), 0) << liveprobe_strerror(-1);
    if (optimizing()) {
        ASSERT_TRUE(kp.flags & KPROBE_FLAG_OPTIMIZED) << why(kp);
    }
    g_handler_runs = 0;
    fill_patterns();
    lp_o_regs();
    EXPECT_EQ(g_handler_runs.load(), 2);
    expect_all_preserved();
    unregister_kprobe(&kp);
}

// A return probe on a function that touches no register (a caller built with -fipa-ra may keep
// values in call-clobbered registers across such a call): every register but the flags, which
// no return carries, comes back as it went in. With a return handler that only counts (the
// light return: the trampoline saves the caller-saved registers only), and with one that wrecks
// every register it may and uses the vector registers (the full return).
int count_kret(kretprobe_instance *, pt_regs *)
{
    g_handler_runs++;
    return 0;
}
int clobber_kret(kretprobe_instance *, pt_regs *)
{
    g_handler_runs++;
    clobber_everything();
    return 0;
}

TEST(Optimize, ReturnProbePreservesEveryRegisterButTheFlags)
{
    if (!__builtin_cpu_supports("avx512f")) {
        GTEST_SKIP() << "this CPU has no AVX-512: lp_o_call_regs needs it";
    }
    for (kretprobe_handler_t h : {count_kret, clobber_kret}) {
        SCOPED_TRACE(h == count_kret ? "counting return handler" : "clobbering return handler");
        kretprobe rp{};
        rp.kp.addr = reinterpret_cast<kprobe_opcode_t *>(&lp_o_leaf);
        rp.entry_handler = h == count_kret ? nullptr : clobber_kret;
        rp.handler = h;
        ASSERT_EQ(register_kretprobe(&rp), 0) << liveprobe_strerror(-1);
        g_handler_runs = 0;
        for (int round = 0; round < 3; ++round) {
            fill_patterns();
            lp_o_call_regs();
            expect_all_preserved(false);
        }
        EXPECT_EQ(g_handler_runs.load(), h == count_kret ? 3 : 6);
        EXPECT_EQ(rp.nmissed, 0);
        unregister_kretprobe(&rp);
    }
}

// The light kretprobe paths save only what they and the handlers write: the entry five
// registers and the entry handler's, the return rax rdx rsi rdi rbx rbp and, when the return
// handler may write or read them, rcx and r8 to r11 (or when a C function runs: a call
// entered while another holds the cached instance, which goes back to C at the return). With
// no handlers, handlers that write only what a counter does, and handlers that write rcx and
// r8 to r11, on one call and on two nested ones: every register but the flags comes back, and
// every handler ran.
TEST(Optimize, ReturnProbesSaveWhatTheirHandlersWriteAndEveryRegisterComesBack)
{
    if (!__builtin_cpu_supports("avx512f")) {
        GTEST_SKIP() << "this CPU has no AVX-512: lp_o_call_regs needs it";
    }
    const auto r8_r11 = reinterpret_cast<kretprobe_handler_t>(&lp_t_r8_r11);
    struct Case {
        const char *name;
        kretprobe_handler_t entry, ret;
    } cases[] = {
        {"no handlers", nullptr, nullptr},
        {"counting handlers", count_kret, count_kret},
        {"handlers writing rcx and r8 to r11", r8_r11, r8_r11},
        {"a counting entry handler, a return handler writing r8 to r11", count_kret, r8_r11},
        {"an entry handler writing r8 to r11, a counting return handler", r8_r11, count_kret},
    };
    for (bool nested : {false, true}) {
        for (const Case &c : cases) {
            SCOPED_TRACE(std::string(c.name) + (nested ? ", nested calls" : ", one call"));
            kretprobe rp{};
            rp.kp.addr = reinterpret_cast<kprobe_opcode_t *>(nested ? &lp_o_nest : &lp_o_leaf);
            rp.entry_handler = c.entry;
            rp.handler = c.ret;
            ASSERT_EQ(register_kretprobe(&rp), 0) << liveprobe_strerror(-1);
            if (optimizing()) {
                ASSERT_TRUE(rp.kp.flags & KPROBE_FLAG_OPTIMIZED) << why(rp.kp);
            }
            g_handler_runs = 0;
            lp_t_r8_r11_runs = 0;
            for (int round = 0; round < 3; ++round) {
                fill_patterns();
                nested ? lp_o_call_nested() : lp_o_call_regs();
                expect_all_preserved(false);
            }
            const int calls = nested ? 6 : 3;
            const int counted = (c.entry == count_kret) + (c.ret == count_kret);
            const int r8_runs = (c.entry == r8_r11) + (c.ret == r8_r11);
            EXPECT_EQ(g_handler_runs.load(), counted * calls);
            EXPECT_EQ(lp_t_r8_r11_runs, r8_runs * calls);
            EXPECT_EQ(rp.nmissed, 0);
            unregister_kretprobe(&rp);
        }
    }
}

// A handler that wrecks every register, callee-saved ones included, and then faults: the
// program still gets all of its registers back, the fault handler sees the probe's registers,
// and the next hit runs the handler again (nothing of the abandoned hit is left behind).
unsigned long g_fault_regs_ip = 0;
std::atomic<int> g_clobber_faults{0};
int count_clobber_fault(kprobe *, pt_regs *regs, int trapnr)
{
    if (trapnr == SIGSEGV) g_clobber_faults++;
    g_fault_regs_ip = regs->ip;
    return 0;
}

TEST(Optimize, HandlerFaultAfterWreckingEveryRegisterLeavesTheProgramIntact)
{
    if (!__builtin_cpu_supports("avx512f")) {
        GTEST_SKIP() << "this CPU has no AVX-512: lp_o_regs needs it";
    }
    kprobe kp = at(lp_o_regs_probe, lp_t_clobber_fault, nullptr);
    kp.fault_handler = count_clobber_fault;
    ASSERT_EQ(register_kprobe(&kp), 0) << liveprobe_strerror(-1);
    if (optimizing()) {
        ASSERT_TRUE(kp.flags & KPROBE_FLAG_OPTIMIZED) << why(kp);
    }
    g_clobber_faults = 0;
    for (int round = 0; round < 3; ++round) {
        fill_patterns();
        lp_o_regs();
        expect_all_preserved();
    }
    EXPECT_EQ(g_clobber_faults.load(), 3);
    EXPECT_EQ(g_fault_regs_ip, reinterpret_cast<unsigned long>(lp_o_regs_probe));
    EXPECT_EQ(liveprobe_kprobe_faults(&kp), 3u);
    liveprobe_info info{};
    ASSERT_EQ(liveprobe_kprobe_info(&kp, &info), 0);
    EXPECT_EQ(info.hits, 3u);
    unregister_kprobe(&kp);
}

// A kretprobe on lp_o_leaf whose entry handler, then whose return handler, is `wreck` (it
// clobbers registers and faults): three calls of lp_o_call_regs get every register back, each
// fault is counted, and no instance is lost (maxactive 1: one not given back shows as nmissed).
void expect_kret_faults_harmless(kretprobe_handler_t wreck)
{
    for (bool at_entry : {true, false}) {
        SCOPED_TRACE(at_entry ? "entry handler" : "return handler");
        kretprobe rp{};
        rp.kp.addr = reinterpret_cast<kprobe_opcode_t *>(&lp_o_leaf);
        rp.entry_handler = at_entry ? wreck : nullptr;
        rp.handler = at_entry ? nullptr : wreck;
        rp.maxactive = 1;
        ASSERT_EQ(register_kretprobe(&rp), 0) << liveprobe_strerror(-1);
        if (optimizing()) {
            ASSERT_TRUE(rp.kp.flags & KPROBE_FLAG_OPTIMIZED) << why(rp.kp);
        }
        for (int round = 0; round < 3; ++round) {
            fill_patterns();
            lp_o_call_regs();
            expect_all_preserved(false);
        }
        EXPECT_EQ(liveprobe_kprobe_faults(&rp.kp), 3u);
        EXPECT_EQ(rp.nmissed, 0);
        unregister_kretprobe(&rp);
    }
}

// The same for a kretprobe's handlers: an entry handler, then a return handler, that wrecks
// every general register (callee-saved ones included) and faults. The light entry runs the
// entry handler through lp_kret_call_saving, which restores the callee-saved registers after the
// fault; the return handler's fault is recovered from on whichever return path it takes.
TEST(Optimize, KretprobeHandlersThatWreckEveryRegisterAndFaultLeaveTheProgramIntact)
{
    if (!__builtin_cpu_supports("avx512f")) {
        GTEST_SKIP() << "this CPU has no AVX-512: lp_o_call_regs needs it";
    }
    expect_kret_faults_harmless(reinterpret_cast<kretprobe_handler_t>(&lp_t_clobber_fault));
}

// A kretprobe handler that writes rbp, or rbp and rbx, and no other callee-saved register (as
// a frame-pointer build's does, or one that keeps a value across a call), and faults: the light
// paths call it themselves, saving those two, and restore them after the fault. Both handlers
// take the light paths.
TEST(Optimize, KretprobeHandlersThatWreckRbpAndFaultLeaveTheProgramIntact)
{
    if (!__builtin_cpu_supports("avx512f")) {
        GTEST_SKIP() << "this CPU has no AVX-512: lp_o_call_regs needs it";
    }
    {
        SCOPED_TRACE("rbp");
        expect_kret_faults_harmless(reinterpret_cast<kretprobe_handler_t>(&lp_t_rbp_fault));
    }
    SCOPED_TRACE("rbx and rbp");
    expect_kret_faults_harmless(reinterpret_cast<kretprobe_handler_t>(&lp_t_rbx_rbp_fault));
}

// The detour restores the six arithmetic flags without popfq, and takes popfq when DF (or
// TF, NT, AC, ID) is involved: every pattern of them comes back exactly, on both paths.
TEST(Optimize, EveryFlagsPatternComesBackExactly)
{
    if (!__builtin_cpu_supports("avx512f")) {
        GTEST_SKIP() << "this CPU has no AVX-512: lp_o_regs needs it";
    }
    kprobe kp = at(lp_o_regs_probe, clobber_pre, clobber_post);
    ASSERT_EQ(register_kprobe(&kp), 0) << liveprobe_strerror(-1);
    if (optimizing()) {
        ASSERT_TRUE(kp.flags & KPROBE_FLAG_OPTIMIZED) << why(kp);
    }
    const unsigned long arith[] = {0x1, 0x4, 0x10, 0x40, 0x80, 0x800};  // CF PF AF ZF SF OF
    for (unsigned long df : {0ul, 0x400ul}) {
        for (unsigned mask = 0; mask < 64; ++mask) {
            fill_patterns();
            unsigned long f = 0x2 | df;
            for (int b = 0; b < 6; ++b)
                if (mask & (1u << b)) f |= arith[b];
            lp_o_pat_flags = f;
            g_handler_runs = 0;
            lp_o_regs();
            ASSERT_EQ(g_handler_runs.load(), 2);
            ASSERT_EQ(lp_o_dump_flags & 0xcd5, f & 0xcd5) << std::hex << "flags " << f;
        }
    }
    unregister_kprobe(&kp);
}

unsigned long g_flags_set, g_flags_clear;
int flags_changing_pre(kprobe *, pt_regs *regs)
{
    regs->flags = (regs->flags | g_flags_set) & ~g_flags_clear;
    return 0;
}

// A pre handler's change to regs->flags takes effect, arithmetic flags and DF alike.
TEST(Optimize, PreHandlerFlagsChangesTakeEffect)
{
    if (!__builtin_cpu_supports("avx512f")) {
        GTEST_SKIP() << "this CPU has no AVX-512: lp_o_regs needs it";
    }
    kprobe kp = at(lp_o_regs_probe, flags_changing_pre);
    ASSERT_EQ(register_kprobe(&kp), 0) << liveprobe_strerror(-1);
    if (optimizing()) {
        ASSERT_TRUE(kp.flags & KPROBE_FLAG_OPTIMIZED) << why(kp);
    }
    struct Case {
        unsigned long pat, set, clear, want;
    } cases[] = {
        {0x2, 0x801, 0, 0x803},            // set CF and OF
        {0x8d7, 0, 0x8d5, 0x2},            // clear all six
        {0x2, 0x400, 0, 0x402},            // set DF (slow path)
        {0x402 | 0x41, 0, 0x400, 0x43},    // clear DF, keep CF ZF
    };
    for (const Case &c : cases) {
        fill_patterns();
        lp_o_pat_flags = c.pat;
        g_flags_set = c.set;
        g_flags_clear = c.clear;
        lp_o_regs();
        EXPECT_EQ(lp_o_dump_flags & 0xcd5, c.want & 0xcd5) << std::hex << "pattern " << c.pat;
        for (int i = 0; i < 15; ++i) EXPECT_EQ(lp_o_dump_g[i], lp_o_pat_g[i]);
    }
    unregister_kprobe(&kp);
}

// ---- Threads inside a region while it is patched ----

TEST(Optimize, ThreadsStoppedInsideTheRegionResumeCorrectly)
{
    // Three threads spin through the probed region (more threads than cores); the region is
    // optimized and taken out 300 times. A thread stopped between the two replaced adds must
    // be moved to the detour's copy, or it would resume inside the jmp.
    std::atomic<char> stop{0};
    std::vector<std::thread> spinners;
    std::atomic<long> bad{0}, total{0};
    for (int t = 0; t < 3; ++t)
        spinners.emplace_back([&] {
            long n = lp_o_loop(reinterpret_cast<volatile char *>(&stop));
            if (n < 0) bad++;  // rcx did not come back to 0: an instruction ran twice or never
            total += n;
        });
    for (int round = 0; round < 300; ++round) {
        kprobe kp = at(lp_o_loop_probe, empty_pre);
        kp.flags = KPROBE_FLAG_NOVEC;
        ASSERT_EQ(register_kprobe(&kp), 0) << liveprobe_strerror(-1);
        if (optimizing()) {
            ASSERT_TRUE(kp.flags & KPROBE_FLAG_OPTIMIZED) << why(kp);
        }
        unregister_kprobe(&kp);
    }
    stop = 1;
    for (auto &t : spinners) t.join();
    EXPECT_EQ(bad.load(), 0);
    EXPECT_GT(total.load(), 0);
}

TEST(Optimize, SleepingThreadSeesNoEintrWhilePatching)
{
    std::atomic<bool> done{false};
    std::atomic<int> eintr{0}, sleeps{0};
    std::thread sleeper([&] {
        while (!done.load()) {
            timespec ts{0, 20 * 1000 * 1000};
            if (nanosleep(&ts, nullptr) != 0 && errno == EINTR) eintr++;
            timespec ts2{0, 5 * 1000 * 1000};
            int rc = clock_nanosleep(CLOCK_MONOTONIC, 0, &ts2, nullptr);
            if (rc == EINTR) eintr++;
            sleeps++;
        }
    });
    for (int round = 0; round < 200; ++round) {
        kprobe kp{};
        kp.symbol_name = "lp_o_tiny";
        kp.pre_handler = empty_pre;
        ASSERT_EQ(register_kprobe(&kp), 0);
        unregister_kprobe(&kp);
    }
    done = true;
    sleeper.join();
    EXPECT_EQ(eintr.load(), 0);
    EXPECT_GT(sleeps.load(), 0);
}

}  // namespace
