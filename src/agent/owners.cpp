#include "agent/owners.hpp"

#include <unistd.h>

#include <fmt/format.h>

#include "agent/keeper.hpp"
#include "agent/log_ring.hpp"
#include "os/linux/clock.hpp"
#include "os/linux/fd_table.hpp"

namespace liveprobe::agent {

using os::clock::monotonic_ns;

Owner g_owners[trace::kSessions];

// Watches fd as session s's owner's (the agent's thread, or before it starts).
void own(uint32_t s, int fd)
{
    g_owners[s].fd = fd;
    g_owners[s].file = os::identity_of(fd);
    g_owners[s].process = getpid();
    g_owners[s].in_program = !os::in_own_fd_table();
}

// Whether session s's owner descriptor is still the one own() was given.
bool owner_fd_is_ours(uint32_t s)
{
    return os::is_same_file(g_owners[s].fd, g_owners[s].file);
}

// "held by tool pid N", "started by pid N", "started with the program": who session s is of.
std::string owner_text(uint32_t s)
{
    const Owner &o = g_owners[s];
    return o.fd >= 0 ? fmt::format("held by tool pid {}", o.pid)
           : o.pid > 0 ? fmt::format("started by pid {}", o.pid)
                       : std::string("started with the program");
}

// Session s's owner is no longer followed (its session stopped).
void drop_owner(uint32_t s)
{
    const Owner o = g_owners[s];
    g_owners[s] = Owner();
    if (o.fd < 0) return;
    if (os::is_same_file(o.fd, o.file)) close(o.fd);
    if (o.in_program && os::in_own_fd_table())  // and the program's copy, which children inherit
        keeper_run([&] {
            if (os::is_same_file(o.fd, o.file)) close(o.fd);
        });
}

// The connection of session s's owner closed (or sent something, which no owner does): the
// tool is gone without its trace-stop; or, `by_program`, the program closed the agent's end of
// it (a closefrom). Its session stops, and the log says so.
void owner_gone(uint32_t s, bool by_program)
{
    const pid_t owner = g_owners[s].pid;
    // In a forked child, the end of the tool's connection is the end of the session, however
    // it ended: the tool spoke to the parent's agent only.
    const bool child = g_owners[s].process != 0 && g_owners[s].process != getpid();
    drop_owner(s);
    trace::Started started;
    trace::Mode mode;
    if (trace::running(s, &started, &mode) < 0) {
        if (s == 0) trace::cancel_start_from_environment();  // `-- CMD`: the tool died before main
        return;
    }
    const uint64_t t0 = monotonic_ns();
    std::string why;
    std::string line;
    if (int r = trace::stop(s, &why); r < 0)
        line = fmt::format("liveprobe: the trace session's tool (pid {}) is gone; stopping its session failed: {}\n",
                           owner, why);
    else if (child)
        line = fmt::format("liveprobe: the trace session of tool pid {} ended: removed its {} probes from this forked "
                           "child in {:.1f} ms\n",
                           owner, started.placed, static_cast<double>(monotonic_ns() - t0) / 1e6);
    else if (by_program)
        line = fmt::format("liveprobe: the program closed the connection of the trace session's tool (pid {}): removed "
                           "its {} probes in {:.1f} ms\n",
                           owner, started.placed, static_cast<double>(monotonic_ns() - t0) / 1e6);
    else
        line = fmt::format("liveprobe: the trace session's tool (pid {}) is gone without stopping it: removed its {} "
                           "probes in {:.1f} ms\n",
                           owner, started.placed, static_cast<double>(monotonic_ns() - t0) / 1e6);
    log_ring().write(line.data(), line.size());
}

}  // namespace liveprobe::agent
