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
#include <sys/resource.h>
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
#include <memory>
#include <optional>
#include <sstream>

#include <fmt/format.h>

#include "agent/channel.hpp"
#include "agent_library.hpp"
#include "commands.hpp"
#include "injector.hpp"
#include "process.hpp"
#include "trace/rings.hpp"
#include "trace/spec.hpp"
#include "trace_codec.hpp"
#include "trace_output.hpp"
#include "trace_writer.hpp"

namespace liveprobe::tool {
namespace {

using trace::Header;
using trace::kRings;
using trace::kRingRecords;
using trace::Record;

struct Opts {
    int pid = 0;
    bool count = false, hist = false, no_follow = false, verbose = false;
    std::string chrome;  // --chrome FILE
    std::string output;  // -o FILE: a trace file
    std::string input;   // -i FILE: show a trace file
    std::unique_ptr<TraceWriter> out;  // -o
    TraceEncoder encoder;              // -o: the events, encoded
    std::vector<char> encoded;         // -o: the buffer of `out` the events are encoded into
    PrintOptions print;
    int maxactive = 16384;
    double duration = 0;
    std::vector<std::string> specs;
    TraceProbes probes;  // the specs, parsed; the probes once the session runs
};

// What the reader knows of the shared memory.
struct Shm {
    void *base = nullptr;
    size_t bytes = 0;
    uint32_t probes = 0;      // the probes whose names it has read
    uint32_t capacity = 0;    // the per-probe areas' stride
    uint64_t names_bytes = 0; // how much of the names it has read
};

// The probes of the session (their names and specs), once the target has set it up.
bool load_names(Shm *shm, Opts &o)
{
    Header *h = trace::header_of(shm->base);
    if (h->magic != trace::kRingsMagic || h->ready.load(std::memory_order_acquire) != 1) return false;
    uint32_t published = h->probes.load(std::memory_order_acquire);
    shm->capacity = h->capacity;
    shm->names_bytes = h->names_bytes.load(std::memory_order_acquire);  // names first, then probes
    std::string text(static_cast<const char *>(shm->base) + h->names_offset, shm->names_bytes);
    std::istringstream in(text);
    // "spec TEXT" for each spec as the target placed it (parameters resolved), then
    // "ADDRESS SPEC NAME" for each probe, the name to the end of the line (a C++ name has spaces).
    o.probes.names.clear();
    o.probes.spec.clear();
    std::vector<trace::Spec> placed;
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("spec ", 0) == 0) {
            trace::Spec spec;
            std::string error;
            size_t at = 0;
            if (!trace::parse_spec(agent::decode_arg(line.substr(5)), &spec, &error, &at)) return false;
            placed.push_back(std::move(spec));
            continue;
        }
        size_t a = line.find(' '), b = a == std::string::npos ? a : line.find(' ', a + 1);
        if (b == std::string::npos) return false;
        uint32_t spec = static_cast<uint32_t>(std::strtoul(line.c_str() + a + 1, nullptr, 10));
        if (spec >= placed.size()) return false;
        o.probes.spec.push_back(spec);
        o.probes.names.push_back(demangled(line.substr(b + 1)));
    }
    o.probes.specs = std::move(placed);
    o.probes.payload.clear();
    for (uint32_t p = 0; p < o.probes.spec.size(); ++p)
        o.probes.payload.push_back(static_cast<uint32_t>(trace::event_bytes(o.probes.spec_of(p))));
    // Every probe named is known (one that is named but not yet counted cannot fire yet).
    shm->probes = static_cast<uint32_t>(o.probes.names.size());
    return shm->probes >= published;
}

// Takes the events out of the rings, then prints them (time order within the batch) or writes
// them to the trace file. Returns how many. Printed, at most kPrintBatch a ring a call: a ring
// of 524,288 calls took seconds to format, during which the tool saw no Ctrl-C and no end of
// --duration while the program filled the rings again (a trace of 0.3 s ended after 3 to 5 s).
// The caller calls again until it returns 0 to take everything.
constexpr uint64_t kPrintBatch = 16384;
uint64_t drain(const Shm &shm, Opts &o)
{
    if (o.out) {
        // A trace file holds the events encoded (trace_codec.hpp), each with its values. A
        // ring's [tail, head) always ends at an event's end. The events are encoded straight
        // into one of the writer's buffers (no per-event append), handed over when full.
        uint64_t events = 0;
        std::vector<char> &buf = o.encoded;
        if (buf.empty()) buf = o.out->buffer();
        size_t used = 0;
        auto hand_over = [&] {
            o.out->submit(std::move(buf), used);
            buf = o.out->buffer();
            used = 0;
        };
        std::string values;
        for (uint32_t i = 0; i < kRings; ++i) {
            trace::RingHead *h = trace::ring_head(shm.base, i);
            uint64_t tail = h->tail.load(std::memory_order_relaxed);
            uint64_t head = h->head.load(std::memory_order_acquire);
            const Record *recs = trace::ring_records(shm.base, i);
            if (shm.probes < trace::header_of(shm.base)->probes.load(std::memory_order_acquire))
                continue;  // probes were placed since the names were read: their names go first
            uint64_t k = tail;
            while (k < head) {
                const Record &r = recs[k % kRingRecords];
                if (r.probe >= shm.probes) break;  // not named yet: the next time
                const size_t bytes = o.probes.payload[r.probe];
                const uint64_t slots = bytes ? trace::record_slots(bytes) : 1;
                if (k + slots > head) break;
                if (slots > 1) {
                    values.clear();
                    for (uint64_t v = k + 1; v < k + slots; ++v)
                        values.append(reinterpret_cast<const char *>(&recs[v % kRingRecords]), sizeof(Record));
                }
                if (const size_t need = used + TraceEncoder::kMaxEventBytes + bytes; need > buf.size())
                    buf.resize(std::max(need, 2 * buf.size()));  // values larger than a buffer
                used = static_cast<size_t>(o.encoder.event(r, values.data(), bytes, buf.data() + used) - buf.data());
                k += slots;
                ++events;
                if (used >= TraceWriter::kBuffer) {
                    hand_over();
                    // The room read so far goes back to the writer now, not at the end of a pass
                    // that may take tens of milliseconds when this thread loses its core.
                    h->tail.store(k, std::memory_order_release);
                }
            }
            h->tail.store(k, std::memory_order_release);
        }
        if (used > 0) hand_over();
        return events;
    }
    std::vector<TraceEvent> batch;
    for (uint32_t i = 0; i < kRings; ++i) {
        trace::RingHead *h = trace::ring_head(shm.base, i);
        uint64_t tail = h->tail.load(std::memory_order_relaxed);
        uint64_t head = h->head.load(std::memory_order_acquire);
        const Record *recs = trace::ring_records(shm.base, i);
        uint64_t k = tail;
        while (k < head && k - tail < kPrintBatch) {
            TraceEvent e{recs[k % kRingRecords], {}};
            if (e.r.probe >= shm.probes) break;  // placed since the names were read: the next time
            ++k;
            for (const size_t bytes = o.probes.payload[e.r.probe]; e.values.size() < bytes && k < head; ++k)
                e.values.append(reinterpret_cast<const char *>(&recs[k % kRingRecords]),
                                std::min(bytes - e.values.size(), sizeof(Record)));
            batch.push_back(std::move(e));
        }
        h->tail.store(k, std::memory_order_release);
    }
    print_events(batch, o.probes, o.print);
    return static_cast<uint64_t>(batch.size());
}

// --count and --hist: the target's per-thread rows, summed. Only the rows of rings some thread
// claimed (a ring's tid is never 0 again once claimed): the others were never written, and
// reading them would fault in zero pages of the shared memory, megabytes for --hist '*' (its
// rows are 320 bytes a probe a ring): 18% of the samples of `trace --hist '*' -- jq --version`
// under perf were this sum's page faults.
TraceTotals totals_of(const Shm &shm)
{
    TraceTotals t(shm.probes);
    bool hist = trace::header_of(shm.base)->hist != 0;
    for (uint32_t r = 0; r < kRings; ++r) {
        const trace::RingHead *h = trace::ring_head(shm.base, r);
        if (h->tid.load(std::memory_order_acquire) == 0) continue;
        // --hist: the ring's last call, left pending by the light return (rings.hpp hist_pending).
        if (const uint64_t w = h->hist_pending.load(std::memory_order_acquire); hist && w != 0 &&
                                                                              w <= uint64_t{shm.probes} * trace::kHistBuckets) {
            t.hist[(w - 1) / trace::kHistBuckets][(w - 1) % trace::kHistBuckets]++;
            t.count[(w - 1) / trace::kHistBuckets]++;
        }
        for (uint32_t p = 0; p < shm.probes; ++p) {
            if (!hist) {
                t.count[p] += trace::count_of(shm.base, shm.capacity, r, p)->load();
                continue;
            }
            for (uint32_t b = 0; b < trace::kHistBuckets; ++b) {  // --hist counts no calls but in buckets
                const uint64_t n = trace::hist_of(shm.base, shm.capacity, r, p)[b].load();
                t.hist[p][b] += n;
                t.count[p] += n;
            }
        }
    }
    return t;
}

// `events`: what the reading took out of the rings (per-event modes), and `read`, the words
// for it (" (N events read)"), or empty (--count, --hist: the calls are the counters' sum). In
// the per-event modes the target counts no calls, only what the full rings dropped: the calls
// are what was read and what was dropped.
void print_summary(const Shm &shm, const TraceTotals &t, uint64_t events, const std::string &read)
{
    Header *h = trace::header_of(shm.base);
    uint64_t dropped = 0, missed = 0, calls = 0;
    for (uint32_t i = 0; i < kRings; ++i) dropped += trace::ring_head(shm.base, i)->dropped.load();
    for (uint32_t p = 0; p < shm.probes; ++p) {
        missed += trace::missed_of(shm.base, p)->load();
        calls += t.count[p];
    }
    if (!read.empty()) calls = events + dropped;
    std::string miss = h->final.load() ? std::to_string(missed) : std::string("unknown (the process ended abruptly)");
    std::fprintf(stderr, "liveprobe: %u functions traced, %" PRIu64 " calls%s, %" PRIu64 " dropped (ring full), %" PRIu64
                         " without a ring, missed %s\n",
                 shm.probes, calls, read.c_str(), dropped,
                 h->unringed.load(), miss.c_str());
}

// -i FILE: a trace file shown as the options ask.
int show_file(Opts &o)
{
    int pid = 0;
    std::string why;
    uint64_t events = 0;
    TraceTotals *totals = nullptr;
    bool ok = read_trace_file(
        o.input, &o.probes, &pid,
        [&](std::vector<TraceEvent> &batch) {
            events += batch.size();
            if (o.count || o.hist) {
                if (!totals) totals = new TraceTotals(o.probes.names.size());
                totals->count.resize(o.probes.names.size());  // probes placed later, in the file
                totals->hist.resize(o.probes.names.size());
                for (const TraceEvent &e : batch) totals->add(e, o.probes);
            } else {
                o.print.pid = pid;
                print_events(batch, o.probes, o.print);
            }
        },
        &why);
    if (totals && o.count) print_counts(*totals, o.probes);
    if (totals && o.hist) print_hists(*totals, o.probes);
    delete totals;
    if (o.print.chrome) {
        chrome_end(o.print.chrome);
        std::fclose(o.print.chrome);
    }
    std::fflush(stdout);
    if (!ok) {
        complain("trace: " + why);
        return kExitFailure;
    }
    std::fprintf(stderr, "liveprobe: %" PRIu64 " events of process %d in %s\n", events, pid, o.input.c_str());
    return 0;
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
    cmd->add_flag("--json", o->print.json, "One JSON object per call instead of a line");
    auto *out = cmd->add_option("-o,--output", o->output,
                                "Write the events to FILE, as the target wrote them (fast: nothing is formatted); "
                                "show them later with -i FILE");
    cmd->add_option("-i,--input", o->input, "Show the events of a trace file written with -o (with --json, --chrome, "
                                            "--count, --hist, --tid, --min-duration)")
        ->excludes(out);
    cmd->add_flag("--no-follow", o->no_follow, "Do not trace the children the process forks (they are by default)");
    cmd->add_flag("--verbose", o->verbose,
                  "Name each probe left on the breakpoint path (microseconds a hit), with its reason");
    cmd->add_option("--chrome", o->chrome, "Write the calls to FILE as Chrome trace events (chrome://tracing, Perfetto)");
    cmd->add_option("--maxactive", o->maxactive,
                    "Calls of one function followed at once, per function (default 16384: recursion that deep; "
                    "deeper calls are counted as missed; memory is taken only as calls nest)")
        ->check(CLI::Range(1, 100000));
    cmd->add_option("--duration", o->duration, "Stop tracing after this many seconds (a program started with -- runs on)");
    cmd->add_option("--tid", o->print.tid, "Only the calls of this thread");
    cmd->add_option("--min-duration", o->print.min_duration, "Only the calls that took at least this many ns");
    cmd->add_option("specs", o->specs,
                    "What to trace: FUNC (NAME, OBJECT:NAME, a C++ name or a glob such as '*' or 'libz.so.1:*'), "
                    "FUNC+OFF, 'p:LOC FETCHARG...' or 'r:FUNC FETCHARG...' (one argument each)");
    cmd->footer("Specs, as the kernel's kprobe_events (one shell argument each):\n"
                "  FUNC                      each call's return value and duration\n"
                "  FUNC+OFF                  each time a thread reaches the instruction at FUNC+OFF\n"
                "  p:LOC [FETCHARG...]       at LOC (FUNC or FUNC+OFF), the values FETCHARG...\n"
                "  r[N]:FUNC [FETCHARG...]   at FUNC's return (N: calls followed at once)\n"
                "  (p:GRP/EVENT LOC ... names the event)\n"
                "FETCHARG: [NAME=]FETCH[:TYPE]; FETCH: a parameter's name (from DWARF), %REG (%di, %rax, ...),\n"
                "  $argN (1-based), $retval (r:),\n"
                "  $stack, $stackN, $comm, @ADDR, @SYM[+OFF], +|-OFF(FETCH) (memory at FETCH+OFF), \\IMM;\n"
                "  TYPE: u8..u64, s8..s64, x8..x64 (default x64), string.\n"
                "How a trace ends:\n"
                "  -p PID: Ctrl-C, SIGTERM, SIGHUP, --duration or the process's end. The probes are removed\n"
                "    and the process runs on; if the tool dies (SIGKILL, OOM) its agent removes them itself.\n"
                "  -- CMD: with the program. It stays in the terminal's foreground, so Ctrl-C reaches it as\n"
                "    without liveprobe; signals sent to the tool are passed on to it. --duration stops the\n"
                "    tracing and lets it run on untraced (the tool waits for it); if the tool is killed,\n"
                "    the program runs on with its probes removed.\n"
                "  `liveprobe detach -p PID` removes everything placed through the agent.\n"
                "Examples:\n  liveprobe trace -p 1234 do_sys_open\n  liveprobe trace --count '*' -- ./server\n"
                "  liveprobe trace --hist 'libz.so.1:*' -p 1234\n"
                "  liveprobe trace -p 1234 'p:open path=+0($arg1):string flags=$arg2:x32' 'r:open fd=$retval:s32'\n"
                "  liveprobe trace 'p:parse_config path depth' -- ./server   (parameters by name: built with -g)\n"
                "  liveprobe trace -o calls.lptrace '*' -- ./server; liveprobe trace -i calls.lptrace --json");
    return [o] {
        const std::vector<std::string> &command = insmod_command();
        stdout_whole_lines();
        if (!o->chrome.empty()) {
            if (o->count || o->hist || !o->output.empty()) {
                complain("trace: --chrome writes calls: not with --count, --hist or -o");
                return kExitUsage;
            }
            o->print.chrome = std::fopen(o->chrome.c_str(), "w");
            if (!o->print.chrome) {
                complain(fmt::format("trace: {}: {}", o->chrome, std::strerror(errno)));
                return kExitFailure;
            }
            chrome_begin(o->print.chrome);
        }
        if (!o->input.empty()) {
            if (o->pid != 0 || !command.empty() || !o->specs.empty()) {
                complain("trace: -i FILE shows a trace file: no -p, program or spec");
                return kExitUsage;
            }
            return show_file(*o);
        }
        if (o->specs.empty()) {
            complain("trace: what to trace is missing (a function, a glob, p:..., r:...; see --help)");
            return kExitUsage;
        }
        if ((o->pid != 0) == !command.empty()) {
            complain("trace: give either -p PID or a program to start after --");
            return kExitUsage;
        }
        const char *mode = o->count ? "count" : o->hist ? "hist" : "events";
        // Every spec parsed here first: a mistake is shown before anything is attached or run.
        for (const std::string &text : o->specs) {
            trace::Spec spec;
            std::string error;
            size_t at = 0;
            if (!trace::parse_spec(text, &spec, &error, &at)) {
                complain("trace: " + trace::point_at(text, at, error));
                return kExitUsage;
            }
            if (std::string c = trace::mode_conflict(spec, o->count, o->hist); !c.empty()) {
                complain("trace: " + c);
                return kExitUsage;
            }
            o->probes.specs.push_back(std::move(spec));
        }
        // Taken by the loop below through a signalfd: blocked first, in every thread (the
        // trace file's writer thread, started next, inherits the mask; with SIGINT open there,
        // Ctrl-C killed the tool before its summary).
        signal(SIGPIPE, SIG_IGN);  // a reader that goes away (| head) ends the trace, cleanly
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, SIGINT);
        sigaddset(&set, SIGTERM);
        sigaddset(&set, SIGCHLD);
        sigaddset(&set, SIGHUP);  // -p: a terminal that went away (ssh dropped) ends it as Ctrl-C does
        add_forwarded_signals(&set);  // -- CMD: passed on to the program
        sigprocmask(SIG_BLOCK, &set, nullptr);
        std::optional<ProcessInfo> info;  // -p: the process, looked up before -o makes its file
        if (o->pid != 0) {
            std::string why;
            if (!(info = process_info(o->pid, &why))) {
                complain(why);
                return kExitFailure;
            }
        }
        if (!o->output.empty()) {
            if (o->count || o->hist || o->print.json) {
                complain("trace: -o writes the events: not with --count, --hist or --json (use them with -i)");
                return kExitUsage;
            }
            o->out = std::make_unique<TraceWriter>();
            std::string why;
            if (!o->out->open(o->output, &why)) {
                complain("trace: " + why);
                return kExitFailure;
            }
        }
        Shm shm;
        pid_t child = 0;
        // The descriptor the session lasts as long as: -p, the connection held; -- CMD, the
        // write end of a pipe whose read end the program's agent watches (closing it, or dying,
        // stops the program's tracing).
        int owner_conn = -1;
        // What trace-stop names: -p, the session the agent started for us (others may run beside
        // it); -- CMD, none: the agent stops the one its tool, we, started.
        std::vector<std::string> stop_args;
        int sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
        std::string why;
        if (o->pid != 0) {
            o->print.pid = o->pid;
            AttachReport rep;
            if (attach_agent(o->pid, &rep, &why) < 0) {
                complain(fmt::format("trace: attach {}: {}", o->pid, why));
                return kExitFailure;
            }
            // :owned: the session lasts as long as this tool's connection (held below): if the
            // tool dies, however, the agent removes the probes.
            std::vector<std::string> args{std::string(mode) + (o->no_follow ? ":nofollow" : "") + ":owned" +
                                              (o->verbose ? ":verbose" : ""),
                                          std::to_string(o->maxactive)};
            args.insert(args.end(), o->specs.begin(), o->specs.end());
            std::fprintf(stderr, "liveprobe: placing probes in process %d...\n", o->pid);
            agent::Reply reply;
            if (agent::request(info->uid, o->pid, "trace-start", args, &reply, &why, 300000, &owner_conn) < 0) {
                std::string ignored;
                auto now = process_info(o->pid, &ignored);
                if (!now || now->state == 'Z') why = fmt::format("process {} exited while its probes were placed", o->pid);
                complain(fmt::format("trace: {}", why));
                return kExitFailure;
            }
            if (!reply.ok) {
                complain(fmt::format("trace: process {}: {}", o->pid, reply.reason));
                return kExitFailure;
            }
            int fd = -1;
            size_t skipped = 0;
            // An agent older than the :owned option closed the connection after its reply: the
            // session is then stopped by the tool's trace-stop only, as it was.
            if (std::find(reply.lines.begin(), reply.lines.end(), "owned") == reply.lines.end() && owner_conn >= 0) {
                close(owner_conn);
                owner_conn = -1;
                std::fprintf(stderr,
                             "liveprobe: the agent in process %d is older than this tool: if the tool is killed, "
                             "the probes stay until the next trace (restart the program for a current agent)\n",
                             o->pid);
            }
            for (const std::string &l : reply.lines) {
                if (l.rfind("session ", 0) == 0) stop_args = {l.substr(8)};  // agents before sessions side by side: none
                if (l.rfind("memfd ", 0) == 0) fd = std::atoi(l.c_str() + 6);
                if (l.rfind("placed ", 0) == 0) std::fprintf(stderr, "liveprobe: %s\n", l.c_str());
                if (l.rfind("slow ", 0) == 0 && !o->verbose)
                    std::fprintf(stderr, "liveprobe: on the breakpoint path: %s\n", l.c_str() + 5);
                if (l.rfind("slowprobe ", 0) == 0)
                    std::fprintf(stderr, "liveprobe: on the breakpoint path: %s\n", l.c_str() + 10);
                if (l.rfind("skipped ", 0) == 0 && skipped++ < 5) std::fprintf(stderr, "liveprobe: not traced: %s\n", l.c_str() + 8);
            }
            if (skipped > 5) std::fprintf(stderr, "liveprobe: ... and %zu more not traced\n", skipped - 5);
            int mfd = open(fmt::format("/proc/{}/fd/{}", o->pid, fd).c_str(), O_RDWR | O_CLOEXEC);
            struct stat st {};
            if (mfd < 0 || fstat(mfd, &st) != 0) {
                complain(fmt::format("trace: cannot open the trace's shared memory in process {}: {}", o->pid,
                                     std::strerror(errno)));
                agent::request(info->uid, o->pid, "trace-stop", stop_args, &reply, &why);
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
            std::string start = start_library(library, "trace");
            if (start.empty()) return kExitFailure;
            int mfd = static_cast<int>(syscall(SYS_memfd_create, "liveprobe-trace", 0));
            if (mfd < 0 || ftruncate(mfd, static_cast<off_t>(trace::kToolMemfdBytes)) != 0) {
                complain(fmt::format("trace: cannot make the shared memory: {}", std::strerror(errno)));
                return kExitFailure;
            }
            shm.bytes = trace::kToolMemfdBytes;
            shm.base = mmap(nullptr, shm.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
            std::string spec = std::string(mode) + " " + std::to_string(o->maxactive);
            for (const std::string &s : o->specs) spec += " " + agent::encode_arg(s);
            int owner[2] = {-1, -1};
            if (pipe2(owner, O_CLOEXEC) != 0) {
                complain(fmt::format("trace: pipe: {}", std::strerror(errno)));
                return kExitFailure;
            }
            // In the terminal's foreground process group, as without liveprobe: the terminal's
            // Ctrl-C and SIGHUP reach the program itself; the tool passes on what is sent to it.
            child = fork();
            if (child == 0) {
                sigprocmask(SIG_UNBLOCK, &set, nullptr);
                fcntl(owner[0], F_SETFD, 0);  // the program's agent takes it (agent.cpp)
                setenv("LIVEPROBE_TRACE_OWNER_FD", std::to_string(owner[0]).c_str(), 1);
                setenv("LIVEPROBE_TRACE", spec.c_str(), 1);
                setenv("LIVEPROBE_TRACE_FD", std::to_string(mfd).c_str(), 1);
                if (o->no_follow) setenv("LIVEPROBE_TRACE_NOFOLLOW", "1", 1);
                if (o->verbose) setenv("LIVEPROBE_TRACE_VERBOSE", "1", 1);
                exec_with_agent(command, library, start);
            }
            close(mfd);
            close(owner[0]);
            owner_conn = owner[1];
            o->print.pid = child;
            std::fprintf(stderr, "liveprobe: started PID %d\n", child);
        }
        if (shm.base == MAP_FAILED || shm.base == nullptr) {
            complain(fmt::format("trace: cannot map the shared memory: {}", std::strerror(errno)));
            return kExitFailure;
        }
        // The reading loop, until the end (Ctrl-C, --duration, the process gone): the rings are
        // drained again at once while they have events, every 20 ms when they are quiet; the end
        // is looked for every 20 ms.
        auto t0 = std::chrono::steady_clock::now();
        auto checked = t0;
        uint64_t events = 0, last = 0;
        int status = 0;
        bool ended = false, named = false, child_done = false;
        auto name_session = [&] {
            named = load_names(&shm, *o);
            if (named && o->out) {
                std::string header = trace_header(o->print.pid, o->probes);
                o->out->write(header.data(), header.size());
            }
        };
        // Probes placed later (a library a spec waits for was loaded): their names, before their
        // events (in a trace file, a new header among the records).
        auto rename_session = [&] {
            Header *hd = trace::header_of(shm.base);
            if (hd->names_bytes.load(std::memory_order_acquire) == shm.names_bytes) return;
            uint32_t before = shm.probes;
            if (!load_names(&shm, *o)) return;
            std::fprintf(stderr, "liveprobe: placed %u more probes (a library was loaded)\n", shm.probes - before);
            if (o->out) {
                std::string again;
                TraceEncoder::header(trace_header(o->print.pid, o->probes), &again);
                o->out->write(again.data(), again.size());
            }
        };
        // The per-event modes read the rings again at once after a large batch, else after a
        // millisecond. Not 20 ms: a program that was quiet for a while (jq reading its next
        // test) can fill 8 MiB of ring (262,144 records) in under 20 ms once it runs again (jq's
        // traced calls: 13 million a second), and a reader asleep for 20 ms dropped a fifth of
        // jq's events while using a tenth of a core. Not at once after every batch either: a
        // reader that spins takes the rings' cache lines from the writers all the time (jq
        // ran 30% longer so).
        const int idle_ms = o->count || o->hist ? 20 : 1;
        while (!ended) {
            struct pollfd p = {sfd, POLLIN, 0};
            poll(&p, 1, last >= kPrintBatch ? 0 : idle_ms);  // a batch as large as drain takes: at once
            auto now = std::chrono::steady_clock::now();
            if (!last || now - checked >= std::chrono::milliseconds(20)) {
                checked = now;
                struct signalfd_siginfo si {};
                while (read(sfd, &si, sizeof si) == static_cast<ssize_t>(sizeof si)) {
                    if (child) forward_signal(child, si);  // the program decides; the trace goes on
                    else if (si.ssi_signo == SIGINT || si.ssi_signo == SIGTERM || si.ssi_signo == SIGHUP ||
                             si.ssi_signo == SIGQUIT)
                        ended = true;
                }
                if (child) {
                    if (waitpid(child, &status, WNOHANG) == child) ended = child_done = true;
                } else {
                    std::string ignored;
                    auto info = process_info(o->pid, &ignored);
                    if (!info || info->state == 'Z') ended = true;
                }
                if (o->duration > 0 && std::chrono::duration<double>(now - t0).count() >= o->duration) ended = true;
                if (owner_conn >= 0 && !child) {  // the agent ends it only when the session was stopped for us
                    struct pollfd c = {owner_conn, POLLIN, 0};
                    if (poll(&c, 1, 0) > 0 && !ended) {
                        std::fprintf(stderr, "liveprobe: the session was ended in process %d (liveprobe detach)\n",
                                     o->pid);
                        ended = true;
                    }
                }
            }
            if (!named) name_session();
            else rename_session();
            last = named && !o->count && !o->hist ? drain(shm, *o) : 0;
            events += last;
            if (std::ferror(stdout) || (o->out && o->out->failed())) ended = true;
        }
        bool running_on = false;  // -- CMD: the program outlives the trace (--duration, output gone)
        if (o->pid && !child) {
            agent::Reply reply;
            agent::request(getuid(), o->pid, "trace-stop", stop_args, &reply, &why);  // publishes the misses
            if (owner_conn >= 0) close(owner_conn);
        } else if (child && !child_done) {
            // The program runs on, untraced: its session stopped (its misses published), and
            // the pipe closed for the children it forked, whose agents stop theirs.
            agent::Reply reply;
            agent::request(getuid(), child, "trace-stop", {}, &reply, &why);
            close(owner_conn);
            running_on = true;
            std::fprintf(stderr, "liveprobe: tracing stopped (%s); PID %d runs on untraced\n",
                         std::ferror(stdout) || (o->out && o->out->failed()) ? "the output failed" : "--duration",
                         child);
        }
        if (!named) name_session();
        else rename_session();
        if (!named) {
            complain(child ? "trace: the program ended before its probes were placed (see its messages above)"
                           : "trace: the shared memory holds no session");
            return child && WIFEXITED(status) ? WEXITSTATUS(status) : kExitFailure;
        }
        if (!o->count && !o->hist)
            for (uint64_t n; (n = drain(shm, *o)) > 0;) events += n;  // everything left, in batches
        TraceTotals totals = totals_of(shm);
        if (o->count) print_counts(totals, o->probes);
        if (o->hist) print_hists(totals, o->probes);
        if (o->print.chrome) {
            chrome_end(o->print.chrome);
            std::fclose(o->print.chrome);
            std::fprintf(stderr, "liveprobe: wrote %s\n", o->chrome.c_str());
        }
        if (o->out) {
            size_t size = 0;
            std::string why;
            if (!o->out->close(&size, &why)) complain(fmt::format("trace: {}: {}", o->output, why));
            else {
                // This process's CPU time (its threads: starting, reading, writing; the target,
                // a child, is not counted): what tracing took from the machine beside the target.
                struct rusage ru {};
                getrusage(RUSAGE_SELF, &ru);
                const double cpu = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                                   static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
                std::fprintf(stderr, "liveprobe: wrote %.1f MiB to %s (the tool used %.2f s of CPU)\n",
                             static_cast<double>(size) / (1 << 20), o->output.c_str(), cpu);
            }
            o->out.reset();
        }
        std::fflush(stdout);  // the summary (stderr) after what it sums up
        print_summary(shm, totals, events, o->count || o->hist ? std::string()
                           : !o->output.empty() ? fmt::format(" ({} events written)", events)
                                           : fmt::format(" ({} events read)", events));
        if (running_on) return wait_forwarding(child, sfd);
        if (child) return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
        return 0;
    };
}

}  // namespace liveprobe::tool
