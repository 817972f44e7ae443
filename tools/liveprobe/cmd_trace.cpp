// liveprobe trace [-p PID] [--count | --hist] [OPTIONS] SPEC... [-- CMD [ARGS]]: the ready
// tracer. Each SPEC is a function or a glob ("do_sys_open", "libz.so.1:*", "*"); the target's
// agent puts a probe on each (src/trace/session.hpp) and its handlers write into shared memory
// (src/trace/rings.hpp) that this command reads:
//   default  one line per call that returned, in the seeds' form, with time and thread;
//   --count  at the end, one line per function called: NAME COUNT, most called first;
//   --hist   at the end, a log2 histogram of each function's durations.
// Then a summary: calls seen, events dropped, calls missed.
#include <CLI/CLI.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include <fmt/format.h>

#include "agent/channel.hpp"
#include "agent_library.hpp"
#include "commands.hpp"
#include "injector.hpp"
#include "process.hpp"
#include "trace/rings.hpp"

namespace liveprobe::tool {
namespace {

using trace::Header;
using trace::kRings;
using trace::kRingRecords;
using trace::Record;

struct Opts {
    int pid = 0;
    bool count = false, hist = false, json = false, no_follow = false;
    std::string chrome;      // --chrome FILE
    FILE *chrome_out = nullptr;
    bool chrome_first = true;
    int traced = 0;  // the process traced (-p, or the program started)
    int maxactive = 64;
    double duration = 0;
    int tid = 0;
    uint64_t min_duration = 0;
    std::vector<std::string> specs;
};

// What the reader knows of the shared memory.
struct Shm {
    void *base = nullptr;
    size_t bytes = 0;
    uint32_t probes = 0;
    std::vector<std::string> names;
};

bool load_names(Shm *shm)
{
    Header *h = trace::header_of(shm->base);
    if (h->magic != trace::kRingsMagic || h->ready.load(std::memory_order_acquire) != 1) return false;
    shm->probes = h->probes;
    std::string text(static_cast<const char *>(shm->base) + h->names_offset, h->names_bytes);
    std::istringstream in(text);
    for (std::string addr, name; in >> addr >> name;) shm->names.push_back(name);
    return shm->names.size() == shm->probes;
}

std::string retval_text(uint64_t v)
{
    auto s = static_cast<int64_t>(v);
    if (s >= -4096 && s < (int64_t{1} << 32)) return std::to_string(s);
    return fmt::format("{:#x}", v);
}

// Drains every ring, prints the events (time order within the batch); returns how many.
uint64_t drain(const Shm &shm, Opts &o)
{
    std::vector<Record> batch;
    for (uint32_t i = 0; i < kRings; ++i) {
        trace::RingHead *h = trace::ring_head(shm.base, i);
        uint64_t tail = h->tail.load(std::memory_order_relaxed);
        uint64_t head = h->head.load(std::memory_order_acquire);
        const Record *recs = trace::ring_records(shm.base, i);
        for (uint64_t k = tail; k < head; ++k) batch.push_back(recs[k % kRingRecords]);
        h->tail.store(head, std::memory_order_release);
    }
    std::sort(batch.begin(), batch.end(), [](const Record &a, const Record &b) { return a.exit_ns < b.exit_ns; });
    uint64_t shown = 0;
    for (const Record &r : batch) {
        uint64_t took = r.exit_ns - r.entry_ns;
        if ((o.tid && static_cast<int>(r.tid) != o.tid) || took < o.min_duration) continue;
        const std::string &name = r.probe < shm.names.size() ? shm.names[r.probe] : "?";
        if (o.chrome_out) {
            // A complete event ("X") per call, in microseconds, as chrome://tracing and Perfetto read them.
            std::fprintf(o.chrome_out, "%s\n{\"name\":\"%s\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":%d,\"tid\":%u,"
                                       "\"args\":{\"retval\":%" PRId64 "}}",
                         o.chrome_first ? "" : ",", name.c_str(), static_cast<double>(r.entry_ns) / 1e3,
                         static_cast<double>(took) / 1e3, o.traced, r.tid, static_cast<int64_t>(r.retval));
            o.chrome_first = false;
            ++shown;
            continue;
        }
        if (o.json)
            std::printf("{\"time_ns\":%" PRIu64 ",\"tid\":%u,\"function\":\"%s\",\"retval\":%" PRId64
                        ",\"duration_ns\":%" PRIu64 ",\"args\":[%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 "]}\n",
                        r.exit_ns, r.tid, name.c_str(), static_cast<int64_t>(r.retval), took, r.args[0], r.args[1],
                        r.args[2], r.args[3]);
        else
            std::printf("[%5" PRIu64 ".%06" PRIu64 "] %u %s returned %s and took %" PRIu64 " ns to execute\n",
                        r.exit_ns / 1000000000, r.exit_ns / 1000 % 1000000, r.tid, name.c_str(),
                        retval_text(r.retval).c_str(), took);
        ++shown;
    }
    std::fflush(stdout);
    return static_cast<uint64_t>(batch.size());
}

uint64_t count_of(const Shm &shm, uint32_t p)
{
    uint64_t n = 0;
    for (uint32_t r = 0; r < kRings; ++r) n += trace::count_of(shm.base, shm.probes, r, p)->load();
    return n;
}

void print_counts(const Shm &shm)
{
    std::vector<std::pair<uint64_t, uint32_t>> rows;
    for (uint32_t p = 0; p < shm.probes; ++p)
        if (uint64_t n = count_of(shm, p)) rows.emplace_back(n, p);
    std::sort(rows.begin(), rows.end(), [](auto &a, auto &b) { return a.first != b.first ? a.first > b.first : a.second < b.second; });
    for (auto &[n, p] : rows) std::printf("%-40s %" PRIu64 "\n", shm.names[p].c_str(), n);
    std::printf("(%zu of %u functions called)\n", rows.size(), shm.probes);
}

std::string bound(uint32_t b)  // bucket b holds [2^(b-1), 2^b) ns; 0 holds 0
{
    if (b == 0) return "0";
    uint64_t v = uint64_t{1} << (b - 1);
    const char *unit[] = {"", "K", "M", "G", "T"};
    int u = 0;
    while (v >= 1024 && u < 4) v /= 1024, ++u;
    return fmt::format("{}{}", v, unit[u]);
}

void print_hists(const Shm &shm)
{
    for (uint32_t p = 0; p < shm.probes; ++p) {
        uint64_t buckets[trace::kHistBuckets] = {};
        uint64_t total = 0;
        for (uint32_t r = 0; r < kRings; ++r)
            for (uint32_t b = 0; b < trace::kHistBuckets; ++b) {
                uint64_t n = trace::hist_of(shm.base, shm.probes, r, p)[b].load();
                buckets[b] += n;
                total += n;
            }
        if (total == 0) continue;
        uint64_t peak = *std::max_element(buckets, buckets + trace::kHistBuckets);
        uint32_t lo = 0, hi = trace::kHistBuckets - 1;
        while (buckets[lo] == 0) ++lo;
        while (buckets[hi] == 0) --hi;
        std::printf("@ns[%s]: %" PRIu64 " calls\n", shm.names[p].c_str(), total);
        for (uint32_t b = lo; b <= hi; ++b) {
            std::string range = b == 0 ? "[0]" : fmt::format("[{}, {})", bound(b), bound(b + 1));
            int bar = static_cast<int>(buckets[b] * 52 / peak);
            std::printf("%-14s %10" PRIu64 " |%-52s|\n", range.c_str(), buckets[b], std::string(static_cast<size_t>(bar), '@').c_str());
        }
        std::printf("\n");
    }
}

void print_summary(const Shm &shm, uint64_t events, bool counts_events)
{
    Header *h = trace::header_of(shm.base);
    uint64_t dropped = 0, missed = 0, calls = 0;
    for (uint32_t i = 0; i < kRings; ++i) dropped += trace::ring_head(shm.base, i)->dropped.load();
    for (uint32_t p = 0; p < shm.probes; ++p) {
        missed += trace::missed_of(shm.base, p)->load();
        calls += count_of(shm, p);
    }
    std::string miss = h->final.load() ? std::to_string(missed) : std::string("unknown (the process ended abruptly)");
    std::fprintf(stderr, "liveprobe: %u functions traced, %" PRIu64 " calls%s, %" PRIu64 " dropped (ring full), %" PRIu64
                         " without a ring, missed %s\n",
                 shm.probes, calls, counts_events ? fmt::format(" ({} events read)", events).c_str() : "", dropped,
                 h->unringed.load(), miss.c_str());
}

}  // namespace

Runner add_trace(CLI::App &app)
{
    auto *cmd = app.add_subcommand("trace", "Trace functions of a process, or of a program it starts: each call's "
                                            "return value and duration, or counts, or latency histograms");
    auto o = std::make_shared<Opts>();
    cmd->add_option("-p,--pid", o->pid, "The process (without it: the program given after --)");
    auto *c = cmd->add_flag("--count", o->count, "At the end, how many times each function was called");
    cmd->add_flag("--hist", o->hist, "At the end, a log2 histogram of each function's durations")->excludes(c);
    cmd->add_flag("--json", o->json, "One JSON object per call instead of a line");
    cmd->add_flag("--no-follow", o->no_follow, "Do not trace the children the process forks (they are by default)");
    cmd->add_option("--chrome", o->chrome, "Write the calls to FILE as Chrome trace events (chrome://tracing, Perfetto)");
    cmd->add_option("--maxactive", o->maxactive, "Calls of one function followed at once (default 64)")
        ->check(CLI::Range(1, 100000));
    cmd->add_option("--duration", o->duration, "Stop after this many seconds");
    cmd->add_option("--tid", o->tid, "Only the calls of this thread");
    cmd->add_option("--min-duration", o->min_duration, "Only the calls that took at least this many ns");
    cmd->add_option("specs", o->specs, "Functions: NAME, OBJECT:NAME, or a glob ('*', 'libz.so.1:*')")->required();
    cmd->footer("Examples:\n  liveprobe trace -p 1234 do_sys_open\n  liveprobe trace --count '*' -- ./server\n"
                "  liveprobe trace --hist 'libz.so.1:*' -p 1234");
    return [o] {
        const std::vector<std::string> &command = insmod_command();
        if ((o->pid != 0) == !command.empty()) {
            complain("trace: give either -p PID or a program to start after --");
            return kExitUsage;
        }
        const char *mode = o->count ? "count" : o->hist ? "hist" : "events";
        if (!o->chrome.empty()) {
            if (o->count || o->hist) {
                complain("trace: --chrome writes calls: not with --count or --hist");
                return kExitUsage;
            }
            o->chrome_out = std::fopen(o->chrome.c_str(), "w");
            if (!o->chrome_out) {
                complain(fmt::format("trace: {}: {}", o->chrome, std::strerror(errno)));
                return kExitFailure;
            }
            std::fprintf(o->chrome_out, "{\"traceEvents\":[");
        }
        signal(SIGPIPE, SIG_IGN);  // a reader that goes away (| head) ends the trace, cleanly
        Shm shm;
        pid_t child = 0;
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, SIGINT);
        sigaddset(&set, SIGTERM);
        sigaddset(&set, SIGCHLD);
        sigprocmask(SIG_BLOCK, &set, nullptr);
        int sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
        std::string why;
        if (o->pid != 0) {
            auto info = process_info(o->pid, &why);
            if (!info) {
                complain(why);
                return kExitFailure;
            }
            o->traced = o->pid;
            AttachReport rep;
            if (attach_agent(o->pid, &rep, &why) < 0) {
                complain(fmt::format("trace: attach {}: {}", o->pid, why));
                return kExitFailure;
            }
            std::vector<std::string> args{std::string(mode) + (o->no_follow ? ":nofollow" : ""),
                                          std::to_string(o->maxactive)};
            args.insert(args.end(), o->specs.begin(), o->specs.end());
            std::fprintf(stderr, "liveprobe: placing probes in process %d...\n", o->pid);
            agent::Reply reply;
            if (agent::request(info->uid, o->pid, "trace-start", args, &reply, &why, 300000) < 0) {
                complain(fmt::format("trace: {}", why));
                return kExitFailure;
            }
            if (!reply.ok) {
                complain(fmt::format("trace: process {}: {}", o->pid, reply.reason));
                return kExitFailure;
            }
            int fd = -1;
            size_t skipped = 0;
            for (const std::string &l : reply.lines) {
                if (l.rfind("memfd ", 0) == 0) fd = std::atoi(l.c_str() + 6);
                if (l.rfind("skipped ", 0) == 0 && skipped++ < 5) std::fprintf(stderr, "liveprobe: not traced: %s\n", l.c_str() + 8);
            }
            if (skipped > 5) std::fprintf(stderr, "liveprobe: ... and %zu more not traced\n", skipped - 5);
            int mfd = open(fmt::format("/proc/{}/fd/{}", o->pid, fd).c_str(), O_RDWR | O_CLOEXEC);
            struct stat st {};
            if (mfd < 0 || fstat(mfd, &st) != 0) {
                complain(fmt::format("trace: cannot open the trace's shared memory in process {}: {}", o->pid,
                                     std::strerror(errno)));
                agent::request(info->uid, o->pid, "trace-stop", {}, &reply, &why);
                return kExitFailure;
            }
            shm.bytes = static_cast<size_t>(st.st_size);
            shm.base = mmap(nullptr, shm.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
            close(mfd);
        } else {
            // A program to start: our memfd, inherited; the probes are placed before its main.
            std::string library = agent_library(&why);
            if (library.empty()) {
                complain(why);
                return kExitFailure;
            }
            std::string start = library.substr(0, library.rfind('/')) + "/libliveprobe-start.so";
            int mfd = static_cast<int>(syscall(SYS_memfd_create, "liveprobe-trace", 0));
            if (mfd < 0 || ftruncate(mfd, static_cast<off_t>(trace::kToolMemfdBytes)) != 0) {
                complain(fmt::format("trace: cannot make the shared memory: {}", std::strerror(errno)));
                return kExitFailure;
            }
            shm.bytes = trace::kToolMemfdBytes;
            shm.base = mmap(nullptr, shm.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
            std::string spec = std::string(mode) + " " + std::to_string(o->maxactive);
            for (const std::string &s : o->specs) spec += " " + agent::encode_arg(s);
            child = fork();
            if (child == 0) {
                sigprocmask(SIG_UNBLOCK, &set, nullptr);
                const char *pre = std::getenv("LD_PRELOAD");
                std::string preload = (pre && *pre ? std::string(pre) + ":" : std::string()) + library + ":" + start;
                setenv("LD_PRELOAD", preload.c_str(), 1);
                setenv("LIVEPROBE_AGENT", "1", 1);
                setenv("LIVEPROBE_TRACE", spec.c_str(), 1);
                setenv("LIVEPROBE_TRACE_FD", std::to_string(mfd).c_str(), 1);
                if (o->no_follow) setenv("LIVEPROBE_TRACE_NOFOLLOW", "1", 1);
                std::vector<char *> argv;
                for (const std::string &a : command) argv.push_back(const_cast<char *>(a.c_str()));
                argv.push_back(nullptr);
                execvp(argv[0], argv.data());
                std::fprintf(stderr, "liveprobe: cannot run %s: %s\n", argv[0], std::strerror(errno));
                _exit(127);
            }
            close(mfd);
            o->traced = child;
            std::fprintf(stderr, "liveprobe: started PID %d\n", child);
        }
        if (shm.base == MAP_FAILED || shm.base == nullptr) {
            complain(fmt::format("trace: cannot map the shared memory: {}", std::strerror(errno)));
            return kExitFailure;
        }
        // The reading loop: every 20 ms, until the end (Ctrl-C, --duration, the process gone).
        auto t0 = std::chrono::steady_clock::now();
        uint64_t events = 0;
        int status = 0;
        bool ended = false, named = false;
        while (!ended) {
            struct pollfd p = {sfd, POLLIN, 0};
            poll(&p, 1, 20);
            struct signalfd_siginfo si {};
            while (read(sfd, &si, sizeof si) == static_cast<ssize_t>(sizeof si))
                if (si.ssi_signo == SIGINT || si.ssi_signo == SIGTERM) ended = true;
            if (child) {
                if (waitpid(child, &status, WNOHANG) == child) ended = true;
            } else {
                std::string ignored;
                auto info = process_info(o->pid, &ignored);
                if (!info || info->state == 'Z') ended = true;
            }
            if (o->duration > 0 &&
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() >= o->duration)
                ended = true;
            if (!named) named = load_names(&shm);
            if (named && !o->count && !o->hist) events += drain(shm, *o);
            if (std::ferror(stdout)) ended = true;
        }
        if (o->pid && !child) {
            agent::Reply reply;
            agent::request(getuid(), o->pid, "trace-stop", {}, &reply, &why);  // publishes the misses
        } else if (child && !WIFEXITED(status) && !WIFSIGNALED(status)) {
            kill(child, SIGTERM);
            waitpid(child, &status, 0);
        }
        if (!named) named = load_names(&shm);
        if (!named) {
            complain(child ? "trace: the program ended before its probes were placed (see its messages above)"
                           : "trace: the shared memory holds no session");
            return child && WIFEXITED(status) ? WEXITSTATUS(status) : kExitFailure;
        }
        if (!o->count && !o->hist) events += drain(shm, *o);
        if (o->count) print_counts(shm);
        if (o->hist) print_hists(shm);
        if (o->chrome_out) {
            std::fprintf(o->chrome_out, "\n],\"displayTimeUnit\":\"ns\"}\n");
            std::fclose(o->chrome_out);
            std::fprintf(stderr, "liveprobe: wrote %s\n", o->chrome.c_str());
        }
        std::fflush(stdout);  // the summary (stderr) after what it sums up
        print_summary(shm, events, !o->count && !o->hist);
        if (child) return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
        return 0;
    };
}

}  // namespace liveprobe::tool
