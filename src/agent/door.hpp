// The agent's door: how a tool reaches the agent of a process, each end proven to the other by
// the kernel (docs/DESIGN-NOTES.md, "The door").
//
// The agent holds both ends of a socket pair (SOCK_SEQPACKET): `in`, which it reads, and `out`,
// bound to an abstract name that starts with kDoorLabel, which says what it is. A tool takes a
// copy of `out` out of the process with pidfd_getfd(2), which the kernel grants only to a caller
// that may ptrace the process at that moment (PTRACE_MODE_ATTACH_REALCREDS: the same user while
// the process is dumpable, Yama's ptrace_scope, the LSMs, CAP_SYS_PTRACE over the process's user
// namespace), and sends through it one end of a fresh stream socket pair of its own, which the
// agent then serves as a connection. The tool knows the agent is the process's (the descriptor
// came out of that process, named by a pidfd); the agent knows its client may ptrace it (it
// reached the door). One connection a request: every request passes the kernel's check anew.
// No file anywhere: nothing for another user to squat, in any mount or pid namespace.
#pragma once

#include <sys/types.h>

#include <string>

#include "os/linux/high_fd.hpp"

namespace liveprobe::agent {

// The start of the door's abstract socket name; the rest is the pid and a random suffix.
inline constexpr const char kDoorLabel[] = "liveprobe-door:";

// The agent's side. Both ends close-on-exec, at liveprobe's high descriptors.
struct Door {
    int in = -1;
    int out = -1;
    os::FdIdentity in_id, out_id;
};

// Opens a door: 0, or -errno with *why.
int open_door(Door *d, std::string *why);
// Whether both ends are still the agent's: a program may close them (a daemon's closefrom) and
// reuse the numbers for files of its own.
bool door_is_ours(const Door &d);
// Closes the ends that are still the agent's; *d emptied.
void close_door(Door *d);
// One message from the door: the stream socket it carried (close-on-exec, at a high
// descriptor), -1 for a message without one (dropped, as is anything else it carried), or
// -errno: -EAGAIN when none waits, -ECONNRESET for an empty message (what a door that was shut
// reads), another when the door is broken.
int take_connection(int in);

// The tool's side: a stream socket connected to the agent of process `pid` through its door,
// or -errno with *why: -ESRCH no such process, -EPERM the caller may not ptrace it (the
// kernel's verdict), -ENOENT no agent (no door) in it, -EPROTONOSUPPORT an agent older than
// the door listens there on a socket file (named, never connected to), -ENOSYS a kernel
// without pidfd_getfd (before Linux 5.6).
int connect_through_door(pid_t pid, std::string *why);

}  // namespace liveprobe::agent
