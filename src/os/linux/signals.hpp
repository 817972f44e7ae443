// liveprobe's signal handlers and the program's own.
//
// liveprobe owns SIGTRAP (its breakpoints) and the synchronous fault signals SIGSEGV, SIGBUS,
// SIGFPE and SIGILL (faults inside probe handlers and inside out-of-line copies). The program
// keeps its own handlers for them: the actions it had when liveprobe installed its own, and
// every action it sets afterwards, are recorded (sigaction() and signal() are interposed)
// and reached through forward_signal(), so the program sees exactly what it would without
// liveprobe. sigprocmask() and pthread_sigmask() are interposed so no thread blocks SIGTRAP
// or the fault signals: a thread that blocks SIGTRAP and hits an int3 is killed by the
// kernel, and so is one whose handler faults with the fault's signal blocked.
#pragma once

#include <signal.h>
#include <ucontext.h>

#include <cstdint>

#include "core/error.hpp"

namespace liveprobe::os {

using SignalHandler = void (*)(int, siginfo_t *, ucontext_t *);

// Installs `trap` for SIGTRAP and `fault` for the fault signals, once per process.
Status install_signal_handlers(SignalHandler trap, SignalHandler fault);

// Delivers a signal liveprobe received but does not own to the program, as the kernel would
// have: its handler with its sa_mask and flags, or its default action (which may end the
// process: the signal is re-raised with the default action restored). uc is the context the
// program's handler sees and may change. Async-signal-safe.
void forward_signal(int sig, siginfo_t *info, ucontext_t *uc) noexcept;

// The sa_restorer glibc installs with every handler (__restore_rt): probing it would make
// every signal return recurse, so it is on the blacklist.
uint64_t signal_restorer();

// Signals liveprobe must receive even when the program blocks them, as a kernel mask.
constexpr uint64_t sigbit(int sig) { return uint64_t{1} << (sig - 1); }
constexpr uint64_t kFaultSignals = sigbit(SIGSEGV) | sigbit(SIGBUS) | sigbit(SIGFPE) | sigbit(SIGILL);
// SIGTRAP and the fault signals: liveprobe's int3s and its handlers' faults raise them, and the
// kernel kills a thread that gets one while blocking it, so no thread may block them (the
// interposers here, the agent's own thread, the thread-stop helper after an attach).
inline constexpr int kSynchronousSignals[] = {SIGTRAP, SIGSEGV, SIGBUS, SIGFPE, SIGILL};
constexpr uint64_t kSynchronousMask = sigbit(SIGTRAP) | kFaultSignals;

}  // namespace liveprobe::os
