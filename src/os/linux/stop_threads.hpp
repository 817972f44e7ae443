// Stopping every other thread of the process, to patch code that spans several instructions.
//
// Mechanism: ptrace, from a helper process that shares this process's memory (clone with
// CLONE_VM, not CLONE_THREAD: a separate thread group, which ptrace allows; no page tables are
// copied). ptrace-stops restart interrupted system calls transparently, `nanosleep` and
// `clock_nanosleep` included (a signal-based park would make them fail with EINTR even under
// SA_RESTART, see DESIGN.md "Stopping threads"), and reach threads that block every signal.
//
// Protocol:
//   1. The caller lists the threads (/proc/self/task), makes the helper its permitted tracer
//      (prctl PR_SET_PTRACER, for Yama), and starts the helper on a stack of its own.
//   2. The helper seizes and interrupts each listed thread, waits for each stop, reads its
//      registers, and tells the caller (futex). Threads created meanwhile are found by listing
//      again until the list is stable.
//   3. The caller inspects and changes the saved instruction pointers (WorldStop::threads()),
//      patches code, then resume() lets the helper write changed registers back, detach every
//      thread and exit.
// The caller must hold no lock another thread needs to reach a stop: a thread blocked on a
// mutex the caller holds still stops (ptrace stops it wherever it is).
//
// A process already traced by a debugger, or where ptrace is refused, cannot be stopped:
// stop() fails with the reason, and the caller leaves its probes on the breakpoint path.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <vector>

#include "core/error.hpp"

namespace liveprobe::os {

struct StoppedThread {
    int tid = 0;
    uint64_t ip = 0;      // where the thread stopped
    uint64_t new_ip = 0;  // where it resumes (set by the caller; = ip to leave it)
    uint64_t sp = 0;      // its stack pointer
    uint64_t gpr[16] = {};  // its 15 general registers and sp (r15 first, as in pt_regs)
};

class WorldStop {
public:
    WorldStop() = default;
    WorldStop(const WorldStop &) = delete;
    WorldStop &operator=(const WorldStop &) = delete;
    ~WorldStop() { resume(); }

    // Stops every thread of the process but the calling one. With no other thread, does
    // nothing and succeeds.
    Status stop();
    std::vector<StoppedThread> &threads() { return threads_; }
    // Writes back changed instruction pointers and lets every thread run again.
    void resume();

    struct Shared;  // the caller's and the helper's common state (stop_threads.cpp)

private:
    std::vector<StoppedThread> threads_;
    Shared *shared_ = nullptr;
    void *stack_ = nullptr;
    pid_t helper_ = 0;
};

// In the child of fork(): the parent's helper is not the child's.
void stop_threads_forget_helper_after_fork();

// Reaps the last helper, which exits on its own after resume() and stays a zombie child of the
// process until reaped (by the next stop(), or by this: the agent's thread, after a request).
// Waits for it to exit: not on a hit path.
void stop_threads_reap_helper();

}  // namespace liveprobe::os
