#include "os/linux/stop_threads.hpp"

#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "os/linux/raw_syscall.hpp"
#include "os/linux/signals.hpp"

namespace liveprobe::os {

namespace {

constexpr int kMaxThreads = 8192;
constexpr size_t kHelperStack = 64 * 1024;

enum State : int { kInit, kAttach, kStopped, kMore, kResume, kDone, kFailed };

}  // namespace

// Shared between the caller and the helper (same memory: CLONE_VM). The helper runs with the
// caller's TLS pointer and no libc state of its own: it makes raw system calls only, and
// touches nothing but this struct and its own stack.
struct WorldStop::Shared {
    std::atomic<int> state{kInit};
    int creator = 0;        // the process that started the helper (its parent while it lives)
    int err = 0;            // errno of a failure
    int failed_tid = 0;
    int n = 0;              // threads listed so far
    int attached = 0;       // threads the helper has stopped (a prefix of tid[])
    int tid[kMaxThreads];
    bool gone[kMaxThreads];  // exited before it could be stopped
    int pending_sig[kMaxThreads];
    struct user_regs_struct regs[kMaxThreads];
    uint64_t new_ip[kMaxThreads];
};

namespace {

void futex_wait(std::atomic<int> *a, int val)
{
    raw_syscall(SYS_futex, reinterpret_cast<long>(a), FUTEX_WAIT, val, 0);
}
void futex_wake(std::atomic<int> *a)
{
    raw_syscall(SYS_futex, reinterpret_cast<long>(a), FUTEX_WAKE, 1 << 30);
}
void set_state(WorldStop::Shared *s, int v)
{
    s->state.store(v, std::memory_order_seq_cst);
    futex_wake(&s->state);
}
int wait_state_change(WorldStop::Shared *s, int from)
{
    int v;
    while ((v = s->state.load(std::memory_order_seq_cst)) == from) futex_wait(&s->state, from);
    return v;
}

long ptrace_raw(long req, int tid, long addr = 0, long data = 0)
{
    return raw_syscall(SYS_ptrace, req, tid, addr, data);
}

// A thread that blocks SIGTRAP and hits an int3 (a breakpoint probe, or the one a jump probe's
// placement or removal writes first) is killed by the kernel, as is one that faults in a
// handler with that fault's signal blocked. Where the library was preloaded, the interposed
// sigprocmask and pthread_sigmask keep them unblocked; after an attach, threads that blocked
// every signal (jemalloc's background thread, the program's workers that block all and wait in
// sigwait) still block them: each stopped thread's mask loses them here (a thread that blocks
// them later is caught at the next stop). Blocking them only matters to a program for the same
// signals sent by kill(), which then arrive at once.
void unblock_synchronous(int tid)
{
    uint64_t mask = 0;
    if (ptrace_raw(PTRACE_GETSIGMASK, tid, sizeof mask, reinterpret_cast<long>(&mask)) < 0) return;
    if (!(mask & kSynchronousMask)) return;
    mask &= ~kSynchronousMask;
    ptrace_raw(PTRACE_SETSIGMASK, tid, sizeof mask, reinterpret_cast<long>(&mask));
}

// Stops threads [s->attached, s->n). Returns false on a failure other than a thread exiting.
bool stop_range(WorldStop::Shared *s)
{
    int from = s->attached;
    for (int i = from; i < s->n; ++i) {
        s->gone[i] = false;
        s->pending_sig[i] = 0;
        long r = ptrace_raw(PTRACE_SEIZE, s->tid[i]);
        if (r == -ESRCH) {
            s->gone[i] = true;
            continue;
        }
        if (r < 0 || (r = ptrace_raw(PTRACE_INTERRUPT, s->tid[i])) < 0) {
            if (r == -ESRCH) {
                s->gone[i] = true;
                continue;
            }
            s->err = static_cast<int>(-r);
            s->failed_tid = s->tid[i];
            s->attached = i;  // those before i are seized: resume() detaches them
            return false;
        }
    }
    for (int i = from; i < s->n; ++i) {
        if (s->gone[i]) continue;
        for (;;) {
            int status = 0;
            long r = raw_syscall(SYS_wait4, s->tid[i], reinterpret_cast<long>(&status), __WALL, 0);
            if (r == -EINTR) continue;
            if (r < 0 || WIFEXITED(status) || WIFSIGNALED(status)) {
                s->gone[i] = true;
                break;
            }
            if (!WIFSTOPPED(status)) continue;
            // The interrupt's own stop (PTRACE_EVENT_STOP), or a signal-delivery stop: a
            // signal about to be delivered (a SIGTRAP of an int3 just hit, say), which the
            // detach must deliver again or it is lost.
            if ((status >> 16) != PTRACE_EVENT_STOP) s->pending_sig[i] = WSTOPSIG(status);
            break;
        }
        if (!s->gone[i] && ptrace_raw(PTRACE_GETREGS, s->tid[i], 0, reinterpret_cast<long>(&s->regs[i])) < 0)
            s->gone[i] = true;
        if (!s->gone[i]) s->new_ip[i] = s->regs[i].rip;
        if (!s->gone[i]) unblock_synchronous(s->tid[i]);
    }
    s->attached = s->n;
    return true;
}

void release_all(WorldStop::Shared *s)
{
    for (int i = 0; i < s->attached; ++i) {
        if (s->gone[i]) continue;
        if (s->new_ip[i] != s->regs[i].rip) {
            s->regs[i].rip = s->new_ip[i];
            ptrace_raw(PTRACE_SETREGS, s->tid[i], 0, reinterpret_cast<long>(&s->regs[i]));
        }
        ptrace_raw(PTRACE_DETACH, s->tid[i], 0, s->pending_sig[i]);
    }
}

// The helper's wait: as wait_state_change, but if its creator is gone (the process exited while
// the world was stopped: its parent is some other process now), it lets its tracees go and
// exits. PR_SET_PDEATHSIG alone misses a creator that died before the prctl, and one whose
// death waits for its stopped threads.
int helper_wait(WorldStop::Shared *s, int from)
{
    int v;
    while ((v = s->state.load(std::memory_order_seq_cst)) == from) {
        struct timespec ts = {0, 100 * 1000 * 1000};
        raw_syscall(SYS_futex, reinterpret_cast<long>(&s->state), FUTEX_WAIT, from, reinterpret_cast<long>(&ts));
        if (s->state.load(std::memory_order_seq_cst) == from && raw_syscall(SYS_getppid) != s->creator) {
            release_all(s);
            raw_syscall(SYS_exit, 0);
        }
    }
    return v;
}

int helper_main(void *arg)
{
    auto *s = static_cast<WorldStop::Shared *>(arg);
    // The helper shares memory and TLS with the process but is no part of it: no signal
    // (a terminal's SIGINT to the process group, say) may run one of the program's handlers
    // here, and it dies with its creator.
    uint64_t all = ~0ull;
    raw_sigprocmask(SIG_SETMASK, &all, nullptr);
    raw_syscall(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL);
    if (raw_syscall(SYS_getppid) != s->creator) return 0;  // it died before the prctl
    helper_wait(s, kInit);
    bool ok = stop_range(s);
    for (;;) {
        if (!ok) {
            release_all(s);
            set_state(s, kFailed);
            break;
        }
        set_state(s, kStopped);
        int next = helper_wait(s, kStopped);
        if (next == kMore) {
            ok = stop_range(s);
            continue;
        }
        release_all(s);
        set_state(s, kDone);
        break;
    }
    raw_syscall(SYS_exit, 0);
    return 0;
}

struct LinuxDirent64 {
    uint64_t ino;
    int64_t off;
    unsigned short reclen;
    unsigned char type;
    char name[1];
};

// The thread ids of this process, read with raw getdents64 (no allocation: other threads
// may be stopped holding the malloc lock). Appends ids not yet in s->tid.
bool list_threads(WorldStop::Shared *s, int self)
{
    int fd = static_cast<int>(raw_syscall(SYS_open, reinterpret_cast<long>("/proc/self/task"),
                                          O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (fd < 0) return false;
    alignas(8) char buf[8192];
    for (;;) {
        long n = raw_syscall(SYS_getdents64, fd, reinterpret_cast<long>(buf), sizeof buf);
        if (n <= 0) break;
        for (long off = 0; off < n;) {
            auto *d = reinterpret_cast<LinuxDirent64 *>(buf + off);
            off += d->reclen;
            if (d->name[0] < '0' || d->name[0] > '9') continue;
            int tid = 0;
            for (const char *p = d->name; *p; ++p) tid = tid * 10 + (*p - '0');
            if (tid == self) continue;
            bool known = false;
            for (int i = 0; i < s->n && !known; ++i) known = s->tid[i] == tid;
            if (!known && s->n < kMaxThreads) s->tid[s->n++] = tid;
        }
    }
    raw_syscall(SYS_close, fd);
    return true;
}

}  // namespace

namespace {
// The last helper, still detaching threads or exiting after resume(): reaped by the next
// stop() (before it, every thread is released), so resume() need not wait for it.
// The three, together, protected by g_helper_lock (the agent's thread reaps while another
// thread may stop the world): a spin lock a fork child can reset.
std::atomic<bool> g_helper_lock{false};
pid_t g_last_helper = 0;
WorldStop::Shared *g_last_shared = nullptr;
void *g_last_stack = nullptr;

struct HelperLock {
    HelperLock()
    {
        while (g_helper_lock.exchange(true, std::memory_order_acquire)) sched_yield();
    }
    ~HelperLock() { g_helper_lock.store(false, std::memory_order_release); }
};

void reap_last_helper()
{
    HelperLock lk;
    pid_t pid = g_last_helper;
    if (pid <= 0) return;
    g_last_helper = 0;
    while (raw_syscall(SYS_wait4, pid, 0, __WALL, 0) == -EINTR) {
    }
    munmap(g_last_shared, sizeof(WorldStop::Shared));
    munmap(g_last_stack, kHelperStack);
    g_last_shared = nullptr;
    g_last_stack = nullptr;
}
}  // namespace

void stop_threads_forget_helper_after_fork()
{
    // The child of fork() has no helper (it belonged to the parent's thread).
    g_helper_lock.store(false);
    g_last_helper = 0;
    g_last_shared = nullptr;
    g_last_stack = nullptr;
}

void stop_threads_reap_helper() { reap_last_helper(); }

Status WorldStop::stop()
{
    reap_last_helper();
    int self = raw_gettid();
    void *mem = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) return Fail(-ENOMEM, "cannot map the thread-stop state");
    // Default-initialized: the arrays stay untouched zero pages until used (a process with a
    // few threads touches a few pages of the 2 MiB).
    shared_ = new (mem) Shared;
    if (!list_threads(shared_, self)) {
        resume();
        return Fail(-EPERM, "cannot list this process's threads in /proc/self/task");
    }
    if (shared_->n == 0) return Status::Ok();  // single-threaded: nothing to stop
    // Nothing may allocate while other threads are stopped (one may hold the malloc lock):
    // room for the listed threads and many started meanwhile.
    threads_.reserve(static_cast<size_t>(shared_->n) + 1024);
    if (shared_->n == kMaxThreads) {
        resume();
        return Fail(-E2BIG, "more than {} threads: cannot stop them all", kMaxThreads);
    }
    stack_ = mmap(nullptr, kHelperStack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (stack_ == MAP_FAILED) {
        stack_ = nullptr;
        resume();
        return Fail(-ENOMEM, "cannot map a stack for the thread-stop helper");
    }
    shared_->creator = raw_getpid();
    // Exit signal 0: the program never sees a SIGCHLD for it, nor reaps it with wait().
    helper_ = clone(helper_main, static_cast<char *>(stack_) + kHelperStack, CLONE_VM | CLONE_UNTRACED,
                    shared_);
    if (helper_ < 0) {
        int e = errno;
        helper_ = 0;
        resume();
        return Fail(-e, "cannot start the thread-stop helper: {}", strerror(e));
    }
    prctl(PR_SET_PTRACER, helper_, 0, 0, 0);  // Yama: allow this helper (EINVAL without Yama)
    set_state(shared_, kAttach);
    for (;;) {
        int st = wait_state_change(shared_, kAttach);
        if (st == kMore) st = wait_state_change(shared_, kMore);
        if (st == kFailed) {
            int e = shared_->err, tid = shared_->failed_tid;
            resume();
            return Fail(-EPERM,
                        "cannot stop thread {} with ptrace ({}): the process may be traced "
                        "already, or ptrace is not permitted",
                        tid, strerror(e));
        }
        // Threads started meanwhile by threads now stopped: stop them too.
        int before = shared_->n;
        list_threads(shared_, self);
        if (shared_->n == before) break;
        set_state(shared_, kMore);
    }
    threads_.clear();
    int live = 0;
    for (int i = 0; i < shared_->attached; ++i) live += !shared_->gone[i];
    if (static_cast<size_t>(live) > threads_.capacity()) {
        resume();  // more threads appeared during the stop than there is room for
        return Fail(-EAGAIN, "{} threads were started while the others were being stopped", live);
    }
    for (int i = 0; i < shared_->attached; ++i) {
        if (shared_->gone[i]) continue;
        const user_regs_struct &r = shared_->regs[i];
        StoppedThread t;
        t.tid = shared_->tid[i];
        t.ip = t.new_ip = r.rip;
        t.sp = r.rsp;
        const unsigned long long g[16] = {r.r15, r.r14, r.r13, r.r12, r.rbp, r.rbx, r.r11, r.r10,
                                          r.r9,  r.r8,  r.rax, r.rcx, r.rdx, r.rsi, r.rdi, r.rsp};
        for (int k = 0; k < 16; ++k) t.gpr[k] = g[k];
        threads_.push_back(t);
    }
    return Status::Ok();
}

void WorldStop::resume()
{
    if (shared_) {
        if (helper_ > 0) {
            // Copy back the caller's decisions.
            for (auto &t : threads_)
                for (int i = 0; i < shared_->attached; ++i)
                    if (shared_->tid[i] == t.tid) shared_->new_ip[i] = t.new_ip;
            int st = shared_->state.load();
            if (st == kStopped) set_state(shared_, kResume);
            // The helper detaches and exits on its own: reaped now. Left a zombie until the
            // next stop or request, a program's waitpid(-1, ..., __WALL) found it, a child
            // the program never made (a threaded program traced from its start).
            {
                HelperLock lk;
                g_last_helper = helper_;
                g_last_shared = shared_;
                g_last_stack = stack_;
                helper_ = 0;
                shared_ = nullptr;
                stack_ = nullptr;
            }
            reap_last_helper();
        }
        if (shared_) munmap(shared_, sizeof(Shared));
        shared_ = nullptr;
    }
    if (stack_) {
        munmap(stack_, kHelperStack);
        stack_ = nullptr;
    }
    threads_.clear();
}

}  // namespace liveprobe::os
