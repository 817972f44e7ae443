// A program's signal handler that leaves by siglongjmp while a probe handler was running under
// it (a SIGALRM timeout, a SIGSEGV recovery): the probe handler's frame is gone without
// returning. The thread must go on hitting its probes, and unregistering must not wait for the
// abandoned hit (its "busy" publication) forever. Both entry paths; a kretprobe's return
// handler too. Each case runs in a child, killed after 30 s, so that a hang fails, not blocks.
#include <liveprobe/kprobes.h>

#include <gtest/gtest.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sys/time.h>

#include <atomic>
#include <cstdlib>
#include <thread>

#include "support/asm_targets.hpp"

namespace {

sigjmp_buf g_out;
std::atomic<int> g_runs{0};
std::atomic<bool> g_leave{false};

void leave_by_longjmp(int) { siglongjmp(g_out, 1); }

// The probe's handler: while g_leave, raises SIGUSR1, whose handler longjmps out of it.
int raising_pre(kprobe *, pt_regs *)
{
    g_runs++;
    if (g_leave.load()) raise(SIGUSR1);
    return 0;
}
int raising_ret(kretprobe_instance *, pt_regs *)
{
    g_runs++;
    if (g_leave.load()) raise(SIGUSR1);
    return 0;
}

// The same left by an asynchronous signal: a handler that spins until SIGALRM (a 2 ms timer)
// arrives and its handler longjmps out. Written to be light (no call, no vector instruction,
// regs unread): the light entry's and the light return's own frames are abandoned.
volatile int g_spin_until = 0;
int spinning_pre(kprobe *, pt_regs *)
{
    g_runs.fetch_add(1, std::memory_order_relaxed);
    while (g_spin_until) {
    }
    return 0;
}
int spinning_ret(kretprobe_instance *, pt_regs *)
{
    g_runs.fetch_add(1, std::memory_order_relaxed);
    while (g_spin_until) {
    }
    return 0;
}
void arm_timer()
{
    itimerval t{};
    t.it_value.tv_usec = 2000;
    setitimer(ITIMER_REAL, &t, nullptr);
}

// Unregisters from another thread: one that waits for this thread's busy publications to go,
// which an abandoned hit left behind until this thread's next hit set them back.
template <typename Fn>
void from_another_thread(Fn fn)
{
    std::thread t(fn);
    t.join();
}

// Runs body in a child, killed if it takes more than 30 s (a hang); the child's exit status is
// body's failures.
template <typename Body>
void in_child(Body body)
{
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) _exit(body());
    int status = 0;
    bool hung = true;
    for (int waited_ms = 0; waited_ms < 30000; waited_ms += 10) {
        if (waitpid(pid, &status, WNOHANG) == pid) {
            hung = false;
            break;
        }
        usleep(10000);
    }
    if (hung) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        FAIL() << "the child hung (killed after 30 s)";
    }
    ASSERT_TRUE(WIFEXITED(status)) << "the child was killed by signal " << WTERMSIG(status);
    EXPECT_EQ(WEXITSTATUS(status), 0) << "failed checks in the child (see its messages)";
}

int check(bool ok, const char *what)
{
    if (!ok) std::fprintf(stderr, "child: FAILED: %s\n", what);
    return ok ? 0 : 1;
}

// lp_t_ret42's handler left by the SIGUSR1 it raises, `leaves` times, then normal calls.
int left_by_raise(int leaves)
{
    int bad = 0;
    g_leave = true;
    for (int i = 0; i < leaves; ++i)
        if (sigsetjmp(g_out, 1) == 0) {
            lp_t_ret42();
            bad += check(false, "the handler's signal should have left the call");
        }
    g_leave = false;
    g_runs = 0;
    for (int i = 0; i < 5; ++i) bad += check(lp_t_ret42() == 42, "the function's result");
    bad += check(g_runs.load() == 5, "the handler runs again on this thread after the longjmps");
    return bad;
}

int kprobe_case(bool optimize)
{
    liveprobe_set_optimization(optimize);
    signal(SIGUSR1, leave_by_longjmp);
    kprobe kp{};
    kp.addr = reinterpret_cast<kprobe_opcode_t *>(lp_t_ret42_mov);
    kp.pre_handler = raising_pre;
    if (register_kprobe(&kp) != 0) return check(false, "register_kprobe");
    int bad = check(((kp.flags & KPROBE_FLAG_OPTIMIZED) != 0) == optimize, "the path asked for");
    bad += left_by_raise(3);
    from_another_thread([&] { unregister_kprobe(&kp); });  // must return
    bad += check(lp_t_ret42() == 42, "the function after unregistering");
    return bad;
}

// Left by a timer's SIGALRM while spinning, `leaves` times, then normal calls.
template <typename Call>
int left_by_timer(Call call, int leaves)
{
    int bad = 0;
    signal(SIGALRM, leave_by_longjmp);
    for (int i = 0; i < leaves; ++i) {
        g_spin_until = 1;
        if (sigsetjmp(g_out, 1) == 0) {
            arm_timer();
            call();
            bad += check(false, "the timer's signal should have left the call");
        }
    }
    g_spin_until = 0;
    signal(SIGALRM, SIG_DFL);
    g_runs = 0;
    for (int i = 0; i < 5; ++i) bad += check(call() == 42, "the function's result");
    bad += check(g_runs.load() == 5, "the handler runs again on this thread after the timer's longjmps");
    return bad;
}

int kprobe_timer_case(bool optimize)
{
    liveprobe_set_optimization(optimize);
    kprobe kp{};
    kp.addr = reinterpret_cast<kprobe_opcode_t *>(lp_t_ret42_mov);
    kp.pre_handler = spinning_pre;
    if (register_kprobe(&kp) != 0) return check(false, "register_kprobe");
    int bad = left_by_timer([] { return lp_t_ret42(); }, 3);
    from_another_thread([&] { unregister_kprobe(&kp); });
    return bad;
}

int kretprobe_timer_case(bool optimize)
{
    liveprobe_set_optimization(optimize);
    kretprobe rp{};
    rp.kp.addr = reinterpret_cast<kprobe_opcode_t *>(lp_t_ret42);
    rp.handler = spinning_ret;
    rp.maxactive = 2;  // fewer than the calls left: the abandoned instances must come back
    if (register_kretprobe(&rp) != 0) return check(false, "register_kretprobe");
    int bad = left_by_timer([] { return lp_t_ret42(); }, 3);
    bad += check(rp.nmissed == 0, "no call missed for want of an instance (the abandoned ones came back)");
    from_another_thread([&] { unregister_kretprobe(&rp); });
    return bad;
}

// The return handler of an inner call is left by a timer's longjmp to a frame of the outer
// call, whose return comes next, with no entry in between: the outer return handler runs.
std::atomic<int> g_outer_returns{0};
int count_outer_ret(kretprobe_instance *, pt_regs *)
{
    g_outer_returns++;
    return 0;
}
extern "C" __attribute__((noinline)) long lp_hl_outer()
{
    if (sigsetjmp(g_out, 1) == 0) {
        arm_timer();
        lp_t_ret42();  // its return handler spins until the timer's longjmp back here
    }
    asm volatile("");
    return 7;
}

int nested_return_case(bool optimize)
{
    liveprobe_set_optimization(optimize);
    signal(SIGALRM, leave_by_longjmp);
    kretprobe inner{}, outer{};
    inner.kp.addr = reinterpret_cast<kprobe_opcode_t *>(lp_t_ret42);
    inner.handler = spinning_ret;
    outer.kp.addr = reinterpret_cast<kprobe_opcode_t *>(lp_hl_outer);
    outer.handler = count_outer_ret;
    if (register_kretprobe(&inner) != 0 || register_kretprobe(&outer) != 0) return check(false, "register_kretprobe");
    int bad = 0;
    g_spin_until = 1;
    bad += check(lp_hl_outer() == 7, "the outer function's result");
    g_spin_until = 0;
    signal(SIGALRM, SIG_DFL);
    bad += check(g_outer_returns.load() == 1, "the outer call's return handler ran, after the inner one was left");
    g_runs = 0;
    bad += check(lp_t_ret42() == 42, "the inner function's result");
    bad += check(g_runs.load() == 1, "the inner return handler runs again");
    from_another_thread([&] {
        unregister_kretprobe(&inner);
        unregister_kretprobe(&outer);
    });
    return bad;
}

// A thread leaves the handler by a longjmp and then hits no probe (it waits) while this one
// unregisters: the unregistration waits for that thread's busy publication, which nothing
// would take back but a nudge (a signal the waiting thread sends it after a while).
int silent_thread_case(bool optimize, bool kret)
{
    liveprobe_set_optimization(optimize);
    signal(SIGUSR1, leave_by_longjmp);
    kprobe kp{};
    kp.addr = reinterpret_cast<kprobe_opcode_t *>(lp_t_ret42_mov);
    kp.pre_handler = raising_pre;
    kretprobe rp{};
    rp.kp.addr = reinterpret_cast<kprobe_opcode_t *>(lp_t_ret42);
    rp.handler = raising_ret;
    if ((kret ? register_kretprobe(&rp) : register_kprobe(&kp)) != 0) return check(false, "register");
    std::atomic<int> stage{0};
    int bad = 0;
    std::thread t([&] {
        g_leave = true;
        if (sigsetjmp(g_out, 1) == 0) {
            lp_t_ret42();
            bad += check(false, "the handler's signal should have left the call");
        }
        g_leave = false;
        stage = 1;
        while (stage.load() != 2) usleep(1000);  // no probe hit meanwhile
        g_runs = 0;
        bad += check(lp_t_ret42() == 42, "the function's result after the unregistration");
        bad += check(g_runs.load() == 0, "no handler after the unregistration");
    });
    while (stage.load() != 1) usleep(1000);
    if (kret) unregister_kretprobe(&rp);  // must return
    else unregister_kprobe(&kp);
    stage = 2;
    t.join();
    return bad;
}

int kretprobe_case(bool optimize)
{
    liveprobe_set_optimization(optimize);
    signal(SIGUSR1, leave_by_longjmp);
    kretprobe rp{};
    rp.kp.addr = reinterpret_cast<kprobe_opcode_t *>(lp_t_ret42);
    rp.handler = raising_ret;
    rp.maxactive = 4;
    if (register_kretprobe(&rp) != 0) return check(false, "register_kretprobe");
    int bad = left_by_raise(3);
    from_another_thread([&] { unregister_kretprobe(&rp); });  // must return
    bad += check(lp_t_ret42() == 42, "the function after unregistering");
    return bad;
}

TEST(HandlerLongjmp, AKprobeOnTheJumpPathKeepsFiringAndUnregisters) { in_child([] { return kprobe_case(true); }); }
TEST(HandlerLongjmp, AKprobeOnTheBreakpointPathKeepsFiringAndUnregisters) { in_child([] { return kprobe_case(false); }); }
TEST(HandlerLongjmp, AKretprobeKeepsFiringAndUnregisters) { in_child([] { return kretprobe_case(true); }); }
TEST(HandlerLongjmp, AKretprobeOnTheBreakpointPathKeepsFiringAndUnregisters) { in_child([] { return kretprobe_case(false); }); }
TEST(HandlerLongjmp, ATimerLeavesASpinningKprobeHandler) { in_child([] { return kprobe_timer_case(true); }); }
TEST(HandlerLongjmp, ATimerLeavesASpinningKprobeHandlerOnTheBreakpointPath) { in_child([] { return kprobe_timer_case(false); }); }
TEST(HandlerLongjmp, ATimerLeavesASpinningReturnHandler) { in_child([] { return kretprobe_timer_case(true); }); }
TEST(HandlerLongjmp, ATimerLeavesASpinningReturnHandlerOnTheBreakpointPath) { in_child([] { return kretprobe_timer_case(false); }); }
TEST(HandlerLongjmp, UnregisteringDoesNotWaitForAThreadThatLeftAHandlerAndHitsNothing)
{
    for (bool optimize : {true, false})
        for (bool kret : {false, true}) in_child([=] { return silent_thread_case(optimize, kret); });
}
TEST(HandlerLongjmp, TheOuterReturnAfterAnInnerReturnHandlerWasLeft) { in_child([] { return nested_return_case(true); }); }
TEST(HandlerLongjmp, TheOuterReturnAfterAnInnerReturnHandlerWasLeftOnTheBreakpointPath) { in_child([] { return nested_return_case(false); }); }

}  // namespace
