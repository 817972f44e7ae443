// Loading the agent into a running process (DESIGN.md "Out of process").
//
// Steps (each a kill point for the tests, see ptrace_thread.hpp):
//   1. Check the process: it exists, it is not a zombie or stopped, it is the caller's (or the
//      caller is root). An agent that answers already: done.
//   2. Find in it: libc's dlopen, the signal-return trampoline, and the code that holds the
//      locks dlopen needs (the dynamic loader, malloc and friends, pthread_create, fork, exit).
//   3. Stop one thread at a time (PTRACE_SEIZE + PTRACE_INTERRUPT) until one is found whose
//      instruction pointer and stack hold no address in that code: it holds neither the
//      loader's lock nor malloc's. The other threads are never stopped: whatever lock they
//      hold, they release.
//   4. Make that thread call dlopen(agent) (unless the library is there already, linked in or
//      loaded before), then liveprobe_agent_start_attached(), through ptrace_thread's call,
//      which puts the thread back exactly as it was. In a process whose root does not have the
//      agent's file (a container, a chroot), the agent is copied into a memfd of the process
//      and loaded from there, its libraries from the process's root; a root that lacks some is
//      refused with their names (injector.cpp, load_from_memfd).
//   5. Ask the agent through its door (agent/door.hpp): it answers.
#pragma once

#include <sys/types.h>

#include <string>

namespace liveprobe::tool {

struct AttachReport {
    bool already_running = false;  // an agent answered before anything was done
    bool loaded_library = false;   // dlopen was called (else the library was there)
    pid_t thread = 0;              // the thread that made the calls
    double ms = 0;                 // wall time of the whole attach
};

// 0, or -errno with *why.
int attach_agent(pid_t pid, AttachReport *out, std::string *why);

}  // namespace liveprobe::tool
