// How `liveprobe trace -- CMD` follows exec: the programs that the started program and its
// children execute are traced too, each image with the same specs, before its main.
//
// The tool listens on a socket of its own in the runtime directory (channel.hpp: the user's
// only, 0700), `follow-TOOLPID.sock`, whose path it puts in LIVEPROBE_TRACE_FOLLOW beside
// LIVEPROBE_TRACE; both stay in the environment, so every image the program's tree executes
// (with LD_PRELOAD and LIVEPROBE_AGENT, which stay too) starts a session:
//   1. The image's agent connects to the socket (its constructor, before main) and keeps the
//      connection as the session's owner (agent.cpp): when the tool ends or dies, the
//      connection closes and the session stops, as a `-p` tool's connection does.
//   2. Before main, the session starts in a memfd of the image's own (the probes are the new
//      program's); the image sends one message: its report (the lines below) and, when the
//      session runs, the memfd (SCM_RIGHTS). The tool maps it, reads the names and events in
//      it, and keeps it after the process is gone: a test program that runs for 2 ms is read
//      whole.
//   3. Forked children share the image's memfd and connection (close-on-exec: an image that
//      executes another connects again).
// Nothing is printed on the program's stderr: a test suite that compares a program's output
// sees it unchanged; the tool says what there is to say.
//
// The report, one message of lines:
//   image PID EXE          the process and its executable (/proc/self/exe)
//   placed N OPT MS        the session runs: N probes, OPT on the jump path, placed in MS ms
//   slow TEXT              a reason probes are on the breakpoint path (a few)
//   skipped TEXT           a function not probed, and why (the first few)
//   untraced WHY           no session: the image runs untraced
#pragma once

#include <sys/types.h>

#include <string>

namespace liveprobe::agent {

// The socket path a tool of pid `tool` follows exec on.
std::string follow_path(pid_t tool);

// The tool: listens on `path` (made 0600; removed first if stale): the socket, non-blocking
// and close-on-exec, or -errno with *why.
int follow_listen(const std::string &path, std::string *why);
// The tool: one connection's report and memfd (-1 when none came with it): false when the
// connection sent none (closed first, or not a report).
bool follow_receive(int conn, std::string *report, int *memfd);

// The image: connects to `path`: the connection (close-on-exec), the tool's pid in *tool, or -1
// (no tool listens: it is gone).
int follow_connect(const std::string &path, pid_t *tool);
// The image: sends its report and its memfd (-1: none). false when the tool is gone.
bool follow_send(int conn, const std::string &report, int memfd);

}  // namespace liveprobe::agent
