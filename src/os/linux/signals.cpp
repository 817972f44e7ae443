#include "os/linux/signals.hpp"

#include <dlfcn.h>
#include <pthread.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>

#include "os/linux/interpose.hpp"
#include "os/linux/raw_syscall.hpp"

#define LP_EXPORT extern "C" __attribute__((visibility("default")))

namespace liveprobe::os {
namespace {

using sigaction_fn = int (*)(int, const struct sigaction *, struct sigaction *);
using sigmask_fn = int (*)(int, const sigset_t *, sigset_t *);

// libc's functions (interpose.hpp).
std::atomic<sigaction_fn> g_real_sigaction{nullptr};
std::atomic<sigmask_fn> g_real_sigprocmask{nullptr}, g_real_pthread_sigmask{nullptr};
sigaction_fn real_sigaction() { return next_symbol(g_real_sigaction, "sigaction"); }
sigmask_fn real_sigprocmask() { return next_symbol(g_real_sigprocmask, "sigprocmask"); }
sigmask_fn real_pthread_sigmask() { return next_symbol(g_real_pthread_sigmask, "pthread_sigmask"); }

// Looked up at load as well: the first use may otherwise come from a signal handler (a
// sanitizer runtime delivering a deferred signal calls pthread_sigmask), and dlsym is not
// async-signal-safe.
[[gnu::constructor]] void resolve_at_load()
{
    real_sigaction();
    real_sigprocmask();
    real_pthread_sigmask();
}

bool managed(int sig)
{
    return (kSynchronousMask & sigbit(sig)) != 0;
}

// The program's action for a managed signal. Written under g_mu by the interposed
// sigaction(); read lock-free by signal handlers through a sequence counter (odd: writing).
struct ProgramAction {
    std::atomic<uint32_t> seq{0};
    std::atomic<void *> handler{nullptr};  // sa_sigaction or sa_handler (SIG_DFL, SIG_IGN)
    std::atomic<uint64_t> mask{0};         // signals 1..64 of sa_mask
    std::atomic<int> flags{0};
    std::atomic<uint64_t> restorer{0};
};
ProgramAction g_prog[NSIG];
std::mutex g_mu;
std::atomic<bool> g_installed{false};
uint64_t g_restorer;

struct ActionCopy {
    void *handler;
    uint64_t mask;
    int flags;
    uint64_t restorer;
};

ActionCopy load(int sig) noexcept
{
    ProgramAction &a = g_prog[sig];
    for (;;) {
        uint32_t s1 = a.seq.load(std::memory_order_acquire);
        if (s1 & 1) continue;
        ActionCopy c{a.handler.load(std::memory_order_relaxed), a.mask.load(std::memory_order_relaxed),
                     a.flags.load(std::memory_order_relaxed),
                     a.restorer.load(std::memory_order_relaxed)};
        std::atomic_thread_fence(std::memory_order_acquire);
        if (a.seq.load(std::memory_order_relaxed) == s1) return c;
    }
}

void store(int sig, const struct sigaction &act)
{
    ProgramAction &a = g_prog[sig];
    a.seq.fetch_add(1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    a.handler.store(reinterpret_cast<void *>(act.sa_sigaction), std::memory_order_relaxed);
    uint64_t m;
    std::memcpy(&m, &act.sa_mask, sizeof m);
    a.mask.store(m, std::memory_order_relaxed);
    a.flags.store(act.sa_flags, std::memory_order_relaxed);
    a.restorer.store(reinterpret_cast<uint64_t>(act.sa_restorer), std::memory_order_relaxed);
    a.seq.fetch_add(1, std::memory_order_release);
}

void to_sigaction(const ActionCopy &c, struct sigaction *out)
{
    std::memset(out, 0, sizeof *out);
    out->sa_sigaction = reinterpret_cast<void (*)(int, siginfo_t *, void *)>(c.handler);
    std::memcpy(&out->sa_mask, &c.mask, sizeof c.mask);
    out->sa_flags = c.flags;
    out->sa_restorer = reinterpret_cast<void (*)()>(c.restorer);
}

// Never lets SIGTRAP or the synchronous fault signals be blocked: the kernel kills a thread
// that hits an int3 with SIGTRAP blocked, and one whose probe handler faults (on the jump
// path, outside any signal handler) with the fault's signal blocked. Blocking them only ever
// matters to a program for the same signals sent by kill(), which then arrive at once.
const sigset_t *without_ours(int how, const sigset_t *set, sigset_t *buf)
{
    if (!set || how == SIG_UNBLOCK) return set;
    bool any = false;
    for (int sig : kSynchronousSignals) any |= sigismember(set, sig) == 1;
    if (!any) return set;
    *buf = *set;
    for (int sig : kSynchronousSignals) sigdelset(buf, sig);
    return buf;
}

void restore_default_and_reraise(int sig, ucontext_t *uc) noexcept
{
    struct sigaction dfl;
    std::memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    real_sigaction()(sig, &dfl, nullptr);
    // Pending now; delivered with the default action as soon as this handler returns and the
    // context's mask (which must not block it) is restored.
    sigdelset(&uc->uc_sigmask, sig);
    raw_tgkill(raw_getpid(), raw_gettid(), sig);
}

}  // namespace

Status install_signal_handlers(SignalHandler trap, SignalHandler fault)
{
    std::lock_guard<std::mutex> lk(g_mu);
    if (g_installed.load()) return Status::Ok();
    if (!real_sigaction() || !real_sigprocmask() || !real_pthread_sigmask())
        return Fail(-ENOSYS, "cannot find libc's sigaction/sigprocmask/pthread_sigmask");
    for (int sig : kSynchronousSignals) {
        struct sigaction old;
        if (real_sigaction()(sig, nullptr, &old) != 0)
            return Fail(-errno, "sigaction({}) failed: {}", sig, strerror(errno));
        store(sig, old);
    }
    for (int sig : kSynchronousSignals) {
        struct sigaction act;
        std::memset(&act, 0, sizeof act);
        act.sa_sigaction = reinterpret_cast<void (*)(int, siginfo_t *, void *)>(
            sig == SIGTRAP ? trap : fault);
        sigemptyset(&act.sa_mask);
        // SA_NODEFER: a probe hit inside a handler must reach the handler again (it counts a
        // miss). SA_ONSTACK for faults: a program that catches stack overflow on an
        // alternate stack keeps working.
        act.sa_flags = SA_SIGINFO | SA_NODEFER | SA_RESTART | (sig == SIGTRAP ? 0 : SA_ONSTACK);
        if (real_sigaction()(sig, &act, nullptr) != 0)
            return Fail(-errno, "cannot install the {} handler: {}", strsignal(sig), strerror(errno));
    }
    struct sigaction cur;
    real_sigaction()(SIGTRAP, nullptr, &cur);
    g_restorer = reinterpret_cast<uint64_t>(cur.sa_restorer);
    g_installed.store(true);
    // The calling thread may already block them (threads created later inherit the
    // interposed masks).
    sigset_t s;
    sigemptyset(&s);
    for (int sig : kSynchronousSignals) sigaddset(&s, sig);
    real_pthread_sigmask()(SIG_UNBLOCK, &s, nullptr);
    return Status::Ok();
}

uint64_t signal_restorer() { return g_restorer; }

void forward_signal(int sig, siginfo_t *info, ucontext_t *uc) noexcept
{
    ActionCopy a = load(sig);
    void *h = a.handler;
    bool kernel_sent = info->si_code > 0;  // a fault or trap, not kill()/tgkill()
    if (h == reinterpret_cast<void *>(SIG_IGN)) {
        // The kernel refuses to ignore a synchronous fault: it restores the default action.
        if (kernel_sent) restore_default_and_reraise(sig, uc);
        return;
    }
    if (h == reinterpret_cast<void *>(SIG_DFL)) {
        restore_default_and_reraise(sig, uc);
        return;
    }
    // Run the program's handler with the mask the kernel would have set for it.
    uint64_t ctx_mask;
    std::memcpy(&ctx_mask, &uc->uc_sigmask, sizeof ctx_mask);
    uint64_t m = ctx_mask | a.mask;
    if (!(a.flags & SA_NODEFER)) m |= sigbit(sig);
    m &= ~sigbit(SIGTRAP);
    uint64_t saved;
    raw_sigprocmask(SIG_SETMASK, &m, &saved);
    if (a.flags & SA_RESETHAND) {
        struct sigaction dfl;
        std::memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        store(sig, dfl);
    }
    if (a.flags & SA_SIGINFO)
        reinterpret_cast<void (*)(int, siginfo_t *, void *)>(h)(sig, info, uc);
    else
        reinterpret_cast<void (*)(int)>(h)(sig);
    raw_sigprocmask(SIG_SETMASK, &saved, nullptr);
}

}  // namespace liveprobe::os

using namespace liveprobe::os;

// ---- Interposed libc functions (found before libc's by the dynamic linker) ----

LP_EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *old) noexcept
{
    if (sig > 0 && sig < NSIG && managed(sig) && g_installed.load(std::memory_order_acquire)) {
        std::lock_guard<std::mutex> lk(g_mu);
        if (old) to_sigaction(load(sig), old);
        if (act) store(sig, *act);
        return 0;
    }
    if (!real_sigaction()) {
        errno = ENOSYS;
        return -1;
    }
    return real_sigaction()(sig, act, old);
}

LP_EXPORT sighandler_t signal(int sig, sighandler_t handler) noexcept
{
    struct sigaction act, old;
    std::memset(&act, 0, sizeof act);
    act.sa_handler = handler;
    sigemptyset(&act.sa_mask);
    act.sa_flags = SA_RESTART;  // glibc's BSD semantics for signal()
    if (sigaction(sig, &act, &old) != 0) return SIG_ERR;
    return old.sa_handler;
}

LP_EXPORT int sigprocmask(int how, const sigset_t *set, sigset_t *old) noexcept
{
    sigset_t buf;
    return real_sigprocmask()(how, without_ours(how, set, &buf), old);
}

LP_EXPORT int pthread_sigmask(int how, const sigset_t *set, sigset_t *old) noexcept
{
    sigset_t buf;
    return real_pthread_sigmask()(how, without_ours(how, set, &buf), old);
}
