// Freeing detours: probes registered and unregistered at ever new addresses do not make
// liveprobe's code memory grow without bound, and a detour is not freed while a thread can
// still come back to it (a thread parked in a signal handler that interrupted it, on its own
// stack or on an alternate signal stack). (Under the "noopt." prefix the memory check holds on
// the breakpoint path; the parking test turns optimization on for itself: it is about detours.)
#include <liveprobe/kprobes.h>

#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "support/optimizing.hpp"

namespace {

// 800 distinct tiny functions (lea; ret: optimizable on entry).
template <int N>
[[gnu::noinline]] int lp_r_fn(int x)
{
    return x * 3 + N + 1;  // lea N+1(%rdi,%rdi,2),%eax; ret: at least 5 bytes
}
using Fn = int (*)(int);
constexpr int kFns = 800;
template <int... I>
constexpr std::array<Fn, sizeof...(I)> make_fns(std::integer_sequence<int, I...>)
{
    return {&lp_r_fn<I>...};
}
const std::array<Fn, kFns> g_fns = make_fns(std::make_integer_sequence<int, kFns>{});

std::atomic<long> g_hits{0};
int count_pre(kprobe *, pt_regs *)
{
    g_hits.fetch_add(1, std::memory_order_relaxed);
    return 0;
}
// The same, reading its regs: it takes the detour's full entry, not the light one.
std::atomic<unsigned long> g_last_ip{0};
int count_pre_regs(kprobe *, pt_regs *regs)
{
    g_last_ip.store(regs->ip, std::memory_order_relaxed);
    g_hits.fetch_add(1, std::memory_order_relaxed);
    return 0;
}

// Bytes of anonymous read+exec memory: where liveprobe keeps its code (slots and detours).
uint64_t anon_exec_bytes()
{
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f) return 0;
    char line[512];
    uint64_t total = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi, off;
        char perms[8];
        unsigned inode;
        char dev[16];
        int path_at = 0;
        if (sscanf(line, "%lx-%lx %7s %lx %15s %u %n", &lo, &hi, perms, &off, dev, &inode, &path_at) < 6) continue;
        bool anonymous = inode == 0 && (path_at == 0 || line[path_at] == '\n' || line[path_at] == 0);
        if (anonymous && std::strcmp(perms, "r-xp") == 0) total += hi - lo;
    }
    fclose(f);
    return total;
}

// Registers probes on fns [from, from + n), calls each, unregisters them. Returns what went
// wrong, or "".
std::string churn(int from, int n)
{
    std::vector<kprobe> kps(n);
    std::vector<kprobe *> ptrs(n);
    for (int i = 0; i < n; ++i) {
        kps[i].addr = reinterpret_cast<kprobe_opcode_t *>(g_fns[from + i]);
        kps[i].pre_handler = count_pre;
        ptrs[i] = &kps[i];
    }
    if (register_kprobes(ptrs.data(), n) != 0) return std::string("register_kprobes: ") + liveprobe_strerror(-1);
    std::string err;
    long before = g_hits.load();
    for (int i = 0; i < n; ++i)
        if (g_fns[from + i](7) != 22 + from + i) err = "a probed function returned a wrong value";
    if (g_hits.load() - before != n) err = "the handler did not run once per call";
    int optimized = 0;
    for (auto &kp : kps) optimized += (kp.flags & KPROBE_FLAG_OPTIMIZED) != 0;
    if (optimizing() && optimized != n) err = std::to_string(n - optimized) + " probes were not optimized";
    unregister_kprobes(ptrs.data(), n);
    return err;
}

TEST(DetourReclaim, CodeMemoryStaysBoundedAcrossManyAddresses)
{
    // Warm up: the first registration maps what every later one shares.
    ASSERT_EQ(churn(0, 100), "");
    uint64_t before = anon_exec_bytes();
    // 700 more distinct addresses, 100 at a time: with detours never freed, 700 KiB of them.
    for (int from = 100; from < kFns; from += 100) ASSERT_EQ(churn(from, 100), "");
    uint64_t grown = anon_exec_bytes() - before;
    // Detours are 1 KiB, slots 64 bytes: 100 live + at most 127 retired detours, and 700 slots.
    EXPECT_LT(grown, 320u * 1024) << "liveprobe's code memory grew by " << grown / 1024 << " KiB";
}

// ---- A thread parked in a signal handler that interrupted a detour ----

std::atomic<uint64_t> g_block{0};  // the detour of the probed function
std::atomic<int> g_parked{0};
std::atomic<bool> g_release{false};

void park_if_in_detour(int, siginfo_t *, void *ctx)
{
    auto *uc = static_cast<ucontext_t *>(ctx);
    uint64_t ip = uc->uc_mcontext.gregs[REG_RIP], b = g_block.load();
    if (g_parked.load() || ip < b || ip >= b + 1024) return;
    g_parked.store(1);
    while (!g_release.load()) usleep(1000);
}

uint64_t detour_block_of(Fn f)
{
    auto *p = reinterpret_cast<const uint8_t *>(f);
    if (p[0] != 0xe9) return 0;
    int32_t rel;
    std::memcpy(&rel, p + 1, 4);
    return (reinterpret_cast<uint64_t>(p) + 5 + rel) & ~uint64_t(1023);
}

// The whole scenario, in a process of its own (see the tests below). Returns what went wrong.
// (A thread parked in the dispatcher the detour called, or in a handler, would keep its probe
// busy, and unregistering waits for that: liveprobe's deferral for handlers and alternate
// stacks covers those windows and is not exercised here. So is one parked in a light entry's
// finish, which runs inside the detour block with the probe still busy: the handler here reads
// its regs, so the detour has no light entry it would take.)
std::string parked_thread_keeps_its_detour(bool on_altstack)
{
    liveprobe_set_optimization(1);
    Fn f = g_fns[799];
    kprobe kp{};
    kp.addr = reinterpret_cast<kprobe_opcode_t *>(f);
    kp.pre_handler = count_pre_regs;
    if (register_kprobe(&kp) != 0) return std::string("register_kprobe: ") + liveprobe_strerror(-1);
    if (!(kp.flags & KPROBE_FLAG_OPTIMIZED)) return "the probe was not optimized";
    // Kept in a global only: liveprobe scans the threads' stacks for addresses in a detour,
    // and the test's own frame holding it would keep the detour alive.
    g_block = detour_block_of(f);
    if (g_block.load() == 0) return "the probed function does not start with a jmp";

    struct sigaction sa {};
    sa.sa_sigaction = park_if_in_detour;
    sa.sa_flags = SA_SIGINFO | SA_RESTART | (on_altstack ? SA_ONSTACK : 0);
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, nullptr);

    std::atomic<bool> stop{false};
    std::atomic<pid_t> tid{0};
    std::atomic<long> wrong{0}, calls{0};
    std::thread worker([&] {
        std::vector<char> alt(64 * 1024);
        if (on_altstack) {
            stack_t ss{};
            ss.ss_sp = alt.data();
            ss.ss_size = alt.size();
            sigaltstack(&ss, nullptr);
        }
        tid = static_cast<pid_t>(syscall(SYS_gettid));
        volatile Fn g = f;
        for (int x = 0; !stop.load(std::memory_order_relaxed); ++x) {
            if (g(x) != x * 3 + 800) wrong.fetch_add(1);
            calls.fetch_add(1, std::memory_order_relaxed);
        }
        if (on_altstack) {
            stack_t ss{};
            ss.ss_flags = SS_DISABLE;
            sigaltstack(&ss, nullptr);
        }
    });
    while (!tid.load()) std::this_thread::yield();
    // Signal it until one lands while it is inside the detour.
    for (int i = 0; i < 200000 && !g_parked.load(); ++i) {
        syscall(SYS_tgkill, getpid(), tid.load(), SIGUSR1);
        usleep(50);
    }
    if (!g_parked.load()) return "no signal landed inside the detour";

    std::string err;
    std::vector<uint8_t> saved(1024);
    std::memcpy(saved.data(), reinterpret_cast<const void *>(g_block.load()), 1024);
    unregister_kprobe(&kp);
    // Probes at 300 other addresses, 150 at a time: the second batch needs blocks, and
    // liveprobe tries to free the 151 retired detours (this process's first 150 + f's).
    for (int from : {0, 150})
        if (std::string e = churn(from, 150); !e.empty()) err = e;
    if (std::memcmp(saved.data(), reinterpret_cast<const void *>(g_block.load()), 1024) != 0) {
        // Releasing the thread would run it into what replaced the detour.
        fprintf(stderr, "the detour was overwritten while a thread was parked inside it\n");
        _exit(1);
    }

    // Back into the detour: the call completes with the right value.
    g_release = true;
    long c = calls.load();
    while (calls.load() < c + 1000) std::this_thread::yield();
    stop = true;
    worker.join();
    if (wrong.load() != 0) return "the parked thread's call returned a wrong value";

    // Nothing holds it now: the next batch that needs blocks frees it (int3 over it, maybe
    // reused since).
    for (int from : {300, 450})
        if (std::string e = churn(from, 150); !e.empty()) err = e;
    if (std::memcmp(saved.data(), reinterpret_cast<const void *>(g_block.load()), 1024) == 0)
        return "the detour was never freed";
    return err;
}

// Each in a fresh process (gtest's "threadsafe" death-test style re-runs the binary for the
// one test), so that which detours are retired or free does not depend on earlier tests.
void run_alone(bool on_altstack)
{
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_EXIT(
        {
            std::string e = parked_thread_keeps_its_detour(on_altstack);
            if (!e.empty()) fprintf(stderr, "%s\n", e.c_str());
            _exit(e.empty() ? 0 : 1);
        },
        ::testing::ExitedWithCode(0), "");
}

TEST(DetourReclaim, ThreadParkedInASignalHandlerThatInterruptedTheDetour) { run_alone(false); }

TEST(DetourReclaim, ThreadParkedOnAnAlternateSignalStack) { run_alone(true); }

}  // namespace
