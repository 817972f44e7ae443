#include "agent/audit.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "agent/log_ring.hpp"

namespace liveprobe::agent {
namespace {

constexpr size_t kMaxShown = 240;  // of a command line, or of a request's arguments

std::string shorten(std::string s)
{
    if (s.size() > kMaxShown) s = s.substr(0, kMaxShown) + "...";
    return s;
}

// Process pid as "uid U pid P (COMMAND LINE)": what /proc says of it, escaped (the command line
// is the peer's to choose).
std::string who(pid_t pid, long uid)
{
    if (pid <= 0) return fmt::format("uid {} (a process outside this pid namespace)", uid);
    std::ifstream f(fmt::format("/proc/{}/cmdline", pid), std::ios::binary);
    std::string cmd((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    while (!cmd.empty() && cmd.back() == '\0') cmd.pop_back();
    for (char &c : cmd)
        if (c == '\0') c = ' ';
    return fmt::format("uid {} pid {} ({})", uid, pid, escape_controls(shorten(cmd.empty() ? "?" : cmd)));
}

void log(const std::string &line)
{
    const std::string text = line + "\n";
    log_ring().write(text.data(), text.size());
}

// A field of /proc/PATH/status ("TracerPid:", "Uid:"): its first number, -1 when none.
long status_field(const std::string &path, const char *field)
{
    std::ifstream f(path);
    for (std::string l; std::getline(f, l);)
        if (l.rfind(field, 0) == 0) return std::strtol(l.c_str() + std::strlen(field), nullptr, 10);
    return -1;
}

}  // namespace

void audit_request(const struct ucred &peer, const Request &rq, bool ok, int err, const std::string &reason)
{
    static const char *const kAudited[] = {"insmod", "rmmod", "trace-start", "trace-stop", "detach"};
    bool audited = false;
    for (const char *v : kAudited) audited = audited || rq.verb == v;
    if (!audited) return;
    std::string args;
    for (const std::string &a : rq.args) args += " " + a;
    log(fmt::format("liveprobe: audit: {}: {}{}: {}", who(peer.pid, peer.uid), rq.verb,
                    escape_controls(shorten(args)),
                    ok ? std::string("done") : fmt::format("refused ({}: {})", err, escape_controls(reason))));
}

long attach_tracer() noexcept
{
    char buf[2048];
    const int fd = open("/proc/thread-self/status", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return -1;
    buf[n] = 0;
    const char *at = std::strstr(buf, "\nTracerPid:");
    return at ? std::strtol(at + 11, nullptr, 10) : -1;
}

void audit_attach(long tracer)
{
    const long uid = tracer > 0 ? status_field(fmt::format("/proc/{}/status", tracer), "Uid:") : -1;
    log(tracer > 0 ? fmt::format("liveprobe: audit: {}: attached (the agent started)", who(static_cast<pid_t>(tracer), uid))
                   : std::string("liveprobe: audit: attached by a tool this process cannot see (the agent started)"));
}

}  // namespace liveprobe::agent
