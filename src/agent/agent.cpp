#include "agent/agent.hpp"
#include "os/linux/environ.hpp"
#include "os/linux/clock.hpp"
#include "os/linux/fd_passing.hpp"
#include "os/linux/fd_table.hpp"
#include "os/linux/high_fd.hpp"

#include <malloc.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "agent/audit.hpp"
#include "agent/channel.hpp"
#include "agent/door.hpp"
#include "agent/follow.hpp"
#include "agent/keeper.hpp"
#include "agent/owners.hpp"
#include "agent/log_ring.hpp"
#include "agent/request_reader.hpp"
#include "agent/modules.hpp"
#include "core/error.hpp"
#include "core/kretprobe.hpp"
#include "core/registry.hpp"
#include "os/linux/signals.hpp"
#include "os/linux/stop_threads.hpp"
#include "symbols/symbols.hpp"
#include "core/thread_state.hpp"
#include "symbols/dwarf_params.hpp"
#include "os/linux/text_poke.hpp"
#include "trace/session.hpp"

#ifndef LIVEPROBE_VERSION
#define LIVEPROBE_VERSION "0.0.0"
#endif

namespace liveprobe::agent {
namespace {

// Guards the agent's start and its state below.
std::mutex g_mu;
bool g_running = false;
pid_t g_pid = 0;         // the process the running agent serves (a fork child starts its own)
// The door tools reach the agent through (door.hpp). A program may close its descriptors and
// reuse the numbers (`exec 3>&1` in a script, a daemon's closefrom), and the agent must then
// neither close nor read the program's files (a forked child's agent closed the script's fd 3,
// its copy of stdout): close_door and door_is_ours check each end's identity.
Door g_door;
std::atomic<bool> g_shutting{false};  // the program exits: the door was shut
std::atomic<const char *> g_reason{"api"};
// An attach the agent's thread has yet to log (audit_attach): the tool's pid, -1 unseen.
constexpr long kNoAttach = -2;
std::atomic<long> g_attach_tracer{kNoAttach};
uint64_t g_started_ns = 0;


using os::clock::monotonic_ns;

// ---- requests -------------------------------------------------------------------------------

struct Out {
    std::string text;
    int keep = -1;  // >= 0: the connection stays open after the reply, owner of this session
    int pass = -1;  // >= 0: a descriptor sent with the reply's first byte, then closed
    void line(const std::string &l) { text += l.empty() ? ".\n" : ". " + l + "\n"; }
    void ok() { text += "ok\n"; }
    void error(int err, const std::string &why)
    {
        text += fmt::format("error {} {}\n", err, why);
        failed = err;
        reason = why;
    }
    int failed = 0;  // the error's, for the audit trail
    std::string reason;
};

std::string describe(const core::ProbeSummary &s)
{
    std::string where = symbols::describe(s.addr);
    return fmt::format("probe {:#x} {} hits={} missed={} faults={} {}", s.addr, where,
                       s.counters.hits_text(),
                       s.counters.nmissed, s.counters.faults,
                       s.counters.optimized ? std::string("optimized")
                                            : fmt::format("breakpoint ({})", s.counters.why_not ? s.counters.why_not : "?"));
}

// "detach [force]": removes what was placed through the agent (the trace session, every
// module: probes the program registered itself stay) and stops the agent once the reply is
// sent (g_detach). Refused while a tool holds a live session, unless forced.
bool g_detach = false;  // the agent's thread only
bool g_trim = false;    // the agent's thread only: the last request removed something (give_memory_back)

void detach(const Request &rq, Out &out)
{
    const bool force = !rq.args.empty() && rq.args[0] == "force";
    trace::Started started;
    trace::Mode mode;
    const std::vector<uint32_t> sessions = trace::running_sessions();
    std::vector<std::string> live;  // "tool pid N (M probes)" of each session a tool holds
    for (uint32_t s : sessions)
        if (g_owners[s].fd >= 0 && trace::running(s, &started, &mode) == 0)
            live.push_back(fmt::format("tool pid {} ({} probes)", g_owners[s].pid, started.placed));
    if (live.size() == 1 && !force)
        return out.error(EBUSY, fmt::format("a trace session of {} is live: end it, or detach with --force", live[0]));
    if (!live.empty() && !force)
        return out.error(EBUSY, fmt::format("{} trace sessions are live, of {}: end them, or detach with --force",
                                            live.size(), fmt::join(live, ", ")));
    const uint64_t t0 = monotonic_ns();
    std::string why;
    for (uint32_t s : sessions) {
        if (trace::running(s, &started, &mode) < 0) continue;
        if (int r = trace::stop(s, &why); r < 0) return out.error(-r, "stopping the trace session: " + why);
        out.line(fmt::format("removed the trace session ({} probes{})", started.placed,
                             g_owners[s].fd >= 0 ? fmt::format(", of tool pid {}", g_owners[s].pid) : std::string()));
        drop_owner(s);
    }
    for (uint32_t s = 0; s < trace::kSessions; ++s) drop_owner(s);
    std::vector<std::string> names = module_names();
    for (auto it = names.rbegin(); it != names.rend(); ++it) {  // the last loaded first, as rmmod would
        const std::string &name = *it;
        if (int r = unload_module(name, &why); r < 0)
            return out.error(-r, fmt::format("removing module {}: {}", name, why));
        out.line(fmt::format("removed module {}{}", name, why.empty() ? std::string() : " (warning: " + why + ")"));
        why.clear();
    }
    // No descriptor of liveprobe's stays in the program: the object files its symbol tables and
    // DWARF read, /proc/self/mem. Whatever needs them later (the program's own probes, the next
    // attach) opens them again.
    symbols::invalidate();
    symbols::close_dwarf();
    os::close_text_fd();
    // The door closed before the reply says so: a tool that asks again at once finds no agent.
    // The agent's two threads end right after the reply (stop_serving).
    {
        std::lock_guard lk(g_mu);
        if (os::in_own_fd_table()) keeper_run([] { close_door(&g_door); });
    }
    out.line(fmt::format("agent stopped, its door closed, in {:.1f} ms", static_cast<double>(monotonic_ns() - t0) / 1e6));
    g_detach = g_trim = true;
    out.ok();
}

// Before the first request that places probes in an attached process: every thread stopped
// once, and SIGTRAP and the fault signals taken out of its mask (os/linux/stop_threads.cpp
// unblock_synchronous). Threads that blocked every signal before the attach would otherwise be
// killed by the first int3 they meet, where no later stop happens (probes on the breakpoint
// path only). Where the library was preloaded the interposed pthread_sigmask keeps them out.
// Not at the agent's start: the injector still traces the thread it started the agent from,
// and the thread stop would fail on it.
bool g_guarded = false;  // set false before the agent's thread starts, then its thread's

void guard_if_attached()
{
    if (g_guarded) return;
    g_guarded = true;
    if (std::strcmp(g_reason.load(), "attach") != 0) return;
    os::WorldStop ws;
    (void)ws.stop();
    ws.resume();
}

// The session a request names (its first argument), else the one the requesting tool owns,
// else the only one: -1 with the reason in out when none (trace-info: the first one).
int session_of(const Request &rq, Out &out, bool first)
{
    const std::vector<uint32_t> sessions = trace::running_sessions();
    if (!rq.args.empty()) {
        char *end = nullptr;
        const unsigned long s = std::strtoul(rq.args[0].c_str(), &end, 10);  // kSessions at most: no overflow
        if (*end || rq.args[0].empty() || std::find(sessions.begin(), sessions.end(), static_cast<uint32_t>(s)) == sessions.end()) {
            out.error(ENOENT, fmt::format("no trace session {} runs in this process", rq.args[0]));
            return -1;
        }
        return static_cast<int>(s);
    }
    for (uint32_t s : sessions)
        if (g_owners[s].pid == rq.peer) return static_cast<int>(s);
    if (sessions.size() == 1 || (first && !sessions.empty())) return static_cast<int>(sessions[0]);
    if (sessions.empty()) out.error(ENOENT, "no trace session runs in this process");
    else out.error(EINVAL, fmt::format("{} trace sessions run in this process: name one", sessions.size()));
    return -1;
}

// "trace-start MODE MAXACTIVE SPEC...": starts a trace session; "trace-info [SESSION]": one
// that runs. Lines: "session N" (its slot, what trace-stop takes), "memfd FD", "mode MODE",
// "probe I ADDR NAME" each, "skipped WHY" each.
void serve_trace_start(const Request &rq, Out &out)
{
    trace::Started started;
    trace::Mode mode;
    bool verbose = false;
    if (rq.verb == "trace-start") {
        // MODE[:OPTION...]: nofollow, without following forks; owned, the session lasts as long
        // as this connection, which the tool keeps open (agents before it ignore it).
        std::string mode_word = rq.args.empty() ? std::string() : rq.args[0];
        // verbose: a line for each probe on the breakpoint path ("slowprobe FUNC: REASON").
        bool follow = true, owned = false, known = true;
        for (size_t colon; (colon = mode_word.rfind(':')) != std::string::npos; mode_word.resize(colon)) {
            const std::string opt = mode_word.substr(colon + 1);
            if (opt == "nofollow") follow = false;
            else if (opt == "owned") owned = true;
            else if (opt == "verbose") verbose = true;
            else known = false;
        }
        if (rq.args.size() < 3 || !known || !trace::parse_mode(mode_word, &mode))
            return out.error(EINVAL,
                             "trace-start: MODE[:nofollow][:owned][:verbose] (events, count, hist, tree) MAXACTIVE SPEC...");
        std::string why;
        // Sessions whose tool is gone (killed before its trace-stop, from a tool that did not
        // hold its connection) are stopped first.
        for (uint32_t s : trace::running_sessions()) {
            const Owner &o = g_owners[s];
            if (o.fd < 0 && o.pid > 0 && o.pid != rq.peer && kill(o.pid, 0) != 0 && errno == ESRCH) {
                trace::stop(s, &why);
                drop_owner(s);
            }
        }
        int r = trace::start(mode, {rq.args.begin() + 2, rq.args.end()}, std::atoi(rq.args[1].c_str()), &started,
                             &why, -1, follow);
        if (r < 0) return out.error(-r, why);
        drop_owner(started.session);  // a session of the slot before, stopped by the program itself
        g_owners[started.session].pid = rq.peer;
        if (owned) {
            out.keep = static_cast<int>(started.session);
            out.line("owned");  // this agent keeps the connection (agents before it did not)
        }
    } else {
        const int s = session_of(rq, out, true);
        if (s < 0) return;
        if (trace::running(static_cast<uint32_t>(s), &started, &mode) < 0)
            return out.error(ENOENT, "no trace session runs in this process");
    }
    out.line(fmt::format("session {}", started.session));
    // The session's memory, sent with the reply (SCM_RIGHTS): made in the agent's own table, it
    // has no number in the process's table to open through /proc/PID/fd (which agents before
    // this one said: "memfd N").
    if (started.memfd >= 0) {
        out.pass = started.memfd;
        out.line("memfd passed");
    }
    out.line(fmt::format("placed {} probes ({} jump-optimized) in {:.1f} ms", started.placed, started.optimized,
                         started.place_ms));
    for (size_t i = 0; i < started.slow.size() && i < 3; ++i) out.line("slow " + started.slow[i]);
    for (size_t i = 0; verbose && i < started.slow_each.size(); ++i) out.line("slowprobe " + started.slow_each[i]);
    out.line(fmt::format("mode {}", mode == trace::Mode::count  ? "count"
                                    : mode == trace::Mode::hist ? "hist"
                                    : mode == trace::Mode::tree ? "tree"
                                                                : "events"));
    for (size_t i = 0; i < started.names.size(); ++i)
        out.line(fmt::format("probe {} {:#x} {}", i, started.addrs[i], started.names[i]));
    for (const std::string &sk : started.skipped) out.line("skipped " + sk);
    out.ok();
}

// "trace-stop [SESSION]": without one, the session of the tool that asks, else the only one.
void serve_trace_stop(const Request &rq, Out &out)
{
    const int s = session_of(rq, out, false);
    if (s < 0) return;
    std::string why;
    if (int r = trace::stop(static_cast<uint32_t>(s), &why); r < 0) return out.error(-r, why);
    drop_owner(static_cast<uint32_t>(s));
    g_trim = true;
    out.ok();
}

void serve(const Request &rq, Out &out)
{
    if (rq.verb == "trace-start" || rq.verb == "insmod") guard_if_attached();
    if (rq.verb == "hello") {
        out.line(fmt::format("liveprobe {} pid {} protocol {}", LIVEPROBE_VERSION, getpid(), kProtocolVersion));
        out.ok();
    } else if (rq.verb == "status") {
        LogRing &log = log_ring();
        auto probes = core::list_probes();
        out.line(fmt::format("agent: liveprobe {}, protocol {}", LIVEPROBE_VERSION, kProtocolVersion));
        out.line(fmt::format("pid: {}", getpid()));
        out.line(fmt::format("started: {} ({:.1f} s ago)", g_reason.load(),
                             static_cast<double>(monotonic_ns() - g_started_ns) / 1e9));
        out.line(fmt::format("door: descriptors {} and {}", g_door.in, g_door.out));
        out.line(fmt::format("probes: {}", probes.size()));
        // Removed return probes whose memory a thread still reaches (blocked inside a probed call,
        // or not yet past its next probe): a small record each (core/kretprobe.cpp).
        if (int64_t held = core::retired_kretprobes(); held > 0)
            out.line(fmt::format("removed return probes still held by threads (a call in flight, or a thread's "
                                 "cache until its next return probe): {}",
                                 held));
        for (const auto &p : probes) out.line("  " + describe(p));
        out.line(fmt::format("modules: {}", module_count()));
        trace::Started started;
        trace::Mode mode;
        const std::vector<uint32_t> sessions = trace::running_sessions();
        for (uint32_t s : sessions)
            if (trace::running(s, &started, &mode) == 0)
                out.line(fmt::format("trace session {}: {} probes, {}", s, started.placed, owner_text(s)));
        if (sessions.empty()) out.line("trace session: none");
        out.line(fmt::format("log: {} lines written, {} records overwritten, {} dropped (ring of {} KiB)",
                             log.lines_written(), log.records_overwritten(), log.records_dropped(),
                             LogRing::kRecords * LogRing::kRecordBytes / 1024));
        out.ok();
    } else if (rq.verb == "log") {
        // "log [FROM]": the lines from sequence number FROM (0: the oldest still there), then
        // "next SEQ", where the next request goes on.
        uint64_t from = 0;
        if (!rq.args.empty()) {
            char *end = nullptr;
            from = std::strtoull(rq.args[0].c_str(), &end, 10);
            if (*end) {
                out.error(EINVAL, fmt::format("log: '{}' is not a sequence number", rq.args[0]));
                return;
            }
        }
        uint64_t next = 0;
        // Each line: "NANOSECONDS LEVEL TEXT" (liveprobe_ktime_ns, printk level 0..7). KERN_CONT
        // lines join the line before them (when it is in this reply: one `dmesg -f` fetched
        // earlier stays as it was printed).
        std::vector<LogRing::Line> lines = log_ring().read(from, &next);
        for (size_t i = 0; i < lines.size();) {
            std::string text = lines[i].text;
            size_t j = i + 1;
            for (; j < lines.size() && lines[j].cont; ++j) text += lines[j].text;
            while (!text.empty() && text.back() == '\n') text.pop_back();  // printk's own end of line
            for (char &c : text)
                if (c == '\n') c = ' ';  // one line each
            out.line(fmt::format("{} {} {}", lines[i].ns, lines[i].level, text));
            i = j;
        }
        out.line(fmt::format("next {}", next));
        out.ok();
    } else if (rq.verb == "insmod") {
        // "insmod PATH [NAME=VALUE ...]"
        if (rq.args.empty()) return out.error(EINVAL, "insmod: no module file");
        std::string name, why;
        uint64_t t0 = monotonic_ns();
        int r = load_module(rq.args[0], {rq.args.begin() + 1, rq.args.end()}, &name, &why);
        if (r < 0) return out.error(-r, why);
        out.line(fmt::format("loaded {} in {:.2f} ms", name, static_cast<double>(monotonic_ns() - t0) / 1e6));
        out.ok();
    } else if (rq.verb == "rmmod") {
        if (rq.args.size() != 1) return out.error(EINVAL, "rmmod: one module name");
        std::string why;
        if (int r = unload_module(rq.args[0], &why); r < 0) return out.error(-r, why);
        g_trim = true;
        if (!why.empty()) out.line("warning: " + why);
        out.ok();
    } else if (rq.verb == "trace-start" || rq.verb == "trace-info") {
        serve_trace_start(rq, out);
    } else if (rq.verb == "trace-stop") {
        serve_trace_stop(rq, out);
    } else if (rq.verb == "trace-sync") {  // [SESSION]: its misses copied where the tool reads them
        const int s = session_of(rq, out, false);
        if (s < 0) return;
        if (int r = trace::sync_missed(static_cast<uint32_t>(s)); r < 0)
            return out.error(-r, "no trace session runs in this process");
        out.ok();
    } else if (rq.verb == "detach") {
        detach(rq, out);
    } else if (rq.verb == "lsmod") {
        for (const std::string &l : list_modules()) out.line(l);
        out.ok();
    } else {
        out.error(EINVAL, fmt::format("unknown request '{}' (this agent serves: hello, status, log, insmod, rmmod, lsmod, trace-start, trace-info, trace-stop, trace-sync, detach)",
                                      rq.verb));
    }
}

// One connection's request line, whole (RequestReader), and its reply. The session whose owner
// the connection stays, or -1 when it is not kept (Out::keep).
int answer(int fd, const std::string &line)
{
    struct ucred cred {};
    socklen_t len = sizeof cred;
    Out out;
    Request rq;
    std::string why;
    // Who: the process that made the connection's socket pair (the tool), for the log. What it
    // may do was settled by the kernel when it took the door (door.hpp).
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
        out.error(EACCES, "cannot read the peer's credentials");
    } else if (rq.peer = cred.pid; !parse_request(line, &rq, &why)) {
        out.error(EPROTO, why);
    } else if (rq.version != kProtocolVersion) {
        out.error(EPROTONOSUPPORT,
                  fmt::format("protocol version {} is not served (this agent speaks {})", rq.version, kProtocolVersion));
    } else {
        serve(rq, out);
        audit_request(cred, rq, out.failed == 0, out.failed, out.reason);
    }
    // A client that does not read its reply holds the agent 2 s at most. A kept connection whose
    // reply could not be sent is kept all the same: its peer is gone, and the agent's poll sees
    // it at once (owner_gone).
    bool sent = true;
    if (out.pass >= 0) {
        sent = os::send_with_fd(fd, out.text.data(), 1, out.pass, 2000) == 1;  // the first byte carries it
        close(out.pass);
    }
    if (sent) send_within(fd, out.pass >= 0 ? out.text.substr(1) : out.text, 2000);
    return out.keep;
}

// What the agent's thread allocated for a session or a module (symbol tables, the session's
// lists) is in malloc's arena of this thread: freed, it stays resident unless given back, and an
// agent attached and detached again and again would grow the process by an arena each time
// (the chaos suite saw a 5 MB step). malloc_trim gives back the free pages of every arena.
void give_memory_back()
{
    g_trim = false;
    malloc_trim(0);
}

// After a detach, or when the door cannot be made again: the door's ends in the program's table
// closed by the keeper, which ends; the thread ends (its own table, and every descriptor in it,
// goes with it). Attaching again starts another agent.
void *stop_serving(int in)
{
    std::lock_guard lk(g_mu);
    g_detach = false;
    if (g_running && g_pid == getpid()) {
        g_running = false;
        if (os::in_own_fd_table()) {
            keeper_run([] { close_door(&g_door); });
            close(in);
        } else {
            close_door(&g_door);
        }
    }
    keeper_stop();
    return nullptr;
}

RequestReader g_reader;  // the agent's thread only (and a forked child before its agent starts)

// Takes the connections waiting at the door, to be read (g_reader); false when the door was
// shut (the program's exit).
bool take_door(int in)
{
    for (;;) {
        const int fd = take_connection(in);
        if (fd == -EAGAIN || fd == -EWOULDBLOCK) return true;
        if (fd == -ECONNRESET && g_shutting.load()) return false;
        if (fd == -ECONNRESET) return true;  // an empty message, or the door lost (door_lost)
        if (fd == -EINTR || fd == -1) continue;
        if (fd < 0) return false;
        g_reader.add(fd);
    }
}

// Answers the requests now whole, keeping each connection that became a session owner's.
void answer_whole(const std::vector<struct pollfd> &fds)
{
    for (RequestReader::Whole &w : g_reader.take(fds)) {
        if (const int s = answer(w.fd, w.line); s >= 0) own(static_cast<uint32_t>(s), w.fd);
        else close(w.fd);
    }
}

// Whether the door must be made again: the program closed its end that tools take (`out`, in
// the program's table: a daemon's closefrom), which the agent's `in` sees as the end of its peer.
// In the program's table itself (no table of its own, fd_table.hpp), either end it closed.
bool door_lost(int in, short revents)
{
    if (g_shutting.load()) return false;
    if (os::in_own_fd_table()) return (revents & (POLLHUP | POLLERR)) != 0;
    std::lock_guard lk(g_mu);
    return !(door_is_ours(g_door) && g_door.in == in);
}

// The agent's thread, when the door is lost: a new one made in the program's table by the
// keeper, and its `in` copied into the thread's own (*in). False when the agent stops instead
// (detached, the program's exit, or no new door).
bool door_again(int *in)
{
    std::lock_guard lk(g_mu);
    if (!g_running || g_pid != getpid()) return false;
    const bool own = os::in_own_fd_table();
    if (own) close(*in);  // the old door's, this thread's copy
    *in = -1;
    Door fresh;
    std::string why;
    int r = -ESRCH;  // no keeper
    keeper_run([&] {
        close_door(&g_door);
        r = open_door(&fresh, &why);
    });
    if (r >= 0) {
        g_door = fresh;
        *in = own ? os::fd_from_process_table(fresh.in) : fresh.in;
    }
    if (*in < 0) {
        keeper_run([] { close_door(&g_door); });
        g_running = false;
        return false;
    }
    return true;
}

// The agent's thread's own table (os/linux/fd_table.hpp), holding its door's end and the
// owners' descriptors that are still the ones own() was given. An owner's connection that is
// not in it (a forked child's: the connection was in its parent agent's table) is watched
// through a pidfd of the tool instead, which polls readable when the tool has ended. Without a
// table of its own (unshare failed), the thread works in the program's, as before.
void enter_own_table(int in)
{
    std::vector<int> keep = {in};
    std::vector<bool> missing(trace::kSessions);
    for (uint32_t s = 0; s < trace::kSessions; ++s) {
        if (g_owners[s].fd < 0) continue;
        if (os::is_same_file(g_owners[s].fd, g_owners[s].file)) keep.push_back(g_owners[s].fd);
        else missing[s] = true;
    }
    if (const int r = os::enter_own_fd_table(keep); r < 0) {
        const std::string line = fmt::format("liveprobe: the agent works in the program's descriptor table: {}\n",
                                             std::strerror(-r));
        log_ring().write(line.data(), line.size());
        return;
    }
    for (uint32_t s = 0; s < trace::kSessions; ++s) {
        if (!missing[s]) continue;
        const int pidfd = g_owners[s].pid > 0 ? static_cast<int>(syscall(SYS_pidfd_open, g_owners[s].pid, 0)) : -1;
        g_owners[s].fd = pidfd;
        g_owners[s].file = os::identity_of(pidfd);
        g_owners[s].in_program = false;
        if (pidfd < 0) owner_gone(s, false);  // the tool is gone already
    }
}

// Steps of the agent's thread:
//  1. Its own descriptor table (enter_own_table).
//  2. Serving: the door, every connection's request side by side (one request answered at a
//     time), and the descriptors of the trace sessions' owners: the end of one (the tool's,
//     whatever killed it) stops its session.
//  3. A lost door made again (door_again); a detach, or the door shut at the program's exit,
//     ends the thread.
void *agent_thread(void *arg)
{
    int in = static_cast<int>(reinterpret_cast<intptr_t>(arg));
    core::QuietThread quiet;  // its calls into probed code are liveprobe's, not the program's
    enter_own_table(in);  // 1
    std::vector<struct pollfd> p;
    for (;;) {  // 2
        if (const long tracer = g_attach_tracer.exchange(kNoAttach); tracer != kNoAttach) audit_attach(tracer);
        p.assign(1, {in, POLLIN, 0});
        for (uint32_t s = 0; s < trace::kSessions; ++s) p.push_back({g_owners[s].fd, POLLIN, 0});  // -1: ignored
        g_reader.pollfds(&p);
        if (poll(p.data(), p.size(), g_reader.timeout_ms()) < 0) {
            if (errno != EINTR) usleep(10000);
            continue;
        }
        for (uint32_t s = 0; s < trace::kSessions; ++s) {
            if (g_owners[s].fd < 0 || !p[1 + s].revents) continue;
            // The tool's end closed, or the program closed ours (a closefrom, when the thread
            // works in the program's table: the number may be the program's file now, never
            // closed by owner_gone): either way no tool holds the session any more, and its
            // probes must go.
            const bool by_program = !owner_fd_is_ours(s);
            owner_gone(s, by_program);
            g_trim = true;
        }
        if (door_lost(in, p[0].revents)) {  // 3
            if (!door_again(&in)) return stop_serving(in);
            continue;
        }
        answer_whole(p);
        if ((p[0].revents & POLLIN) && !take_door(in)) return nullptr;  // shut: the program exits
        if (p[0].revents & POLLNVAL) return stop_serving(in);
        // After what the owner's end or a request did: the thread-stop helper of what it placed
        // or removed reaped, freed memory given back, the agent stopped after a detach.
        os::stop_threads_reap_helper();
        if (g_trim) give_memory_back();
        if (g_detach) return stop_serving(in);
    }
}

// Called with g_mu held. The door first, in the program's table (where tools find it), then the
// keeper, then the agent's thread, which makes a table of its own.
int start_locked(std::string *why)
{
    pid_t pid = getpid();
    if (g_running && g_pid == pid) return 0;
    if (g_running) {  // a fork child: the parent's thread is not here, its door is the parent's
        close_door(&g_door);
        g_running = false;
    }
    if (int r = open_door(&g_door, why); r < 0) return r;
    if (int r = keeper_start(); r < 0) {
        close_door(&g_door);
        *why = fmt::format("cannot start the agent's keeper thread: {}", std::strerror(-r));
        return r;
    }
    g_guarded = false;  // read by the thread about to start
    // The thread takes none of the program's signals, but for the synchronous ones: it runs
    // libc's code, on which breakpoints are placed (while it places them too), and the kernel
    // kills a thread that hits an int3 with SIGTRAP blocked (or faults with the fault's signal
    // blocked). Explicitly: after an attach, pthread_sigmask here is libc's, not the interposer
    // that keeps them unblocked (the library was not preloaded).
    sigset_t all, prev;
    sigfillset(&all);
    for (int sig : os::kSynchronousSignals) sigdelset(&all, sig);
    pthread_sigmask(SIG_SETMASK, &all, &prev);
    pthread_t t;
    int r = pthread_create(&t, nullptr, agent_thread, reinterpret_cast<void *>(static_cast<intptr_t>(g_door.in)));
    pthread_sigmask(SIG_SETMASK, &prev, nullptr);
    if (r != 0) {
        keeper_stop();
        close_door(&g_door);
        *why = fmt::format("cannot start the agent's thread: {}", std::strerror(r));
        return -r;
    }
    pthread_setname_np(t, "liveprobe");
    pthread_detach(t);
    g_pid = pid;
    g_running = true;
    g_started_ns = monotonic_ns();
    return 0;
}

void shut_door_at_exit()
{
    core::QuietThread quiet;  // at the program's exit, on its thread: liveprobe's calls
    std::lock_guard lk(g_mu);
    if (g_running && g_pid == getpid() && door_is_ours(g_door)) {
        g_shutting.store(true);
        shutdown(g_door.in, SHUT_RDWR);
    }  // the thread's poll wakes and it stops serving
}

bool wanted_by_environment()
{
    const char *e = secure_getenv("LIVEPROBE_AGENT");
    return e && *e && std::strcmp(e, "0") != 0;
}

// After fork(): the child has no agent thread and must not answer on the parent's socket. Under
// `liveprobe run` (LIVEPROBE_AGENT set), children inherit the agent: a child that goes on
// without exec starts its own (one that execs gets it again from LD_PRELOAD). So does the
// child of a process whose trace sessions a tool holds (attached): it has the sessions' probes
// too, and only an agent of its own sees the tool's end and removes them (the parent's agent
// removed only the parent's; the child traced on, and `status` found no agent in it).
// Otherwise a child's agent is started by attaching to it.
void after_fork_in_child()
{
    bool had = g_running;
    g_running = false;
    // Forked by the agent's thread (a module's init), the child's one table is a copy of that
    // thread's; by the program's, of the program's. Either way it is the process's table now,
    // and the keeper is the parent's.
    const bool from_agent_thread = os::in_own_fd_table();
    os::forget_own_fd_table();
    core::reset_after_fork();  // before this child's agent threads claim their records
    keeper_forget();
    // The parent's door: a child must not hold it, least of all one that drops privileges
    // (whoever could read its descriptors would reach the parent's agent).
    close_door(&g_door);
    g_reader.drop_all(from_agent_thread);  // the parent's clients' requests, half read: the parent's to answer
    bool owned = false;  // read in the child, the only thread now
    for (const Owner &o : g_owners) owned = owned || o.fd >= 0;
    if (had && (wanted_by_environment() || owned)) {
        std::string why;
        start_locked(&why);
    }
}

// `trace -- CMD`: the read end of the tool's pipe, moved out of the program's way (a high
// descriptor, closed on exec: the program's children that exec get none, those that only fork
// share it and stop their sessions with it).
void adopt_owner_from_environment()
{
    const char *e = secure_getenv("LIVEPROBE_TRACE_OWNER_FD");
    if (!e) return;
    const int fd = std::atoi(e);
    os::erase_env("LIVEPROBE_TRACE_OWNER_FD");
    struct stat st {};
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISFIFO(st.st_mode)) return;
    const int high = os::move_fd_high(fd);
    own(0, high);  // the session LIVEPROBE_TRACE starts, the process's first: slot 0
    g_owners[0].pid = getppid();
}

// `trace -- CMD` following exec (follow.hpp): an image the program's tree executed connects to
// the tool, before main, and the connection owns the session LIVEPROBE_TRACE starts (slot 0).
// No tool listens (it is gone): the image runs untraced, and so do the images it executes.
int g_follow_fd = -1;
void adopt_follow_from_environment()
{
    const char *path = secure_getenv("LIVEPROBE_TRACE_FOLLOW");
    if (!path || secure_getenv("LIVEPROBE_TRACE_OWNER_FD") || !secure_getenv("LIVEPROBE_TRACE")) return;
    pid_t tool = 0;
    const int fd = follow_connect(path, &tool);
    if (fd < 0) {
        for (const char *v : {"LIVEPROBE_TRACE", "LIVEPROBE_TRACE_FOLLOW", "LIVEPROBE_TRACE_VERBOSE"}) os::erase_env(v);
        return;
    }
    const int high = os::move_fd_high(fd);
    own(0, high);
    g_owners[0].pid = tool;
    g_follow_fd = high;
}

[[gnu::constructor]] void start_from_environment()
{
    // The handlers run on the program's thread that forks: their calls (pthread_mutex_lock, the
    // child's agent start) are liveprobe's, not the program's (core::QuietThread).
    pthread_atfork(
        [] {
            core::QuietThread quiet;
            g_mu.lock();
        },
        [] {
            core::QuietThread quiet;
            g_mu.unlock();
        },
        [] {
            core::QuietThread quiet;
            after_fork_in_child();
            g_mu.unlock();
        });
    std::atexit(shut_door_at_exit);
    adopt_owner_from_environment();
    adopt_follow_from_environment();
    if (!wanted_by_environment()) return;
    set_start_reason("preload");
    std::lock_guard lk(g_mu);
    std::string why;
    if (start_locked(&why) < 0) {
        const char *msg = "liveprobe: the agent did not start: ";
        (void)!write(2, msg, std::strlen(msg));
        (void)!write(2, why.data(), why.size());
        (void)!write(2, "\n", 1);
    }
}

}  // namespace

void set_start_reason(const char *why) noexcept { g_reason.store(why); }

}  // namespace liveprobe::agent

using namespace liveprobe;

int agent::followed_connection()
{
    std::lock_guard lk(agent::g_mu);
    return agent::g_follow_fd >= 0 && agent::owner_fd_is_ours(0) ? agent::g_follow_fd : -1;
}

extern "C" int liveprobe_agent_start(void)
{
    std::lock_guard lk(agent::g_mu);
    std::string why;
    int r = agent::start_locked(&why);
    if (r < 0) return record(Fail(r, "{}", why));
    return 0;
}

// On the thread the tool made call it, stopped wherever the program was: nothing here may take a
// lock the program's code takes (audit.hpp attach_tracer). The attach is logged by the agent's
// thread.
extern "C" int liveprobe_agent_start_attached(void)
{
    agent::set_start_reason("attach");
    agent::g_attach_tracer.store(agent::attach_tracer());
    const int r = liveprobe_agent_start();
    if (r != 0) agent::g_attach_tracer.store(agent::kNoAttach);
    return r;
}

extern "C" const char *liveprobe_version(void) { return LIVEPROBE_VERSION; }

extern "C" void liveprobe_log_write(const char *text, size_t len)
{
    if (text) agent::log_ring().write(text, len);
}
