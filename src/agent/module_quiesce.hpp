// Is any thread inside a module's code? What `rmmod` waits on before it unmaps a module.
//
// Every other thread is stopped (os::WorldStop) and looked at, without allocating anything while
// they are stopped (one of them may hold malloc's lock, or the symbol tables'):
//   - its instruction pointer in the module's text;
//   - its instruction pointer in the out-of-line slot or detour of a probe placed on the module's
//     text (it will jump back into the module);
//   - its stack, from its stack pointer up to 256 KiB, holding a return address into the
//     module's text (a word in the text that follows a call instruction): a thread in a libc
//     call the module's code made (a usleep in a loop of the module's own thread).
// The stack scan is conservative: a stale word of an old frame that happens to follow a call
// counts too (the caller waits, and gives up after its own time limit).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace liveprobe::agent {

struct Occupant {
    pid_t tid = 0;
    uint64_t where = 0;     // its ip, or the return address found on its stack
    bool on_stack = false;  // where is a return address, not the ip
};

// 1 with *out (a thread is inside), 0 (none), or -errno with *why (the threads could not be
// stopped: a debugger traces the process, or ptrace is refused).
int find_occupant(const std::vector<std::pair<uint64_t, uint64_t>> &text, Occupant *out, std::string *why);

}  // namespace liveprobe::agent
