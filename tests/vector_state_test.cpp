// Vector, x87 and floating-point control state across probe hits whose handlers use them.
// The jump path saves what XINUSE says is in use with register moves (or XSAVE, under the
// "xsave." prefix: LIVEPROBE_VECTOR_SAVE=xsave); the breakpoint path ("noopt.") gets it from
// the kernel's signal frame. Every variant must give the program back exactly what it had,
// initial-state tracking included.
#include <liveprobe/kprobes.h>

#include <cpuid.h>
#include <fenv.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "support/asm_targets.hpp"
#include "support/optimizing.hpp"

namespace {

std::atomic<int> g_runs{0};
char g_src[4096], g_dst[4096];

bool has_xinuse()
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_OSXSAVE) || !(c & bit_AVX)) return false;
    __cpuid_count(0xd, 1, a, b, c, d);
    return a & (1u << 2);
}

kprobe at(void *addr, kprobe_pre_handler_t pre)
{
    kprobe kp{};
    kp.addr = static_cast<kprobe_opcode_t *>(addr);
    kp.pre_handler = pre;
    return kp;
}

void expect_optimized(const kprobe &kp)
{
    if (!optimizing()) return;
    liveprobe_info info{};
    ASSERT_EQ(liveprobe_kprobe_info(&kp, &info), 0);
    EXPECT_TRUE(kp.flags & KPROBE_FLAG_OPTIMIZED)
        << (info.why_not_optimized ? info.why_not_optimized : "");
}

__attribute__((target("avx2"))) void dirty_avx()
{
    asm volatile("vpcmpeqd %%ymm0, %%ymm0, %%ymm0\n\t"
                 "vpcmpeqd %%ymm7, %%ymm7, %%ymm7\n\t"
                 "vpcmpeqd %%ymm15, %%ymm15, %%ymm15" ::
                     : "xmm0", "xmm7", "xmm15");
}

__attribute__((target("avx512f"))) void dirty_avx512()
{
    asm volatile("vpternlogd $0xff, %%zmm1, %%zmm1, %%zmm1\n\t"
                 "vpternlogd $0xff, %%zmm16, %%zmm16, %%zmm16\n\t"
                 "kxnorw %%k3, %%k3, %%k3" ::
                     : "xmm1", "xmm16", "k3");
}

// Leaves ymm/zmm upper halves dirty on purpose (no vzeroupper), and copies with glibc.
int dirtying_pre(kprobe *, pt_regs *)
{
    g_runs++;
    void *(*volatile copy)(void *, const void *, size_t) = std::memcpy;
    copy(g_dst, g_src, sizeof g_dst);
    if (__builtin_cpu_supports("avx512f")) dirty_avx512();
    dirty_avx();
    return 0;
}

TEST(VectorState, CleanUpperStateStaysCleanAndXmmComesBack)
{
    if (!has_xinuse()) GTEST_SKIP() << "no AVX or no XGETBV with ECX=1 on this CPU";
    for (int i = 0; i < 256; ++i) lp_v_pat[i] = static_cast<unsigned char>(i * 7 + 3);
    unsigned long before = lp_v_clean();
    if (before & 0x44) GTEST_SKIP() << "the upper state is not clean even without a probe";

    kprobe kp = at(lp_v_clean_probe, dirtying_pre);
    ASSERT_EQ(register_kprobe(&kp), 0) << liveprobe_strerror(-1);
    expect_optimized(kp);
    g_runs = 0;
    std::memset(lp_v_dump, 0, sizeof lp_v_dump);
    unsigned long after = lp_v_clean();
    EXPECT_EQ(g_runs.load(), 1);
    EXPECT_EQ(after & 0x44, 0u) << std::hex << "XINUSE " << after
                                << ": the handler's ymm/zmm state leaked into the program";
    EXPECT_EQ(std::memcmp(lp_v_dump, lp_v_pat, sizeof lp_v_pat), 0) << "xmm0-15";
    unregister_kprobe(&kp);
}

// Pushes eight values on the x87 stack and pops them: with two registers already in use by
// the program, the pushes overflow onto them unless they were saved.
int x87_pre(kprobe *, pt_regs *)
{
    g_runs++;
    asm volatile("fldz; fld1; fldz; fld1; fldz; fld1; fldz; fld1\n\t"
                 "fstp %%st(0); fstp %%st(0); fstp %%st(0); fstp %%st(0)\n\t"
                 "fstp %%st(0); fstp %%st(0); fstp %%st(0); fstp %%st(0)" ::
                     : "st", "st(1)", "st(2)", "st(3)", "st(4)", "st(5)", "st(6)", "st(7)");
    return 0;
}

TEST(VectorState, X87StackInUseSurvivesAHandlerUsingX87)
{
    EXPECT_EQ(lp_v_x87(), 3.75);
    kprobe kp = at(lp_v_x87_probe, x87_pre);
    ASSERT_EQ(register_kprobe(&kp), 0) << liveprobe_strerror(-1);
    expect_optimized(kp);
    g_runs = 0;
    EXPECT_EQ(lp_v_x87(), 3.75) << "the program's x87 registers were clobbered";
    EXPECT_EQ(g_runs.load(), 1);
    unregister_kprobe(&kp);
}

volatile double g_d3 = 3.0;
volatile long double g_ld3 = 3.0L;
volatile double g_dout;
volatile long double g_ldout;

// Changes the rounding modes of both units and raises inexact in both.
int fp_env_pre(kprobe *, pt_regs *)
{
    g_runs++;
    unsigned mxcsr;
    asm volatile("stmxcsr %0" : "=m"(mxcsr));
    mxcsr = (mxcsr & ~0x6000u) | 0x4000u;  // round up
    asm volatile("ldmxcsr %0" ::"m"(mxcsr));
    unsigned short cw;
    asm volatile("fnstcw %0" : "=m"(cw));
    cw = static_cast<unsigned short>((cw & ~0x0c00) | 0x0800);  // round up
    asm volatile("fldcw %0" ::"m"(cw));
    g_dout = 1.0 / g_d3;
    g_ldout = 1.0L / g_ld3;
    return 0;
}

TEST(VectorState, RoundingModesAndExceptionFlagsComeBack)
{
    kprobe kp = at(lp_v_nop_probe, fp_env_pre);
    ASSERT_EQ(register_kprobe(&kp), 0) << liveprobe_strerror(-1);
    expect_optimized(kp);
    g_runs = 0;
    feclearexcept(FE_ALL_EXCEPT);
    unsigned mx_before, mx_after;
    unsigned short cw_before, cw_after;
    asm volatile("stmxcsr %0" : "=m"(mx_before));
    asm volatile("fnstcw %0" : "=m"(cw_before));
    lp_v_nop();
    asm volatile("stmxcsr %0" : "=m"(mx_after));
    asm volatile("fnstcw %0" : "=m"(cw_after));
    int raised = fetestexcept(FE_ALL_EXCEPT);
    EXPECT_EQ(g_runs.load(), 1);
    EXPECT_EQ(mx_after, mx_before) << "MXCSR";
    EXPECT_EQ(cw_after, cw_before) << "x87 control word";
    EXPECT_EQ(raised, 0) << "exception flags raised by the handler leaked into the program";
    EXPECT_EQ(fegetround(), FE_TONEAREST);
    unregister_kprobe(&kp);
}

}  // namespace
