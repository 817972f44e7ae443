// A process exits (main returns, exit() runs the static destructors) while another thread is in
// the middle of liveprobe: registering and unregistering probes by name, hitting them. The
// agent's thread is such a thread when a process ends during a request. liveprobe's tables
// outlive the destructors (core/immortal.hpp): the process ends with its own status, never
// with a crash.
#include <liveprobe/kprobes.h>

#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <thread>

namespace {

extern "C" __attribute__((noinline)) long lp_exit_race_target(long x)
{
    asm volatile("");
    return x + 1;
}

int count_pre(kprobe *, pt_regs *) { return 0; }
int ret_handler(kretprobe_instance *, pt_regs *) { return 0; }

[[noreturn]] void churn()
{
    for (long i = 0;; ++i) {
        struct kprobe kp {};
        kp.symbol_name = "lp_exit_race_target";
        kp.pre_handler = count_pre;
        struct kretprobe rp {};
        rp.kp.symbol_name = "lp_exit_race_target";
        rp.handler = ret_handler;
        rp.maxactive = 4;
        if (register_kprobe(&kp) == 0) {
            lp_exit_race_target(i);
            unregister_kprobe(&kp);
        }
        if (register_kretprobe(&rp) == 0) {
            lp_exit_race_target(i);
            unregister_kretprobe(&rp);
        }
        kallsyms_lookup_name("lp_exit_race_target");
    }
}

}  // namespace

TEST(ExitRace, ExitWhileAnotherThreadRegistersProbes)
{
    for (int round = 0; round < 160; ++round) {
        pid_t child = fork();
        ASSERT_GE(child, 0);
        if (child == 0) {
            std::thread(churn).detach();
            usleep(static_cast<useconds_t>(500 + 250 * (round % 40)));  // exit at a different point each round
            std::exit(7);  // the static destructors run while churn() goes on
        }
        int status = 0;
        ASSERT_EQ(waitpid(child, &status, 0), child);
        ASSERT_TRUE(WIFEXITED(status)) << "round " << round << ": the child died of signal "
                                       << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
        ASSERT_EQ(WEXITSTATUS(status), 7) << "round " << round;
    }
}
