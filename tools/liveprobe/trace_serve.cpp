// trace --serve (trace_serve.hpp): the processes' sessions, kept and read by one loop, and the
// metrics server polled beside them (metrics_http.hpp).
#include "trace_serve.hpp"

#include <dirent.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "agent/channel.hpp"
#include "commands.hpp"
#include "metrics_http.hpp"
#include "process.hpp"
#include "trace_attach.hpp"
#include "trace_images.hpp"

namespace liveprobe::tool {
namespace {

using Clock = std::chrono::steady_clock;

// A process's start time (/proc/PID/stat's 22nd field, in clock ticks since boot): 0 when it is
// gone, a zombie included. A pid used again is another process.
unsigned long long start_time(int pid)
{
    const std::vector<std::string> f = stat_fields(fmt::format("/proc/{}/stat", pid));
    if (f.size() <= 22 - 3 || f[0] == "Z") return 0;
    return std::strtoull(f[22 - 3].c_str(), nullptr, 10);
}

// The processes named `comm` (/proc/PID/comm, which the kernel cuts to 15 bytes), but this one.
std::vector<int> processes_named(const std::string &comm)
{
    std::vector<int> out;
    DIR *d = opendir("/proc");
    if (!d) return out;
    while (const dirent *e = readdir(d)) {
        char *end = nullptr;
        const long pid = std::strtol(e->d_name, &end, 10);
        if (*end || pid <= 0 || pid == getpid()) continue;
        std::ifstream f(fmt::format("/proc/{}/comm", pid));
        std::string name;
        if (std::getline(f, name) && name == comm.substr(0, 15)) out.push_back(static_cast<int>(pid));
    }
    closedir(d);
    return out;
}

// A traced process: its session, read as `trace` reads one.
struct Served {
    int pid = 0;
    unsigned long long start = 0;
    std::string comm;
    std::string auxv;  // its auxiliary vector: another after an exec (process.hpp process_auxv)
    std::unique_ptr<Image> im;
    SessionHandles h;
    bool syncs = true;  // its agent copies the misses when asked (trace-sync; older agents do not)
};

class Server {
public:
    Server(Opts &o, const char *mode) : o_(o), mode_(mode) {}
    int run();

private:
    void attach(int pid, unsigned long long start);
    void look_for_processes();
    void read_sessions();
    bool gone(Served &s);
    void drop(size_t i, const char *why);
    std::string render(MetricsFormat f);
    void add_rows(const Served &s, MetricsTarget *t, std::vector<MetricsRow> *keyed);

    Opts &o_;
    const char *mode_;
    MetricsHttp http_;
    std::vector<Served> served_;
    // Processes not attached (said once), or whose session someone ended: left alone.
    std::set<std::pair<int, unsigned long long>> refused_;
    // Processes that executed a program: attached again once it has run a second (its loader).
    std::map<std::pair<int, unsigned long long>, Clock::time_point> executed_;
    uint64_t attached_ = 0;
};

// Attaches to the process and starts its session (what was placed is said); a process that
// could not be is said once and left alone.
void Server::attach(int pid, unsigned long long start)
{
    std::string why;
    auto info = process_info(pid, &why);
    Served s;
    s.pid = pid;
    s.start = start;
    s.comm = info ? info->comm : "";
    s.im = std::make_unique<Image>();
    s.im->pid = pid;
    s.im->exe = info ? info->exe : "";
    s.auxv = process_auxv(pid);
    if (!info) complain("trace: " + why);
    if (!info || !start_session(o_, mode_, pid, *s.im, &s.h)) {
        refused_.emplace(pid, start);
        return;
    }
    ++attached_;
    std::fprintf(stderr, "liveprobe: serving the calls of PID %d (%s)\n", pid, s.comm.c_str());
    served_.push_back(std::move(s));
}

// --follow-name: every process of that name not served yet, once it has run a second (one that
// just executed its program may be in its loader still).
void Server::look_for_processes()
{
    double uptime = 0;  // seconds since boot, as the start times count
    std::ifstream("/proc/uptime") >> uptime;
    for (int pid : processes_named(o_.follow_name)) {
        const unsigned long long start = start_time(pid);
        bool known = refused_.count({pid, start}) != 0;
        for (const Served &s : served_) known |= s.pid == pid && s.start == start;
        if (known || start == 0) continue;
        if (auto e = executed_.find({pid, start}); e != executed_.end()) {
            if (Clock::now() < e->second) continue;
            executed_.erase(e);
        }
        if (uptime - static_cast<double>(start) / static_cast<double>(sysconf(_SC_CLK_TCK)) < 1.0) continue;
        attach(pid, start);
    }
}

// Whether the process is gone or its session ended (its connection closed by the agent: a
// `liveprobe detach`, an exec).
bool Server::gone(Served &s)
{
    if (start_time(s.pid) != s.start) return true;
    if (s.h.owner_conn < 0) return false;
    struct pollfd p = {s.h.owner_conn, POLLIN, 0};
    return poll(&p, 1, 0) > 0;
}

void Server::drop(size_t i, const char *why)
{
    Served &s = served_[i];
    std::fprintf(stderr, "liveprobe: PID %d (%s) %s: its metrics are served no more\n", s.pid, s.comm.c_str(), why);
    if (s.h.owner_conn >= 0) close(s.h.owner_conn);  // the agent stops the session, if it runs
    if (o_.keyed) o_.keyed->forget(s.pid);  // its rows would be kept for ever, never served
    served_.erase(served_.begin() + static_cast<ptrdiff_t>(i));
}

// Each session named once it is set up (and again when probes were placed in a library loaded
// since); --by: its events taken into the keyed totals. The sessions that ended: dropped.
void Server::read_sessions()
{
    for (size_t i = 0; i < served_.size();) {
        Served &s = served_[i];
        Image &im = *s.im;
        if (!im.named) im.named = load_names(im);
        else if (trace::header_of(im.shm.base)->names_bytes.load(std::memory_order_acquire) != im.shm.names_bytes)
            load_names(im);
        if (im.named && o_.keyed)
            for (uint64_t n; (n = drain(im, o_.print)) > 0 && n >= kPrintBatch;) {
            }
        if (!im.shm.corrupt.empty()) {
            drop(i, fmt::format("wrote its shared memory out of bounds ({})", im.shm.corrupt).c_str());
            continue;
        }
        if (gone(s)) {
            // Its session ended with its program (an exec: --follow-name attaches the new one), or
            // by someone else (liveprobe detach): not attached again, unless it starts again.
            const bool alive = start_time(s.pid) == s.start;
            const std::string auxv = alive ? process_auxv(s.pid) : std::string();
            const bool executed = !auxv.empty() && !s.auxv.empty() && auxv != s.auxv;
            if (executed) executed_[{s.pid, s.start}] = Clock::now() + std::chrono::seconds(1);
            else if (alive) refused_.emplace(s.pid, s.start);
            drop(i, executed ? "executed a program (--follow-name: attached again if its name matches)"
                     : alive ? "ended its session (liveprobe detach; not attached again)"
                             : "exited");
            continue;
        }
        ++i;
    }
}

// A probe's name split as its labels: the executable's own functions under its file name, a
// library's under the library's ("libz.so.1:inflate").
std::pair<std::string, std::string> object_and_function(const std::string &name, const std::string &exe)
{
    if (is_own_function(name)) return {base_name(exe), name};
    const size_t colon = name.find(':');
    return {name.substr(0, colon), name.substr(colon + 1)};
}

// keyed: --by's rows of the process, their function not split yet (render's).
void Server::add_rows(const Served &s, MetricsTarget *t, std::vector<MetricsRow> *keyed)
{
    const Image &im = *s.im;
    std::map<std::pair<std::string, std::string>, MetricsRow> rows;  // one series per function
    if (!o_.keyed) {
        const TraceTotals totals = totals_of(im.shm);
        for (uint32_t p = 0; p < im.shm.probes; ++p) {
            const auto fn = object_and_function(im.probes.name_of(p), im.exe);
            MetricsRow &r = rows[fn];
            r.object = fn.first;
            r.function = fn.second;
            r.calls += totals.count[p] + (o_.serve_hist ? totals.left[p] : 0);
            for (uint32_t b = 0; b < trace::kHistBuckets; ++b) r.hist[b] += totals.hist[p][b];
        }
        for (auto &[fn, r] : rows) t->rows.push_back(std::move(r));
    } else {
        for (MetricsRow &r : *keyed) {
            std::tie(r.object, r.function) = object_and_function(r.function, im.exe);
            t->rows.push_back(std::move(r));
        }
    }
    for (uint32_t p = 0; p < im.shm.probes; ++p)
        t->missed[object_and_function(im.probes.name_of(p), im.exe)] += trace::missed_of(im.shm.base, p)->load();
}

// A scrape: each session's misses copied by its agent first (a quarter of a second at most:
// a stopped process's agent does not answer, and is served with the misses copied before).
std::string Server::render(MetricsFormat f)
{
    MetricsSnapshot snap;
    snap.hist = o_.serve_hist;
    if (o_.keyed)
        snap.key_label = o_.by == "tid" ? "tid" : o_.by == "comm" ? "thread" : o_.by == "caller" ? "caller" : "key";
    snap.processes = served_.size();
    std::map<int, std::vector<MetricsRow>> keyed;  // --by: the tool's rows by process, in one walk
    if (o_.keyed)
        o_.keyed->visit([&](int pid, const std::string &name, const std::string &key, uint64_t calls,
                            const std::array<uint64_t, trace::kHistBuckets> &ns) {
            MetricsRow r;
            r.function = name;
            r.key = key;
            r.calls = calls;
            r.hist = ns;
            keyed[pid].push_back(std::move(r));
        });
    for (Served &s : served_) {
        const Image &im = *s.im;
        if (!im.named || !im.shm.corrupt.empty()) continue;
        if (s.syncs) {
            agent::Reply reply;
            std::string why;
            if (agent::request(s.pid, "trace-sync", s.h.stop_args, &reply, &why, 250) >= 0 && !reply.ok &&
                reply.reason.find("unknown request") != std::string::npos)
                s.syncs = false;
        }
        MetricsTarget t;
        t.pid = s.pid;
        t.comm = s.comm;
        const trace::Header *h = trace::header_of(im.shm.base);
        t.dropped = h->unringed.load();
        for (uint32_t r = 0; r < trace::kRings; ++r) t.dropped += trace::ring_head(im.shm.base, r)->dropped.load();
        t.trap = static_cast<uint32_t>(im.slow.size());
        t.jump = im.shm.probes - t.trap;
        add_rows(s, &t, &keyed[s.pid]);
        snap.targets.push_back(std::move(t));
    }
    return render_metrics(snap, f);
}

// The loop, until a signal ends it, --duration, or (-p) the process's end:
//  1. -p: the process attached first (a failure ends it); --follow-name: every second, the
//     processes of that name that are not served yet.
//  2. Every 20 ms (--by: every millisecond while events come), the sessions read.
//  3. Between, the HTTP server's connections served as they are ready.
int Server::run()
{
    sigset_t set;
    sigemptyset(&set);
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) sigaddset(&set, sig);
    sigprocmask(SIG_BLOCK, &set, nullptr);
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &ignore, nullptr);  // a scraper gone mid-reply
    const int sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    std::string why;
    if (o_.pid && !process_info(o_.pid, &why)) {
        complain("trace: " + why);
        return kExitFailure;
    }
    if (!http_.listen(o_.serve, &why)) {
        complain("trace: " + why);
        return kExitFailure;
    }
    http_.render = [this](MetricsFormat f) { return render(f); };
    std::fprintf(stderr, "liveprobe: serving metrics at %s\n", http_.url().c_str());
    if (o_.pid) {  // 1
        attach(o_.pid, start_time(o_.pid));
        if (served_.empty()) return kExitFailure;
    } else {
        std::fprintf(stderr, "liveprobe: following the processes named %s\n", o_.follow_name.c_str());
    }
    const auto t0 = Clock::now();
    auto looked = t0 - std::chrono::seconds(1), read_at = t0;
    bool ended = false;
    std::vector<struct pollfd> fds;
    while (!ended) {
        fds.assign(1, {sfd, POLLIN, 0});
        http_.add_pollfds(&fds);
        int wait = o_.keyed ? 1 : 20;
        if (const int t = http_.timeout_ms(); t >= 0 && t < wait) wait = t;
        poll(fds.data(), fds.size(), wait);
        http_.run();  // 3
        struct signalfd_siginfo si {};
        while (read(sfd, &si, sizeof si) == static_cast<ssize_t>(sizeof si)) ended = true;
        const auto now = Clock::now();
        if (!o_.follow_name.empty() && now - looked >= std::chrono::seconds(1)) {
            looked = now;
            look_for_processes();
        }
        if (now - read_at >= std::chrono::milliseconds(o_.keyed ? 1 : 20)) {  // 2
            read_at = now;
            read_sessions();
            if (o_.pid && served_.empty()) ended = true;
        }
        if (o_.duration > 0 && std::chrono::duration<double>(now - t0).count() >= o_.duration) ended = true;
    }
    for (Served &s : served_) stop_session(s.pid, s.h);
    std::fprintf(stderr, "liveprobe: served %" PRIu64 " scrape%s of %" PRIu64 " process%s\n", http_.scrapes(),
                 http_.scrapes() == 1 ? "" : "s", attached_, attached_ == 1 ? "" : "es");
    return 0;
}

}  // namespace

bool check_serve(Opts &o, const std::vector<std::string> &command)
{
    if (!o.follow_name.empty() && o.serve.empty()) {
        complain("trace: --follow-name attaches to processes for --serve: give --serve ADDR:PORT too");
        return false;
    }
    if (o.serve.empty()) return true;
    if (o.pid != 0 && !o.follow_name.empty()) {
        complain("trace: -p and --follow-name: one or the other");
        return false;
    }
    if (!command.empty() || (o.pid == 0 && o.follow_name.empty())) {
        complain("trace: --serve watches running processes: give -p PID or --follow-name COMM (start the program, "
                 "then serve its metrics)");
        return false;
    }
    if (o.follow_name.find('/') != std::string::npos) {
        complain("trace: --follow-name " + o.follow_name + ": a process's name (/proc/PID/comm) has no '/': give " +
                 "its program's file name (" + o.follow_name.substr(o.follow_name.rfind('/') + 1) + ")");
        return false;
    }
    const std::pair<bool, const char *> others[] = {
        {o.tree, "--tree"}, {o.print.json, "--json"}, {!o.chrome.empty(), "--chrome"}, {!o.output.empty(), "-o"},
        {o.interval > 0, "--interval"}, {o.stacks || o.by == "stack", "--stacks"}, {o.folded, "--folded"},
        {!o.hist_of.empty(), "--hist-of"}, {o.print.tid != 0, "--tid"}, {o.print.min_duration != 0, "--min-duration"}};
    for (const auto &[given, name] : others)
        if (given) {
            complain(fmt::format("trace: --serve: not with {} (it serves --count or --hist, with --by KEY and "
                                 "--filter)", name));
            return false;
        }
    if (o.follow_name.size() > 15)
        std::fprintf(stderr, "liveprobe: --follow-name %s: the kernel keeps 15 bytes of a process's name: %s\n",
                     o.follow_name.c_str(), o.follow_name.substr(0, 15).c_str());
    // --follow-name attaches to each process of the name itself: a process it forks must not
    // carry its parent's session on (its calls were counted twice: under the parent's pid, in
    // the session it inherited, and under its own).
    if (!o.follow_name.empty()) o.no_follow = true;
    if (!o.count) o.hist = true;  // the calls and their durations
    o.serve_hist = o.hist;
    return true;
}

int serve_metrics(Opts &o, const char *mode)
{
    Server server(o, mode);
    return server.run();
}

}  // namespace liveprobe::tool
