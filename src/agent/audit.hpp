// The agent's audit trail (issue 32, item 3): who attached to the process, and who loaded or
// unloaded what, traced or stopped a trace, or detached, and when, in the process's log
// (`liveprobe dmesg`), each a line that starts "liveprobe: audit:".
#pragma once

#include <sys/socket.h>

#include <string>

#include "agent/channel.hpp"

namespace liveprobe::agent {

// A request that changes the process (insmod, rmmod, trace-start, trace-stop, detach) and its
// outcome: `peer` made the connection (SO_PEERCRED: its pid in this process's namespace, 0 when
// it has none here). Others are not logged (dmesg -f asks for the log every 200 ms).
void audit_request(const struct ucred &peer, const Request &rq, bool ok, int err, const std::string &reason);

// An attach: the tool that did it (the calling thread's tracer: the thread the tool made call
// the agent's start), -1 when this process cannot see it. On that thread, which the tool
// stopped wherever the program was (inside libstdc++'s locale code, perhaps, holding its
// mutex): raw system calls into a buffer on the stack, no lock, no allocation, no iostream.
long attach_tracer() noexcept;

// Logs an attach by `tracer` (attach_tracer). On the agent's thread, which may wait for the
// program's locks (an iostream takes libstdc++'s locale mutex).
void audit_attach(long tracer);

}  // namespace liveprobe::agent
