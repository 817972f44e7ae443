// A trace session started in a running process (trace -p PID, trace --serve): the agent injected
// if it is not there yet, the session asked for with `trace-start`, and its shared memory mapped
// (trace_attach.cpp).
#pragma once

#include <string>
#include <vector>

#include "trace_images.hpp"
#include "trace_options.hpp"

namespace liveprobe::tool {

// The session's handles in the process: the connection it lasts as long as (-1: an agent older
// than owned sessions), and what trace-stop names to stop this one.
struct SessionHandles {
    int owner_conn = -1;
    std::vector<std::string> stop_args;
};

// Starts a session of `mode` ("count", "hist", "events", "tree") with o's specs in process pid,
// saying on stderr what was placed, and maps its memory into im.shm: false when it could not
// (said why; nothing is left in the process).
bool start_session(const Opts &o, const char *mode, int pid, Image &im, SessionHandles *h);
// The same, with the handles apart (cmd_trace.cpp's loop keeps them in variables of its own).
inline bool start_session(const Opts &o, const char *mode, int pid, Image &im, int *owner_conn,
                          std::vector<std::string> *stop_args)
{
    SessionHandles h;
    const bool ok = start_session(o, mode, pid, im, &h);
    *owner_conn = h.owner_conn;
    *stop_args = std::move(h.stop_args);
    return ok;
}

// Stops the session (its misses published) and closes its connection.
void stop_session(int pid, SessionHandles &h);

}  // namespace liveprobe::tool
