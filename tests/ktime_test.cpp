// liveprobe_ktime_ns(): monotonic, on CLOCK_MONOTONIC, from the source liveprobe_clock_source()
// names. Every test runs with the source chosen at load (the TSC on a machine whose kernel uses
// it), and ClockGettimeFallback runs them all again in a child with LIVEPROBE_CLOCK=clock_gettime.
// No assertion about speed: bench/ measures it.
#include <liveprobe/ktime.h>

#include <cpuid.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

extern char **environ;

namespace {

constexpr uint64_t kMs = 1'000'000;

uint64_t mono_ns()
{
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(ts.tv_nsec);
}
// Both called once at start: the first call of a function through the PLT, or of a
// sanitizer's interceptor, resolves it (dynamic-linker work that is not async-signal-safe),
// and the signal-handler test calls them from a handler.
const uint64_t g_warm_up = mono_ns() + liveprobe_ktime_ns();

bool forced_clock_gettime()
{
    const char *e = std::getenv("LIVEPROBE_CLOCK");
    return e && std::strcmp(e, "clock_gettime") == 0;
}

bool tsc_in_use() { return std::strcmp(liveprobe_clock_source(), "tsc") == 0; }

// How far liveprobe_ktime_ns() may be from CLOCK_MONOTONIC: none when it is clock_gettime.
uint64_t tolerance() { return tsc_in_use() ? kMs : 0; }

// The source the library should have chosen, found independently.
std::string expected_source()
{
    if (forced_clock_gettime()) return "clock_gettime";
    unsigned a, b, c, d;
    if (__get_cpuid_max(0x80000000, nullptr) < 0x80000007) return "clock_gettime";
    __cpuid(0x80000007, a, b, c, d);
    if (!(d & (1u << 8))) return "clock_gettime";
    char buf[64] = {};
    int fd = open("/sys/devices/system/clocksource/clocksource0/current_clocksource", O_RDONLY);
    if (fd < 0) return "clock_gettime";
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0 || std::string(buf, n) != "tsc\n") return "clock_gettime";
    int mode = 0;
    if (prctl(PR_GET_TSC, &mode, 0, 0, 0) == 0 && mode == PR_TSC_SIGSEGV) return "clock_gettime";
    return "tsc";
}

// c1 - tol <= k <= c2 + tol for k read between c1 and c2; returns k - the midpoint.
struct Bracket {
    uint64_t c1, k, c2;
};
Bracket bracket()
{
    Bracket b;
    b.c1 = mono_ns();
    b.k = liveprobe_ktime_ns();
    b.c2 = mono_ns();
    return b;
}
::testing::AssertionResult within(const Bracket &b, uint64_t tol)
{
    if (b.k + tol >= b.c1 && b.k <= b.c2 + tol) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure()
           << "clock_gettime " << b.c1 << ", liveprobe_ktime_ns " << b.k << ", clock_gettime "
           << b.c2 << ": " << (static_cast<int64_t>(b.k - b.c1)) << " ns after the first, "
           << static_cast<int64_t>(b.k - b.c2) << " ns after the second (tolerance " << tol
           << " ns, source " << liveprobe_clock_source() << ")";
}

TEST(Ktime, SourceIsReported)
{
    const char *s = liveprobe_clock_source();
    ASSERT_NE(s, nullptr);
    std::printf("source: %s\n", s);
    EXPECT_EQ(std::string(s), expected_source());
    EXPECT_EQ(s, liveprobe_clock_source());  // a static string
}

TEST(Ktime, MonotonicOneThread)
{
    uint64_t prev = liveprobe_ktime_ns();
    uint64_t backwards = 0, first_bad = 0, first_prev = 0;
    for (int i = 0; i < 1'000'000; ++i) {
        const uint64_t v = liveprobe_ktime_ns();
        if (v < prev && backwards++ == 0) {
            first_bad = v;
            first_prev = prev;
        }
        prev = v;
    }
    EXPECT_EQ(backwards, 0u) << "first: " << first_prev << " then " << first_bad;
}

TEST(Ktime, MonotonicFourThreads)
{
    constexpr int kThreads = 4;
    std::atomic<int> ready{0};
    std::vector<uint64_t> backwards(kThreads), calls(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
            ready.fetch_add(1);
            while (ready.load() < kThreads) {
            }
            uint64_t prev = liveprobe_ktime_ns();
            for (int i = 0; i < 1'000'000; ++i) {
                const uint64_t v = liveprobe_ktime_ns();
                backwards[t] += v < prev;
                prev = v;
            }
            calls[t] = 1'000'000;
        });
    }
    for (auto &th : threads) th.join();
    for (int t = 0; t < kThreads; ++t) {
        EXPECT_EQ(calls[t], 1'000'000u);
        EXPECT_EQ(backwards[t], 0u) << "thread " << t;
    }
}

// A value is never below one another thread got before: each thread reads the highest value
// published so far, then the clock, then publishes its own.
TEST(Ktime, NeverBelowAnotherThreadsEarlierValue)
{
    constexpr int kThreads = 4;
    std::atomic<uint64_t> highest{0};
    std::atomic<uint64_t> below{0}, worst{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&] {
            for (int i = 0; i < 250'000; ++i) {
                const uint64_t seen = highest.load(std::memory_order_acquire);
                const uint64_t v = liveprobe_ktime_ns();
                if (v < seen) {
                    below.fetch_add(1);
                    uint64_t w = worst.load();
                    while (seen - v > w && !worst.compare_exchange_weak(w, seen - v)) {
                    }
                }
                uint64_t h = highest.load(std::memory_order_relaxed);
                while (v > h && !highest.compare_exchange_weak(h, v, std::memory_order_release)) {
                }
            }
        });
    }
    for (auto &th : threads) th.join();
    EXPECT_EQ(below.load(), 0u) << "by up to " << worst.load() << " ns";
}

// Within the tolerance of CLOCK_MONOTONIC at every read over ~250 ms of continuous reads
// (several refinements of the TSC conversion), then after idle gaps shorter and longer than a
// refinement period (the conversion is then refined late).
TEST(Ktime, AgreesWithClockMonotonic)
{
    const uint64_t tol = tolerance();
    const uint64_t end = mono_ns() + 250 * kMs;
    uint64_t reads = 0, tight = 0;
    int64_t worst = 0;
    for (;;) {
        const Bracket b = bracket();
        ++reads;
        ASSERT_TRUE(within(b, tol)) << "after " << reads << " reads";
        if (b.c2 - b.c1 < 2000) {  // a tight bracket: a precise offset
            ++tight;
            const int64_t off = static_cast<int64_t>(b.k - (b.c1 + (b.c2 - b.c1) / 2));
            if (std::llabs(off) > std::llabs(worst)) worst = off;
        }
        if (b.c2 > end) break;
    }
    std::printf("%llu reads, largest offset from CLOCK_MONOTONIC %lld ns (%llu tight brackets)\n",
                static_cast<unsigned long long>(reads), static_cast<long long>(worst),
                static_cast<unsigned long long>(tight));
    uint64_t prev = liveprobe_ktime_ns();
    for (int gap_ms : {1, 30, 70, 130, 200, 5, 64, 150}) {
        usleep(static_cast<useconds_t>(gap_ms) * 1000);
        for (int i = 0; i < 1000; ++i) {
            const Bracket b = bracket();
            ASSERT_TRUE(within(b, tol)) << "after a " << gap_ms << " ms gap, read " << i;
            ASSERT_GE(b.k, prev) << "after a " << gap_ms << " ms gap, read " << i;
            prev = b.k;
        }
    }
}

// Over a 200 ms sleep, the elapsed time agrees with CLOCK_MONOTONIC's within 2%.
TEST(Ktime, ElapsedOverSleepAgrees)
{
    const Bracket a = bracket();
    usleep(200'000);
    const Bracket b = bracket();
    ASSERT_GT(b.k, a.k);
    const uint64_t elapsed = b.k - a.k;
    const uint64_t lo = b.c1 - a.c2, hi = b.c2 - a.c1;  // CLOCK_MONOTONIC's, bracketed
    std::printf("200 ms sleep: liveprobe_ktime_ns %llu ns, clock_gettime %llu..%llu ns\n",
                static_cast<unsigned long long>(elapsed), static_cast<unsigned long long>(lo),
                static_cast<unsigned long long>(hi));
    EXPECT_GE(lo, 200 * kMs);
    EXPECT_GE(elapsed, lo - lo / 50);
    EXPECT_LE(elapsed, hi + hi / 50);
}

// Read from a signal handler that interrupts the thread while it reads the clock itself (and
// so, now and then, while it refines the conversion).
volatile uint64_t g_main_last = 0;  // the main thread's last completed read
volatile uint64_t g_handler_last = 0;
volatile int g_handler_runs = 0, g_handler_bad = 0;

void on_alarm(int)
{
    const uint64_t before = g_main_last;
    const uint64_t v = liveprobe_ktime_ns();
    if (v < before || v < g_handler_last) g_handler_bad = g_handler_bad + 1;
    g_handler_last = v;
    g_handler_runs = g_handler_runs + 1;
}

TEST(Ktime, FromSignalHandlers)
{
    struct sigaction sa = {}, old = {};
    sa.sa_handler = on_alarm;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    ASSERT_EQ(sigaction(SIGALRM, &sa, &old), 0);
    itimerval it = {{0, 100}, {0, 100}}, off = {};
    ASSERT_EQ(setitimer(ITIMER_REAL, &it, nullptr), 0);
    const uint64_t end = mono_ns() + 300 * kMs;
    uint64_t prev = liveprobe_ktime_ns(), backwards = 0;
    while (mono_ns() < end) {
        const uint64_t v = liveprobe_ktime_ns();
        backwards += v < prev;
        prev = v;
        g_main_last = v;
    }
    setitimer(ITIMER_REAL, &off, nullptr);
    sigaction(SIGALRM, &old, nullptr);
    std::printf("%d handler runs\n", g_handler_runs);
    EXPECT_GT(g_handler_runs, 10);
    EXPECT_EQ(g_handler_bad, 0);
    EXPECT_EQ(backwards, 0u);
    EXPECT_TRUE(within(bracket(), tolerance()));
}

// All of the above again in a child process with LIVEPROBE_CLOCK=clock_gettime.
TEST(Ktime, ClockGettimeFallback)
{
    if (forced_clock_gettime()) GTEST_SKIP() << "already the child";
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
    posix_spawn_file_actions_addclose(&fa, fds[0]);
    std::vector<std::string> env_strings;
    for (char **e = environ; *e; ++e)
        if (std::strncmp(*e, "LIVEPROBE_CLOCK=", 16) != 0) env_strings.emplace_back(*e);
    env_strings.emplace_back("LIVEPROBE_CLOCK=clock_gettime");
    std::vector<char *> envp;
    for (auto &s : env_strings) envp.push_back(s.data());
    envp.push_back(nullptr);
    std::string arg0 = "ktime_test", filter = "--gtest_filter=Ktime.*-Ktime.ClockGettimeFallback";
    char *argv[] = {arg0.data(), filter.data(), nullptr};
    pid_t pid;
    int err = posix_spawn(&pid, "/proc/self/exe", &fa, nullptr, argv, envp.data());
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    ASSERT_EQ(err, 0) << std::strerror(err);
    std::string out;
    char buf[4096];
    for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, n);
    close(fds[0]);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << out;
    EXPECT_NE(out.find("source: clock_gettime"), std::string::npos) << out;
    // Every other test of this suite ran and passed in the child.
    const int expected = ::testing::UnitTest::GetInstance()->current_test_suite()->total_test_count() - 1;
    EXPECT_NE(out.find("[  PASSED  ] " + std::to_string(expected) + " tests"), std::string::npos)
        << out;
}

}  // namespace
