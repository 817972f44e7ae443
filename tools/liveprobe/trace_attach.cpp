// Starting a trace session in a running process (trace_attach.hpp).
#include "trace_attach.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include <fmt/format.h>

#include "agent/channel.hpp"
#include "commands.hpp"
#include "injector.hpp"
#include "process.hpp"
#include "progress_line.hpp"

namespace liveprobe::tool {

// 1. The agent, injected unless it runs there already.
// 2. trace-start with the specs, the session `owned`: it lasts as long as the connection the
//    reply leaves open (if the tool dies, however, the agent removes the probes).
// 3. What was placed, on the breakpoint path, or not traced: said.
// 4. The session's memory: passed with the reply, or (an older agent) opened by its number
//    through /proc/PID/fd; mapped. On a failure here the session is stopped again.
bool start_session(const Opts &o, const char *mode, int pid, Image &im, SessionHandles *h)
{
    std::string why;
    AttachReport rep;
    if (attach_agent(pid, &rep, &why) < 0) {
        complain(fmt::format("trace: attach {}: {}", pid, why));
        return false;
    }
    std::vector<std::string> args{std::string(mode) + (o.no_follow ? ":nofollow" : "") + ":owned" +
                                      (o.verbose ? ":verbose" : ""),
                                  std::to_string(o.maxactive)};
    args.insert(args.end(), o.specs.begin(), o.specs.end());
    std::fprintf(stderr, "liveprobe: placing probes in process %d...\n", pid);
    agent::Reply reply;
    auto ticker = std::make_unique<ProgressTicker>(
        [pid](double s) { return fmt::format("liveprobe: placing probes in process {}: {:.1f} s", pid, s); });
    const int asked = agent::request(pid, "trace-start", args, &reply, &why, 300000, &h->owner_conn);
    ticker.reset();  // the line cleared before what follows is said
    if (asked < 0) {
        std::string ignored;
        auto now = process_info(pid, &ignored);
        if (!now || now->state == 'Z') why = fmt::format("process {} exited while its probes were placed", pid);
        complain(fmt::format("trace: {}", why));
        return false;
    }
    if (!reply.ok) {
        complain(fmt::format("trace: process {}: {}", pid, reply.reason));
        return false;
    }
    int fd = -1;
    size_t skipped = 0;
    // An agent older than the :owned option closed the connection after its reply: the
    // session is then stopped by the tool's trace-stop only, as it was.
    if (std::find(reply.lines.begin(), reply.lines.end(), "owned") == reply.lines.end() && h->owner_conn >= 0) {
        close(h->owner_conn);
        h->owner_conn = -1;
        std::fprintf(stderr,
                     "liveprobe: the agent in process %d is older than this tool: if the tool is killed, "
                     "the probes stay until the next trace (restart the program for a current agent)\n",
                     pid);
    }
    for (const std::string &l : reply.lines) {
        if (l.rfind("session ", 0) == 0) h->stop_args = {l.substr(8)};  // agents before sessions side by side: none
        if (l.rfind("memfd ", 0) == 0) fd = std::atoi(l.c_str() + 6);
        if (l.rfind("placed ", 0) == 0) std::fprintf(stderr, "liveprobe: %s\n", l.c_str());
        if (l.rfind("slow ", 0) == 0 && !o.verbose)
            std::fprintf(stderr, "liveprobe: on the breakpoint path: %s\n", l.c_str() + 5);
        if (l.rfind("slowprobe ", 0) == 0) std::fprintf(stderr, "liveprobe: on the breakpoint path: %s\n", l.c_str() + 10);
        if (l.rfind("skipped ", 0) == 0 && skipped++ < 5) std::fprintf(stderr, "liveprobe: not traced: %s\n", l.c_str() + 8);
    }
    if (skipped > 5) std::fprintf(stderr, "liveprobe: ... and %zu more not traced\n", skipped - 5);
    const bool passed = std::find(reply.lines.begin(), reply.lines.end(), "memfd passed") != reply.lines.end();
    int mfd = passed ? reply.fd : open(fmt::format("/proc/{}/fd/{}", pid, fd).c_str(), O_RDWR | O_CLOEXEC);
    if (!passed && reply.fd >= 0) close(reply.fd);
    if (passed && mfd < 0) errno = EPROTO;
    if (mfd < 0 || !(im.shm.base = map_session(mfd, &im.shm.bytes, &why))) {
        complain(fmt::format("trace: the trace's shared memory in process {}: {}", pid,
                             mfd < 0 ? std::string(std::strerror(errno)) : why));
        if (mfd >= 0) close(mfd);
        stop_session(pid, *h);
        return false;
    }
    close(mfd);
    return true;
}

void stop_session(int pid, SessionHandles &h)
{
    agent::Reply reply;
    std::string why;
    agent::request(pid, "trace-stop", h.stop_args, &reply, &why);  // publishes the misses
    if (h.owner_conn >= 0) close(h.owner_conn);
    h.owner_conn = -1;
}

}  // namespace liveprobe::tool
