// Who owns each trace session of the agent's, and what ends it when that owner is gone.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "os/linux/high_fd.hpp"
#include "trace/session.hpp"

namespace liveprobe::agent {

// The owner of each trace session, by its slot (trace/session.hpp; the agent's thread only, or
// before it starts): the tool that started it, and the descriptor the session lasts as long
// as, -1 when none: the connection that tool holds (trace-start MODE:owned, `trace -p`), or the
// read end of a pipe whose write end it holds (LIVEPROBE_TRACE_OWNER_FD, `trace -- CMD`:
// inherited by the program, and by the children it forks, whose agents watch it too). When it
// closes without a trace-stop (the tool was killed, lost its terminal, crashed, or closed the
// pipe to stop tracing), the session is stopped. Its identity is kept: a program may close every
// descriptor it did not open (closefrom) and reuse the number, and the agent must then neither
// act on nor close the program's descriptor.
// The agent's thread watches its own copy (os/linux/fd_table.hpp: the program cannot close
// it); an owner descriptor from the environment has its first copy in the program's table too,
// which forked children inherit, closed by the keeper when the session ends (`in_program`).
struct Owner {
    pid_t pid = 0;
    int fd = -1;
    os::FdIdentity file;
    pid_t process = 0;  // the process the session was started in (a forked child has its copy)
    bool in_program = false;  // fd is (also) a descriptor of the program's table
};
extern Owner g_owners[trace::kSessions];

// Watches fd as session s's owner's (the agent's thread, or before it starts).
void own(uint32_t s, int fd);
// Whether session s's owner descriptor is still the one own() was given.
bool owner_fd_is_ours(uint32_t s);
// "held by tool pid N", "started by pid N", "started with the program": who session s is of.
std::string owner_text(uint32_t s);
// Session s's owner is no longer followed (its session stopped): its descriptors closed, in
// the agent's table and (by the keeper) in the program's.
void drop_owner(uint32_t s);
// The connection of session s's owner closed (or sent something, which no owner does): the
// tool is gone without its trace-stop; or, `by_program`, the program closed the agent's end of
// it (a closefrom, when the agent works in the program's table). Its session stops, and the
// log says so.
void owner_gone(uint32_t s, bool by_program);

}  // namespace liveprobe::agent
