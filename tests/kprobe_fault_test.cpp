// Faults and signals (API.md "fault_handler", DESIGN.md "Known traps: Signals"): a faulting
// handler never kills the program; a fault of the probed instruction itself is the program's;
// the program's own signal handlers keep working; SIGTRAP cannot be blocked away.
#include <liveprobe/kprobes.h>

#include <gtest/gtest.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <thread>

#include "support/asm_targets.hpp"

namespace {

extern "C" __attribute__((noinline)) int lp_f_work(int x)
{
    asm volatile("");
    return x + 1;
}

std::atomic<int> g_fault_calls{0};
int g_fault_trapnr = 0;
unsigned long g_fault_ip[2];

// The faults go through asm_targets.S, so the compiler (and UBSan) cannot see them coming.
int null_deref_pre(kprobe *, pt_regs *)
{
    return static_cast<int>(lp_t_load(nullptr));  // SIGSEGV inside the handler
}
void null_deref_post(kprobe *, pt_regs *, unsigned long) { lp_t_load(nullptr); }
int record_fault(kprobe *, pt_regs *regs, int trapnr)
{
    g_fault_calls++;
    if (g_fault_calls <= 2) g_fault_ip[g_fault_calls - 1] = regs->ip;
    g_fault_trapnr = trapnr;
    return 0;
}

TEST(KprobeFault, NullDerefInHandlerWithFaultHandler)
{
    kprobe kp{};
    kp.symbol_name = "lp_f_work";
    kp.pre_handler = null_deref_pre;
    kp.post_handler = null_deref_post;
    kp.fault_handler = record_fault;
    ASSERT_EQ(register_kprobe(&kp), 0);
    g_fault_calls = 0;
    for (int i = 0; i < 100; ++i) ASSERT_EQ(lp_f_work(i), i + 1);
    EXPECT_EQ(g_fault_calls.load(), 200);  // pre and post fault on each of the 100 calls
    EXPECT_EQ(g_fault_trapnr, SIGSEGV);
    // The fault handler gets the registers of the faulting handler: the pre handler's
    // (ip = the probed address), then the post handler's (ip = the next instruction).
    EXPECT_EQ(g_fault_ip[0], reinterpret_cast<unsigned long>(&lp_f_work));
    EXPECT_GT(g_fault_ip[1], reinterpret_cast<unsigned long>(&lp_f_work));
    EXPECT_LT(g_fault_ip[1], reinterpret_cast<unsigned long>(&lp_f_work) + 16);
    EXPECT_EQ(liveprobe_kprobe_faults(&kp), 200u);
    unregister_kprobe(&kp);
}

TEST(KprobeFault, NullDerefInHandlerWithoutFaultHandler)
{
    kprobe kp{};
    kp.symbol_name = "lp_f_work";
    kp.pre_handler = null_deref_pre;
    ASSERT_EQ(register_kprobe(&kp), 0);
    for (int i = 0; i < 100; ++i) ASSERT_EQ(lp_f_work(i), i + 1);
    EXPECT_EQ(liveprobe_kprobe_faults(&kp), 100u);
    liveprobe_info info{};
    ASSERT_EQ(liveprobe_kprobe_info(&kp, &info), 0);
    EXPECT_EQ(info.hits, 100u);
    unregister_kprobe(&kp);
}

int faulting_fault_handler(kprobe *, pt_regs *, int)
{
    g_fault_calls++;
    return static_cast<int>(lp_t_load(nullptr));  // the fault handler faults too: abandoned
}

int divide_by_zero_pre(kprobe *, pt_regs *r)
{
    return static_cast<int>(lp_t_div(10, static_cast<long>(r->di - r->di)));  // SIGFPE
}

TEST(KprobeFault, FaultingFaultHandlerAndSigfpe)
{
    kprobe kp{};
    kp.symbol_name = "lp_f_work";
    kp.pre_handler = divide_by_zero_pre;
    kp.fault_handler = faulting_fault_handler;
    ASSERT_EQ(register_kprobe(&kp), 0);
    g_fault_calls = 0;
    EXPECT_EQ(lp_f_work(1), 2);
    EXPECT_EQ(lp_f_work(2), 3);
    EXPECT_EQ(g_fault_calls.load(), 2);
    unregister_kprobe(&kp);
}

// A handler that faults while the thread blocks SIGSEGV: still caught, not a kill.
TEST(KprobeFault, HandlerFaultWhileProgramBlocksSigsegv)
{
    kprobe kp{};
    kp.symbol_name = "lp_f_work";
    kp.pre_handler = null_deref_pre;
    ASSERT_EQ(register_kprobe(&kp), 0);
    std::thread t([] {
        sigset_t all;
        sigfillset(&all);
        pthread_sigmask(SIG_BLOCK, &all, nullptr);
        for (int i = 0; i < 10; ++i) EXPECT_EQ(lp_f_work(i), i + 1);
    });
    t.join();
    EXPECT_EQ(liveprobe_kprobe_faults(&kp), 10u);
    unregister_kprobe(&kp);
}

// The same on the jump path (lp_t_ret42's mov is optimizable): handlers run in the thread's
// own context there, not in a signal handler.
TEST(KprobeFault, JumpPathHandlerFaultWhileProgramBlocksAllSignals)
{
    kprobe kp{};
    kp.addr = reinterpret_cast<kprobe_opcode_t *>(lp_t_ret42_mov);
    kp.pre_handler = null_deref_pre;
    ASSERT_EQ(register_kprobe(&kp), 0);
    std::thread t([] {
        sigset_t all;
        sigfillset(&all);
        pthread_sigmask(SIG_BLOCK, &all, nullptr);
        for (int i = 0; i < 10; ++i) EXPECT_EQ(lp_t_ret42(), 42);
    });
    t.join();
    EXPECT_EQ(liveprobe_kprobe_faults(&kp), 10u);
    unregister_kprobe(&kp);
}

// ---- A fault of the probed instruction itself is the program's ----

sigjmp_buf g_jump;
unsigned long g_segv_ip;
void *g_segv_addr;
int g_segv_count;

void program_segv_handler(int, siginfo_t *si, void *ctx)
{
    auto *uc = static_cast<ucontext_t *>(ctx);
    g_segv_ip = uc->uc_mcontext.gregs[REG_RIP];
    g_segv_addr = si->si_addr;
    g_segv_count++;
    siglongjmp(g_jump, 1);
}

std::atomic<int> g_load_pre{0};
int count_load_pre(kprobe *, pt_regs *)
{
    g_load_pre++;
    return 0;
}

TEST(KprobeFault, ProbedInstructionFaultReachesProgramHandlerAtOriginalAddress)
{
    kprobe kp{};
    kp.addr = reinterpret_cast<kprobe_opcode_t *>(lp_t_load_mov);
    kp.pre_handler = count_load_pre;
    kp.post_handler = [](kprobe *, pt_regs *, unsigned long) {};
    ASSERT_EQ(register_kprobe(&kp), 0);
    // Installed after liveprobe's own: sigaction() is interposed and the handler is chained.
    struct sigaction act{}, old{};
    act.sa_sigaction = program_segv_handler;
    act.sa_flags = SA_SIGINFO;
    ASSERT_EQ(sigaction(SIGSEGV, &act, &old), 0);
    long good = 99;
    EXPECT_EQ(lp_t_load(&good), 99);
    g_segv_count = 0;
    if (sigsetjmp(g_jump, 1) == 0) {
        lp_t_load(reinterpret_cast<const long *>(0x10));
        ADD_FAILURE() << "the load should have faulted";
    }
    EXPECT_EQ(g_segv_count, 1);
    EXPECT_EQ(g_segv_ip, reinterpret_cast<unsigned long>(lp_t_load_mov));
    EXPECT_EQ(g_segv_addr, reinterpret_cast<void *>(0x10));
    EXPECT_EQ(g_load_pre.load(), 2);
    // The program sees its own action when it asks.
    struct sigaction now{};
    sigaction(SIGSEGV, nullptr, &now);
    EXPECT_EQ(now.sa_sigaction, program_segv_handler);
    sigaction(SIGSEGV, &old, nullptr);
    unregister_kprobe(&kp);
}

TEST(KprobeFault, ProbedInstructionFaultWithDefaultActionKillsWithThatSignal)
{
    kprobe kp{};
    kp.addr = reinterpret_cast<kprobe_opcode_t *>(lp_t_load_mov);
    kp.pre_handler = count_load_pre;
    ASSERT_EQ(register_kprobe(&kp), 0);
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGSEGV, SIG_DFL);
        lp_t_load(reinterpret_cast<const long *>(0x10));
        _exit(0);
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFSIGNALED(status));
    EXPECT_EQ(WTERMSIG(status), SIGSEGV);
    unregister_kprobe(&kp);
}

// ---- The program's own int3 and SIGTRAP are not liveprobe's ----

int g_program_traps;
void program_trap_handler(int) { g_program_traps++; }

TEST(KprobeSignals, ProgramOwnSigtrapStillReachesItsHandler)
{
    kprobe kp{};
    kp.symbol_name = "lp_f_work";
    kp.pre_handler = count_load_pre;
    ASSERT_EQ(register_kprobe(&kp), 0);
    signal(SIGTRAP, program_trap_handler);
    g_program_traps = 0;
    asm volatile("int3");
    raise(SIGTRAP);
    EXPECT_EQ(g_program_traps, 2);
    g_load_pre = 0;
    EXPECT_EQ(lp_f_work(1), 2);
    EXPECT_EQ(g_load_pre.load(), 1);
    signal(SIGTRAP, SIG_DFL);
    unregister_kprobe(&kp);
}

TEST(KprobeSignals, ThreadThatBlocksAllSignalsStillHitsProbes)
{
    kprobe kp{};
    kp.symbol_name = "lp_f_work";
    kp.pre_handler = count_load_pre;
    ASSERT_EQ(register_kprobe(&kp), 0);
    g_load_pre = 0;
    std::thread t([] {
        sigset_t all, now;
        sigfillset(&all);
        ASSERT_EQ(pthread_sigmask(SIG_BLOCK, &all, nullptr), 0);
        ASSERT_EQ(sigprocmask(SIG_SETMASK, &all, nullptr), 0);
        pthread_sigmask(SIG_BLOCK, nullptr, &now);
        EXPECT_TRUE(sigismember(&now, SIGUSR1)) << "the rest of the mask is the program's";
        for (int i = 0; i < 1000; ++i) EXPECT_EQ(lp_f_work(i), i + 1);
    });
    t.join();
    EXPECT_EQ(g_load_pre.load(), 1000);
    unregister_kprobe(&kp);
}

// ---- fork ----

std::atomic<int> g_child_hits{0};
int child_pre(kprobe *, pt_regs *)
{
    g_child_hits++;
    return 0;
}

TEST(KprobeFork, ProbesKeepWorkingInAForkChild)
{
    kprobe kp{};
    kp.symbol_name = "lp_f_work";
    kp.pre_handler = child_pre;
    ASSERT_EQ(register_kprobe(&kp), 0);
    g_child_hits = 0;
    pid_t pid = fork();
    if (pid == 0) {
        int ok = 1;
        for (int i = 0; i < 10; ++i) ok &= lp_f_work(i) == i + 1;
        ok &= g_child_hits.load() == 10;
        // New probes and unregistering in the child write the child's code, not the parent's.
        kprobe other{};
        other.addr = reinterpret_cast<kprobe_opcode_t *>(lp_t_ret42_mov);
        other.pre_handler = child_pre;
        ok &= register_kprobe(&other) == 0;
        ok &= lp_t_ret42() == 42;
        ok &= g_child_hits.load() == 11;
        unregister_kprobe(&other);
        unregister_kprobe(&kp);
        ok &= lp_f_work(1) == 2 && g_child_hits.load() == 11;
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0);
    // The parent still has its probe and the child's probe never reached it.
    EXPECT_EQ(g_child_hits.load(), 0);
    EXPECT_EQ(lp_f_work(1), 2);
    EXPECT_EQ(g_child_hits.load(), 1);
    EXPECT_EQ(*reinterpret_cast<volatile unsigned char *>(lp_t_ret42_mov), 0xb8);
    unregister_kprobe(&kp);
}

}  // namespace
