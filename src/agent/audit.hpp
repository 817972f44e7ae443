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

// The agent was started by an attach: the tool that did it (the thread's tracer) named.
void audit_attach();

}  // namespace liveprobe::agent
