// Return probes removed while calls are in flight (issue 30): threads blocked inside probed
// calls, recursions of probed frames, persistent threads that go on calling afterwards, the
// struct kretprobe unmapped right after unregistering (as rmmod unmaps a module's data).
// After unregister_kretprobe(s) returns, no handler of the probe runs, every call in flight
// returns to its own caller with its own value, and nothing freed is read. Run by ctest on both
// entry paths (plain, and "noopt.").
#include <liveprobe/kprobes.h>

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "support/optimizing.hpp"

extern "C" {
// The issue's program: a loop calling nap.
__attribute__((noipa)) int ifl_nap(int us)
{
    usleep(static_cast<useconds_t>(us));
    return us;
}

// A call that blocks in a system call until a byte arrives on fd.
__attribute__((noipa)) long ifl_block(int fd)
{
    char c = 0;
    ssize_t n;
    while ((n = read(fd, &c, 1)) < 0 && errno == EINTR) {
    }
    return n == 1 ? 1000 + c : -1;
}

// long ifl_tail(int fd): a tail call of ifl_block (two probed functions, one return slot).
long ifl_tail(int fd);
asm(R"(
    .text
    .globl ifl_tail
    .type ifl_tail, @function
ifl_tail:
    movl %edi, %edi
    nopl 0(%rax)
    jmp ifl_block
    .size ifl_tail, .-ifl_tail
)");

// A recursion of probed frames with a blocked call at the bottom.
__attribute__((noipa)) long ifl_rec(long n, int fd)
{
    asm volatile("" ::: "memory");
    if (n == 0) return ifl_block(fd);
    long r = ifl_rec(n - 1, fd);
    asm volatile("" : "+r"(r));
    return r + 1;
}
}

namespace {

// What every handler checks: that it does not run once its probe's unregistration returned.
std::atomic<bool> g_removed{false};
std::atomic<long> g_late{0}, g_entries{0}, g_returns{0};

int on_entry(kretprobe_instance *ri, pt_regs *)
{
    if (g_removed.load()) g_late++;
    g_entries++;
    *reinterpret_cast<long *>(ri->data) = 0x5eed;
    return 0;
}

int on_return(kretprobe_instance *ri, pt_regs *)
{
    if (g_removed.load()) g_late++;
    if (ri->rp && *reinterpret_cast<long *>(ri->data) != 0x5eed && ri->rp->entry_handler) g_late++;
    g_returns++;
    return 0;
}

// A return handler that reads the return value through regs (the full return).
int on_return_regs(kretprobe_instance *, pt_regs *regs)
{
    if (g_removed.load()) g_late++;
    if (regs_return_value(regs) == 0xdead) g_late++;
    g_returns++;
    return 0;
}

// struct kretprobes in a mapping of their own, unmapped once unregistered: what outlives the
// removal must never reach them (rmmod unmaps a module's data the same way).
struct Mapped {
    kretprobe *rps = nullptr;
    size_t size = 0;
    explicit Mapped(int n)
    {
        size = (sizeof(kretprobe) * static_cast<size_t>(n) + 4095) & ~size_t(4095);
        void *m = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        rps = static_cast<kretprobe *>(m);
    }
    void unmap()
    {
        if (rps) munmap(rps, size);
        rps = nullptr;
    }
    ~Mapped() { unmap(); }
};

void fill(kretprobe &rp, void *addr, int kind)
{
    std::memset(&rp, 0, sizeof rp);
    rp.kp.addr = static_cast<kprobe_opcode_t *>(addr);
    switch (kind % 3) {
    case 0:  // the light paths: a return handler only
        rp.handler = on_return;
        break;
    case 1:  // an entry handler with per-call data
        rp.entry_handler = on_entry;
        rp.handler = on_return;
        rp.data_size = sizeof(long);
        break;
    default:  // a return handler that reads its regs (the full return)
        rp.handler = on_return_regs;
        break;
    }
    rp.maxactive = 64;
}

// The issue's reproducer through the C API: a thread calls nap(1000) in a loop while another
// registers and unregisters a kretprobe on nap every 50 ms. Before the fix: SIGSEGV at the
// first unregister (flush_dead_walk read the freed state through the thread's cache).
TEST(KretInFlight, NapLoopSurvivesRegisterUnregisterEvery50ms)
{
    g_removed = false;
    g_late = 0;
    std::atomic<bool> stop{false};
    std::atomic<long> calls{0}, wrong{0};
    std::thread looper([&] {
        while (!stop.load()) {
            if (ifl_nap(1000) != 1000) wrong++;
            calls++;
        }
    });
    for (int round = 0; round < 20; ++round) {
        Mapped m(1);
        fill(m.rps[0], reinterpret_cast<void *>(&ifl_nap), round);
        g_removed = false;
        ASSERT_EQ(register_kretprobe(&m.rps[0]), 0) << liveprobe_strerror(-1);
        usleep(50 * 1000);
        unregister_kretprobe(&m.rps[0]);
        g_removed = true;
        m.unmap();
        usleep(5 * 1000);
    }
    stop = true;
    looper.join();
    EXPECT_GT(calls.load(), 20);
    EXPECT_EQ(wrong.load(), 0);
    EXPECT_EQ(g_late.load(), 0) << "a handler ran after its probe's unregistration returned";
}

// Persistent worker threads, each in a recursion of return-probed frames blocked at the
// bottom in read(): the probes are removed (one at a time, or in one batch) while every
// worker is blocked, their structs unmapped, then the workers are released and return.
class Workers {
public:
    static constexpr int kThreads = 4, kDepth = 5;

    Workers()
    {
        for (auto &p : pipes_) EXPECT_EQ(pipe(p), 0);
        for (int i = 0; i < kThreads; ++i) threads_.emplace_back([this, i] { run(i); });
    }
    ~Workers()
    {
        {
            std::lock_guard lk(mu_);
            quit_ = true;
            round_++;
        }
        cv_.notify_all();
        for (auto &t : threads_) t.join();
        for (auto &p : pipes_) {
            close(p[0]);
            close(p[1]);
        }
    }
    // Starts a round: each worker calls the probed functions a few times, then ifl_rec(kDepth),
    // which blocks at the bottom.
    void start()
    {
        {
            std::lock_guard lk(mu_);
            round_++;
            blocked_ = 0;
        }
        cv_.notify_all();
    }
    // Waits until every worker is blocked in read() inside its probed frames.
    void wait_blocked()
    {
        while (blocked_.load() < kThreads) usleep(200);
        usleep(2000);  // into the system call
    }
    // Releases them with byte c each; waits for the round's results; the number of wrong ones.
    int finish(char c)
    {
        for (auto &p : pipes_) EXPECT_EQ(write(p[1], &c, 1), 1);
        std::unique_lock lk(mu_);
        done_cv_.wait(lk, [&] { return done_ == round_ * kThreads; });
        int wrong = 0;
        for (long r : results_)
            if (r != 1000 + c + kDepth) wrong++;
        return wrong;
    }

private:
    void run(int i)
    {
        long seen = 0;
        for (;;) {
            {
                std::unique_lock lk(mu_);
                cv_.wait(lk, [&] { return round_ != seen; });
                seen = round_;
                if (quit_) return;
            }
            // Calls that return while the probes live: the thread's instance caches hold them.
            for (int k = 0; k < 3; ++k) (void)ifl_rec(k, -1);
            blocked_++;
            long r = ifl_rec(kDepth, pipes_[i][0]);
            // A few more calls of the (maybe unregistered) functions: the thread's caches of a
            // removed probe are flushed here.
            for (int k = 0; k < 3; ++k) (void)ifl_rec(k, -1);
            std::lock_guard lk(mu_);
            results_[i] = r;
            done_++;
            done_cv_.notify_all();
        }
    }

    int pipes_[kThreads][2]{};
    std::vector<std::thread> threads_;
    std::mutex mu_;
    std::condition_variable cv_, done_cv_;
    long round_ = 0, done_ = 0;
    bool quit_ = false;
    std::atomic<int> blocked_{0};
    long results_[kThreads]{};
};

}  // namespace

TEST(KretInFlight, BlockedRecursionSurvivesRemovalOfSingleProbesAndBatches)
{
    Workers w;
    for (int round = 0; round < 100; ++round) {
        Mapped m(2);
        fill(m.rps[0], reinterpret_cast<void *>(&ifl_rec), round);
        fill(m.rps[1], reinterpret_cast<void *>(&ifl_block), round + 1);
        kretprobe *both[2] = {&m.rps[0], &m.rps[1]};
        g_removed = false;
        ASSERT_EQ(register_kretprobes(both, 2), 0) << liveprobe_strerror(-1);
        w.start();
        w.wait_blocked();
        if (round % 2 == 0) {
            unregister_kretprobes(both, 2);
        } else {
            unregister_kretprobe(&m.rps[1]);
            unregister_kretprobe(&m.rps[0]);
        }
        g_removed = true;
        m.unmap();
        ASSERT_EQ(w.finish(static_cast<char>('a' + round % 20)), 0) << "round " << round;
        ASSERT_EQ(g_late.load(), 0) << "round " << round << ": a handler ran after unregistration";
    }
}

namespace {
std::vector<void *> g_ris;  // the instances the deep recursion took (one thread)
std::mutex g_ris_mu;
int record_ri(kretprobe_instance *ri, pt_regs *)
{
    std::lock_guard lk(g_ris_mu);
    g_ris.push_back(ri);
    return 0;
}
int nothing(kretprobe_instance *, pt_regs *) { return 0; }
}  // namespace

// A probe removed while one call is in flight keeps a small record alive, not its pool: the
// pages of the instances no thread can reach any more go back to the system (they are no
// longer resident), while the call in flight still returns its value.
TEST(KretInFlight, ARemovedProbeKeepsOnlyThePagesOfCallsInFlight)
{
    Mapped m(1);
    kretprobe &rp = m.rps[0];
    std::memset(&rp, 0, sizeof rp);
    rp.kp.addr = reinterpret_cast<kprobe_opcode_t *>(&ifl_rec);
    rp.entry_handler = record_ri;
    rp.handler = nothing;
    rp.data_size = 512;  // about 8 instances a page
    rp.maxactive = 1024;
    g_ris.clear();
    ASSERT_EQ(register_kretprobe(&rp), 0) << liveprobe_strerror(-1);
    // A recursion 400 deep on another thread, which returns: its instances go back.
    std::thread([] { EXPECT_EQ(ifl_rec(400, -1), 399); }).join();
    const std::vector<void *> deep = g_ris;
    ASSERT_EQ(deep.size(), 401u);
    // One call in flight, blocked in read().
    int p[2];
    ASSERT_EQ(pipe(p), 0);
    long blocked = 0;
    std::thread t([&] { blocked = ifl_rec(0, p[0]); });
    while (g_ris.size() < 402) usleep(200);
    usleep(2000);
    unregister_kretprobe(&rp);
    m.unmap();
    const long page = sysconf(_SC_PAGESIZE);
    size_t resident = 0;
    for (void *ri : deep) {
        unsigned char v = 0;
        auto at = reinterpret_cast<uintptr_t>(ri) & ~static_cast<uintptr_t>(page - 1);
        ASSERT_EQ(mincore(reinterpret_cast<void *>(at), static_cast<size_t>(page), &v), 0) << "the pool is mapped";
        resident += v & 1;
    }
    EXPECT_LE(resident, deep.size() / 10) << "of " << deep.size() << " instances no thread reaches, " << resident
                                          << " still have resident pages";
    char c = 'z';
    ASSERT_EQ(write(p[1], &c, 1), 1);
    t.join();
    EXPECT_EQ(blocked, 1000 + 'z');
    close(p[0]);
    close(p[1]);
}

// A tail-call chain in flight (ifl_tail jumps to ifl_block: two calls, one return slot) when
// its probes are removed, one at a time or in one batch, 50 rounds on one thread that goes on
// calling afterwards: each call returns its own value, no handler runs after the removal.
TEST(KretInFlight, ATailCallChainInFlightSurvivesRemoval)
{
    int p[2];
    ASSERT_EQ(pipe(p), 0);
    std::mutex mu;
    std::condition_variable cv;
    int round_started = -1, round_done = -1;
    long result = 0;
    std::atomic<bool> entered{false};
    std::thread t([&] {
        for (int r = 0; r < 50; ++r) {
            {
                std::unique_lock lk(mu);
                cv.wait(lk, [&] { return round_started == r; });
            }
            for (int k = 0; k < 3; ++k) (void)ifl_tail(-1);  // the caches hold both probes
            entered = true;
            long v = ifl_tail(p[0]);
            for (int k = 0; k < 3; ++k) (void)ifl_tail(-1);
            std::lock_guard lk(mu);
            result = v;
            round_done = r;
            cv.notify_all();
        }
    });
    for (int r = 0; r < 50; ++r) {
        Mapped m(2);
        fill(m.rps[0], reinterpret_cast<void *>(&ifl_tail), r);
        fill(m.rps[1], reinterpret_cast<void *>(&ifl_block), r + 1);
        kretprobe *both[2] = {&m.rps[0], &m.rps[1]};
        g_removed = false;
        ASSERT_EQ(register_kretprobes(both, 2), 0) << liveprobe_strerror(-1);
        entered = false;
        {
            std::lock_guard lk(mu);
            round_started = r;
        }
        cv.notify_all();
        while (!entered.load()) usleep(200);
        usleep(3000);  // into read()
        if (r % 2 == 0) {
            unregister_kretprobes(both, 2);
        } else {
            unregister_kretprobe(&m.rps[0]);
            unregister_kretprobe(&m.rps[1]);
        }
        g_removed = true;
        m.unmap();
        const char c = static_cast<char>('A' + r % 26);
        ASSERT_EQ(write(p[1], &c, 1), 1);
        std::unique_lock lk(mu);
        cv.wait(lk, [&] { return round_done == r; });
        ASSERT_EQ(result, 1000 + c) << "round " << r;
        ASSERT_EQ(g_late.load(), 0) << "round " << r << ": a handler ran after unregistration";
    }
    t.join();
    close(p[0]);
    close(p[1]);
}
