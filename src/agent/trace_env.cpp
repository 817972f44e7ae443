// liveprobe_trace_from_environment(): the session `liveprobe trace ... -- CMD` asks for, started
// before the program's main (libliveprobe-start.so calls it), from the environment the tool set:
//   LIVEPROBE_TRACE          "MODE MAXACTIVE SPEC..." (each word encoded as the agent's
//                            protocol encodes arguments)
//   LIVEPROBE_TRACE_FD       the tool's memfd: in the program the tool started only
//   LIVEPROBE_TRACE_FOLLOW   the tool follows exec (agent/follow.hpp): every image the program's
//                            tree executes starts the session too, in a memfd of its own that it
//                            sends to the tool
//   LIVEPROBE_TRACE_NOFOLLOW the session does not follow forks (nor exec)
//   LIVEPROBE_TRACE_VERBOSE  each probe on the breakpoint path, named
// Without following, each variable is taken out of the environment (the programs the program
// runs are not traced); with it, the ones every image needs stay.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "agent/agent.hpp"
#include "agent/channel.hpp"
#include "agent/follow.hpp"
#include "core/thread_state.hpp"
#include "os/linux/environ.hpp"
#include "trace/rings.hpp"
#include "trace/session.hpp"

namespace liveprobe::agent {
namespace {

std::string exe_path()
{
    char buf[4096];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string("?");
}

// Before the first line the program says on a terminal: the line erased, where the tool may
// have its "placing probes" line (tools/liveprobe/progress_line.hpp) at that instant.
const char *fresh_line() { return isatty(STDERR_FILENO) == 1 ? "\r\033[K" : ""; }

// What the program the tool started says on its stderr, as `liveprobe trace -p` says it.
void print_started(const trace::Started &started, bool verbose)
{
    std::fprintf(stderr, "%sliveprobe: placed %zu probes (%zu jump-optimized) in %.1f ms\n", fresh_line(), started.placed,
                 started.optimized, started.place_ms);
    for (size_t i = 0; i < started.slow.size() && i < 3 && !verbose; ++i)
        std::fprintf(stderr, "liveprobe: on the breakpoint path: %s\n", started.slow[i].c_str());
    for (size_t i = 0; verbose && i < started.slow_each.size(); ++i)
        std::fprintf(stderr, "liveprobe: on the breakpoint path: %s\n", started.slow_each[i].c_str());
    // The first five, then how many more.
    for (size_t i = 0; i < started.skipped.size() && i < 5; ++i)
        std::fprintf(stderr, "liveprobe: not traced: %s\n", started.skipped[i].c_str());
    if (started.skipped.size() > 5)
        std::fprintf(stderr, "liveprobe: ... and %zu more not traced\n", started.skipped.size() - 5);
}

// What a followed image tells its tool instead (follow.hpp's report), the long lists capped.
std::string report_of(const trace::Started &started, bool verbose)
{
    std::string r = fmt::format("placed {} {} {:.1f}\n", started.placed, started.optimized, started.place_ms);
    const std::vector<std::string> &slow = verbose ? started.slow_each : started.slow;
    for (size_t i = 0; i < slow.size() && i < (verbose ? 200u : 3u); ++i) r += "slow " + slow[i] + "\n";
    for (size_t i = 0; i < started.skipped.size() && i < 5; ++i) r += "skipped " + started.skipped[i] + "\n";
    if (started.skipped.size() > 5) r += fmt::format("skipped ... and {} more\n", started.skipped.size() - 5);
    return r;
}

}  // namespace

// The steps, before main:
//  1. The request, parsed; the variables this image alone takes, out of the environment.
//  2. Which image this is: the program the tool started (its memfd), or one the tool follows
//     (its connection, made by the agent's constructor); neither (a tool that is gone): none.
//  3. The session, started on this (the main) thread, whose calls meanwhile are liveprobe's.
//  4. Said: on stderr by the program the tool started, to the tool by a followed image. A
//     session that cannot start ends the program the tool started with status 1, unless the
//     tool follows exec (the programs it executes may have what the specs name); a followed
//     image runs on untraced.
int start_trace_from_environment()
{
    const char *spec = secure_getenv("LIVEPROBE_TRACE");  // 1
    if (spec == nullptr) return 0;
    std::vector<std::string> words;
    std::istringstream in(spec);
    for (std::string w; in >> w;) words.push_back(decode_arg(w));
    const bool following = secure_getenv("LIVEPROBE_TRACE_FOLLOW") != nullptr;
    const bool follow_forks = secure_getenv("LIVEPROBE_TRACE_NOFOLLOW") == nullptr;
    const bool verbose = secure_getenv("LIVEPROBE_TRACE_VERBOSE") != nullptr;
    const char *fd_text = secure_getenv("LIVEPROBE_TRACE_FD");
    const int given_fd = fd_text ? std::atoi(fd_text) : -1;
    if (given_fd >= 0) fcntl(given_fd, F_SETFD, FD_CLOEXEC);  // the programs it executes: not theirs
    os::erase_env("LIVEPROBE_TRACE_FD");
    os::erase_env("LIVEPROBE_TRACE_NOFOLLOW");
    if (!following)
        for (const char *v : {"LIVEPROBE_TRACE", "LIVEPROBE_TRACE_VERBOSE"}) os::erase_env(v);
    const int conn = given_fd >= 0 ? -1 : followed_connection();  // 2
    if (given_fd < 0 && conn < 0) return 0;
    trace::Mode mode;
    std::string why;
    int r = -EINVAL;
    trace::Started started;
    if (words.size() < 3 || !trace::parse_mode(words[0], &mode)) {
        why = "LIVEPROBE_TRACE is not \"MODE MAXACTIVE SPEC...\"";
    } else {
        core::QuietThread quiet;  // 3: malloc, symbol reading: liveprobe's, not the program's
        r = trace::start(mode, {words.begin() + 2, words.end()}, std::atoi(words[1].c_str()), &started, &why, given_fd,
                         follow_forks, true);
    }
    if (given_fd >= 0 && r != 0) {  // the tool's memory: its "placing probes" line ends (rings.hpp ready)
        const uint32_t never = 2;  // not written: the tool says at the end that nothing was traced, as ever
        [[maybe_unused]] const ssize_t n = pwrite(given_fd, &never, sizeof never, offsetof(trace::Header, ready));
    }
    if (given_fd >= 0) close(given_fd);  // mapped: the session keeps no descriptor
    if (conn >= 0 && r != -ECANCELED) {  // 4 (cancelled: the tool is gone, its connection closed)
        std::string report = fmt::format("image {} {}\n", getpid(), exe_path());
        report += r == 0 ? report_of(started, verbose) : fmt::format("untraced {}\n", why);
        follow_send(conn, report, r == 0 ? started.memfd : -1);
        if (r == 0 && started.memfd >= 0) close(started.memfd);
        return 0;
    }
    if (r == 0) {
        print_started(started, verbose);
        return 0;
    }
    if (conn >= 0) return 0;
    if (r == -ECANCELED || following) {  // the program runs on, untraced, as after the tool's death
        std::fprintf(stderr, "%sliveprobe: trace in process %d: %s%s\n", fresh_line(), getpid(), why.c_str(),
                     r == -ECANCELED ? "" : "; it runs untraced, the programs it executes are traced");
        return 0;
    }
    std::fprintf(stderr, "%sliveprobe: trace in process %d: %s\n", fresh_line(), getpid(), why.c_str());
    std::exit(1);
}

// A program about to be executed that the loader runs set-uid or set-gid (secure mode): it
// ignores LD_PRELOAD, so the image cannot be followed; the tool is told so, as of an image that
// runs untraced (follow.hpp's report, without a memfd).
void tell_setuid_exec(const char *path, char *const envp[])
{
    const char *follow = nullptr;
    for (size_t i = 0; envp && envp[i]; ++i)
        if (std::strncmp(envp[i], "LIVEPROBE_TRACE_FOLLOW=", 23) == 0) follow = envp[i] + 23;
    struct stat st {};
    if (!follow || !path || stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return;
    const bool uid = (st.st_mode & S_ISUID) && st.st_uid != geteuid();
    const bool gid = (st.st_mode & S_ISGID) && (st.st_mode & S_IXGRP) && st.st_gid != getegid();
    struct statvfs fs {};
    if ((!uid && !gid) || (statvfs(path, &fs) == 0 && (fs.f_flag & ST_NOSUID))) return;  // nosuid: runs as any
    pid_t tool = 0;
    const int conn = follow_connect(follow, &tool);
    if (conn < 0) return;
    follow_send(conn,
                fmt::format("image {} {}\nuntraced a set-{}id program is not followed (the loader ignores "
                            "LD_PRELOAD for it)\n",
                            getpid(), path, uid ? 'u' : 'g'),
                -1);
    close(conn);
}

}  // namespace liveprobe::agent

extern "C" void liveprobe_trace_before_exec(const char *path, char *const envp[])
{
    const int saved = errno;  // the exec's errno is the program's
    liveprobe::agent::tell_setuid_exec(path, envp);
    errno = saved;
}

extern "C" int liveprobe_trace_from_environment(void) { return liveprobe::agent::start_trace_from_environment(); }
