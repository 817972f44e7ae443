#include "agent/guarded_call.hpp"

#include <pthread.h>
#include <signal.h>

#include "core/dispatch.hpp"
#include "core/registry.hpp"
#include "core/thread_state.hpp"

namespace liveprobe::agent {

GuardedOutcome run_module_function(int (*init)(), void (*exit_fn)())
{
    GuardedOutcome out;
    // The module's code is the program's: its calls hit probes, as they would on its own threads
    // (the agent's thread is otherwise liveprobe's own: core::QuietThread).
    core::QuietThread loud(false);
    core::ThreadRecord *rec = core::this_thread_claim();
    if (rec == nullptr || !core::prepare_guarded_calls().ok()) {  // cannot guard: run it as it is
        if (init) out.result = init();
        else exit_fn();
        out.returned = true;
        return out;
    }
    // The signal mask before: a fault leaves through a longjmp out of the signal handler, which
    // skips the sigreturn that would unmask the signal (under TSan, whose wrapper runs handlers
    // with signals blocked, the next fault then killed the process).
    sigset_t mask;
    pthread_sigmask(SIG_SETMASK, nullptr, &mask);
    siginfo_t info{};
    int result = 0;
    out.returned = core::run_guarded(
        rec,
        [&] {
            if (init) result = init();
            else exit_fn();
        },
        &out.sig, &info);
    out.result = result;
    if (!out.returned) {
        out.addr = reinterpret_cast<uint64_t>(info.si_addr);
        pthread_sigmask(SIG_SETMASK, &mask, nullptr);
    }
    return out;
}

}  // namespace liveprobe::agent
