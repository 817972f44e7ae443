// The agent's control channel: the request protocol (used by the agent inside a process and by
// the `liveprobe` tool), over a connection made through the agent's door (door.hpp: the kernel
// lets only a caller that may ptrace the process take it).
//
// Protocol, version 2: the client sends one line, "liveprobe/2 VERB [ARG ...]" (arguments
// encoded, see encode_arg); the agent
// answers with data lines, each starting with ". ", then one last line, "ok" or
// "error ERRNO REASON". One request per connection; the agent closes it after the reply, but
// for a trace session's owner (trace-start with MODE:owned), whose connection the agent keeps:
// the session's probes are removed when it closes, however the tool ended. A request of another
// version is answered "error EPROTONOSUPPORT ..." naming the versions the agent speaks.
#pragma once

#include <sys/types.h>
#include <sys/un.h>

#include <string>
#include <vector>

namespace liveprobe::agent {

inline constexpr int kProtocolVersion = 2;

// Arguments travel with every byte <= 0x20, '%' and 0x7f as %XX (the empty one as a lone '%').
std::string encode_arg(const std::string &a);
std::string decode_arg(const std::string &a);
inline constexpr const char *kProtocolPrefix = "liveprobe/";

// The runtime directory of user `uid` (not created).
std::string runtime_dir(uid_t uid);

// Removes from uid's runtime directory the follow sockets of tools that no longer exist (a tool
// removes its own at exit, not when it is killed): how many it removed.
int sweep_stale_sockets(uid_t uid);

// Creates (or checks) the runtime directory of the calling process's real user: 0 or -errno,
// with *why saying what is wrong.
int ensure_runtime_dir(std::string *why);

// s with every control character (below 0x20 but tab, 0x7f, and the C1 controls as UTF-8
// encodes them) written as \xNN: text of another process's choosing, made safe to print on a
// terminal (an escape sequence can retitle a window or rewrite what was shown).
std::string escape_controls(const std::string &s);

// A parsed request line.
struct Request {
    pid_t peer = 0;  // the process that sent it (SO_PEERCRED), set by the agent
    int version = 0;
    std::string verb;
    std::vector<std::string> args;
};
// False (with *why) when the line is not a request.
bool parse_request(const std::string &line, Request *out, std::string *why);

// A reply as the client sees it.
struct Reply {
    bool ok = false;
    int err = 0;                      // positive errno when !ok
    std::string reason;               // when !ok
    std::vector<std::string> lines;   // the data lines, without ". "
    // The descriptor the reply carried (SCM_RIGHTS: a trace session's memory, "memfd passed"),
    // close-on-exec, for the caller to check, use and close; -1 when none.
    int fd = -1;
};

// Connects to the agent of `pid` through its door (door.hpp: the kernel checks that the caller
// may ptrace the process), sends "liveprobe/2 VERB ARGS", reads the reply. -errno (ENOENT: no
// agent; EPERM: the caller may not ptrace the process; ESRCH: no such process; ETIMEDOUT) with
// *why, or 0.
// With `held`: the reply is complete at its last line, and the connection stays open in *held
// (-1 when the request failed): for a request whose effect lasts as long as the connection (a
// trace session started with its "owned" option ends when the connection closes).
int request(pid_t pid, const std::string &verb, const std::vector<std::string> &args, Reply *out,
            std::string *why, int timeout_ms = 5000, int *held = nullptr);

}  // namespace liveprobe::agent
