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
#include <ctime>
#include <map>
#include <memory>
#include <optional>
#include <sstream>

#include <fmt/format.h>

#include "agent/channel.hpp"
#include "agent_library.hpp"
#include "commands.hpp"
#include "program_check.hpp"
#include "injector.hpp"
#include "trace_attach.hpp"
#include "trace_serve.hpp"
#include "process.hpp"
#include "progress_line.hpp"
#include "source_specs.hpp"
#include "trace/rings.hpp"
#include "trace/spec.hpp"
#include "trace_codec.hpp"
#include "trace_follow.hpp"
#include "trace_images.hpp"
#include "call_tree.hpp"
#include "trace_options.hpp"
#include "trace_summary.hpp"
#include "trace_output.hpp"
#include "trace/session.hpp"
#include "trace_writer.hpp"

namespace liveprobe::tool {
namespace {


// The images a trace reads (trace_images.hpp) and what is done with them: the first, and the
// ones followed since (-- CMD), read while they live, then folded into the sums and closed.
struct Reader {
    Opts &o;
    std::vector<std::unique_ptr<Image>> images;  // [0]: the first, for the whole trace
    Folded folded;
    uint64_t events = 0;
    size_t followed = 0, untraced = 0;          // followed images (with a session), and without one
    size_t files = 0;                           // -o: trace files written for followed images
    uint64_t file_bytes = 0;

    bool corrupt = false;  // an image's shared memory was found out of bounds
    bool output_failed() const
    {
        for (const auto &im : images)
            if (im->out && im->out->failed()) return true;
        return std::ferror(stdout) != 0;
    }

    // The session's names once it is set up; probes placed later (a library a spec waits for
    // was loaded): their names, before their events (in a trace file, a new header among the
    // records).
    void name(Image &im)
    {
        if (!im.named) {
            if (&im != images[0].get() && images[0]->named && !images[0]->exe.empty() && im.exe != images[0]->exe)
                im.prefix = base_name(im.exe) + ":";  // its functions, told from the first program's
            im.named = load_names(im);
            if (im.named && !im.probes.maps.empty() && &im == images[0].get()) {  // frames named after the process is gone
                o.symbols.set_fallback_maps(im.probes.maps);
                if (o.keyed) o.keyed->symbols().set_fallback_maps(im.probes.maps);
            }
            if (im.named && im.out) {
                im.encoder = TraceEncoder(static_cast<uint32_t>(im.pid));  // the header's process
                std::string header = trace_header(im.pid, im.probes);
                im.out->write(header.data(), header.size());
            }
            return;
        }
        if (trace::header_of(im.shm.base)->names_bytes.load(std::memory_order_acquire) == im.shm.names_bytes) return;
        uint32_t before = im.shm.probes;
        if (!load_names(im)) return;
        std::fprintf(stderr, "liveprobe: placed %u more probes%s (a library was loaded)\n", im.shm.probes - before,
                     &im == images[0].get() ? "" : fmt::format(" in PID {}", im.pid).c_str());
        if (im.out) {
            std::string again;
            TraceEncoder::header(trace_header(im.pid, im.probes), &again);
            im.out->write(again.data(), again.size());
        }
    }

    // Each image named, and its events read (per-event modes): how many. An image whose shared
    // memory the target wrote out of bounds is said once, and read no more.
    uint64_t step()
    {
        uint64_t n = 0;
        for (auto &im : images) {
            name(*im);
            if (im->named && !o.count && !o.hist) n += drain(*im, o.print);
            if (!im->shm.corrupt.empty() && !im->corrupt_told) {
                im->corrupt_told = true;
                corrupt = true;
                complain(fmt::format("trace: the shared memory of process {} is not as liveprobe wrote it ({}): "
                                     "nothing more is read of it",
                                     im->pid, agent::escape_controls(im->shm.corrupt)));
            }
        }
        events += n;
        return n;
    }

    // A report of an image the tree executed: a session to read (its own trace file with -o:
    // FILE.PID), or one that runs untraced. The first of each executable is said.
    void adopt(FollowReport r, Follower &f)
    {
        const bool first = f.first_of(r.exe) && r.exe != images[0]->exe;  // the first program said its own
        std::string placed;
        for (const std::string &l : r.lines) {
            if (l.rfind("placed ", 0) == 0) {
                unsigned long n = 0, opt = 0;
                double ms = 0;
                std::sscanf(l.c_str() + 7, "%lu %lu %lf", &n, &opt, &ms);
                placed = fmt::format("placed {} probes ({} jump-optimized) in {:.1f} ms", n, opt, ms);
            }
            if (!first) continue;
            if (l.rfind("untraced ", 0) == 0)
                std::fprintf(stderr, "liveprobe: PID %d (%s) runs untraced: %s\n", r.pid, r.exe.c_str(), l.c_str() + 9);
            if (l.rfind("slow ", 0) == 0)
                std::fprintf(stderr, "liveprobe: in %s, on the breakpoint path: %s\n", base_name(r.exe).c_str(), l.c_str() + 5);
            if (l.rfind("skipped ", 0) == 0)
                std::fprintf(stderr, "liveprobe: in %s, not traced: %s\n", base_name(r.exe).c_str(), l.c_str() + 8);
        }
        struct stat st {};
        if (r.memfd < 0 || fstat(r.memfd, &st) != 0) {
            ++untraced;
            if (r.memfd >= 0) close(r.memfd);
            close(r.conn);
            return;
        }
        if (first) std::fprintf(stderr, "liveprobe: following PID %d (%s): %s\n", r.pid, r.exe.c_str(), placed.c_str());
        auto im = std::make_unique<Image>();
        im->pid = r.pid;
        im->exe = r.exe;
        im->conn = r.conn;
        std::string why;
        im->shm.base = map_session(r.memfd, &im->shm.bytes, &why);
        close(r.memfd);
        if (!im->shm.base) {
            complain(fmt::format("trace: the shared memory of PID {}: {}", r.pid, why));
            return;
        }
        if (!o.output.empty()) {
            im->out = std::make_unique<TraceWriter>();
            std::string why;
            if (!im->out->open(fmt::format("{}.{}", o.output, r.pid), &why)) {
                complain("trace: " + why);
                im->out.reset();
            }
        }
        ++followed;
        images.push_back(std::move(im));
    }

    // An image read to its end: its events left, its sums folded, its trace file closed.
    void finish(Image &im)
    {
        name(im);
        if (im.out && !im.named) {  // untraced (no function matched there): a trace of no probe
            std::string header = trace_header(im.pid, TraceProbes{});
            im.out->write(header.data(), header.size());
        }
        if (im.named && !o.count && !o.hist)
            for (uint64_t n; (n = drain(im, o.print)) > 0;) events += n;
        folded.add(im);
        if (im.out && &im != images[0].get()) {
            size_t size = 0;
            std::string why;
            if (!im.out->close(&size, &why)) complain(fmt::format("trace: {}.{}: {}", o.output, im.pid, why));
            ++files;
            file_bytes += size;
            im.out.reset();
        }
    }

    // The followed images whose processes are all gone (their connection closed): finished.
    void reap()
    {
        for (size_t i = 1; i < images.size();) {
            struct pollfd p = {images[i]->conn, POLLIN, 0};
            if (poll(&p, 1, 0) == 0) {
                ++i;
                continue;
            }
            finish(*images[i]);
            images.erase(images.begin() + static_cast<ptrdiff_t>(i));
        }
    }

    // --interval: the time, then what was counted since the last interval (--count, --hist:
    // the targets' counters now, less what they held then; --by, --hist-of: the tool's own,
    // started again).
    std::map<std::string, std::pair<uint64_t, std::array<uint64_t, trace::kHistBuckets>>> counted_before{};
    // (`finished`: every image is folded already, at the end.)
    void print_interval(bool finished = false)
    {
        const std::time_t t = std::time(nullptr);
        char when[16];
        std::strftime(when, sizeof when, "%H:%M:%S", std::localtime(&t));
        std::printf("%s\n", when);
        if (o.keyed) {
            o.keyed->print();
            o.keyed->clear();
            return;
        }
        Folded now = folded;
        if (!finished)
            for (const auto &im : images) now.add(*im);
        const TraceProbes names = now.probes();
        TraceTotals delta = now.totals();
        for (uint32_t p = 0; p < names.names.size(); ++p) {
            auto &[count, hist] = counted_before[names.spec_of(p).text + '\n' + names.name_of(p)];
            const uint64_t c = delta.count[p];
            delta.count[p] -= std::min(count, c);
            count = c;
            for (uint32_t b = 0; b < trace::kHistBuckets; ++b) {
                const uint64_t h = delta.hist[p][b];
                delta.hist[p][b] -= std::min(hist[b], h);
                hist[b] = h;
            }
            delta.left[p] = 0;
        }
        if (o.count) print_counts(delta, names);
        if (o.hist) print_hists(delta, names);
        std::fflush(stdout);
    }
};

// -- CMD, stderr a terminal: while the program's agent places the probes, before its main, how
// long it has taken (placing 33,846 probes took 12 s of silence). The session's header says
// how many once their names are published, before they are registered (the long part); its
// `ready` says when they are, or that they never will be (2: the program runs untraced).
void say_placing(ProgressLine &line, const Image &im, double seconds)
{
    const trace::Header *h = trace::header_of(im.shm.base);
    const uint32_t ready = h->ready.load(std::memory_order_acquire);
    if (im.named || ready != 0) {
        line.clear();
        return;
    }
    if (h->magic != trace::kRingsMagic) return;  // the agent has not started the session yet
    const uint32_t n = h->probes.load(std::memory_order_acquire);
    line.show(n ? fmt::format("liveprobe: placing {} probes in PID {}: {:.1f} s", n, im.pid, seconds)
                : fmt::format("liveprobe: finding the functions to probe in PID {}: {:.1f} s", im.pid, seconds));
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
    auto *filter = cmd->add_option("--filter", o->filter,
                    "Only the calls (or hits) for which EXPR is true, decided in the target: e.g. 'arg0 > 100 && "
                    "retval < 0', 'duration > 1ms', 'comm == \"worker\"', 'len >= 4096' (a parameter by name); "
                    "the language: docs/views.md")
        ->type_name("EXPR");
    cmd->add_option("--by", o->by,
                    "With --count or --hist: per function and KEY, where KEY is tid, comm, caller, or an expression "
                    "as --filter takes them (arg0, a parameter's name, retval, ...)")
        ->type_name("KEY");
    cmd->add_option("--max-keys", o->max_keys,
                    "With --by: at most N keys kept, the calls of further keys counted under the key (other) "
                    "(default: 10000 with --serve, else no limit)")
        ->type_name("N");
    cmd->add_option("--hist-of", o->hist_of,
                    "A log2 histogram of EXPR's values per function (per KEY with --by), beside --hist's durations")
        ->type_name("EXPR");
    cmd->add_flag("--stacks", o->stacks,
                   "Each event with the user stack at the probe (a return probe's: the function, then its callers), "
                   "read by the call frame information, by frame pointers where there is none; with --count or "
                   "--hist, per stack (--by stack)");
    cmd->add_option("--stack-depth", o->stack_depth, "The most frames of a stack (default 32)")
        ->check(CLI::Range(1u, trace::kMaxStackDepth));
    cmd->add_flag("--folded", o->folded,
                  "At the end, each stack and its calls folded (main;parse;lex 12), as flamegraph.pl and speedscope read "
                  "them (implies --stacks)");
    cmd->add_option("--interval", o->interval,
                    "With --count, --hist, --hist-of: print what was counted every SECONDS, and start again")
        ->type_name("SECONDS")
        ->check(CLI::PositiveNumber);
    cmd->add_option("--serve", o->serve,
                    "Serve the --count or --hist aggregates (--hist by default) as Prometheus metrics at ADDRESS: "
                    "HOST:PORT, :PORT (loopback; the functions' names are then seen by every local user) or "
                    "unix:PATH (its owner's alone), until stopped; with -p PID or --follow-name (metrics.md, in the "
                    "sources' docs/ and the installed share/doc/liveprobe/)")
        ->type_name("ADDRESS");
    cmd->add_option("--follow-name", o->follow_name,
                    "With --serve: every process named COMM (/proc/PID/comm), attached as each one starts (a "
                    "restarted server again)")
        ->type_name("COMM");
    cmd->fallthrough();  // --config FILE, the tool's (main.cpp), after the command as before it
    cmd->add_flag("--tree", o->tree,
                  "Draw the calls as a tree as they happen, thread by thread (as liveprobe replay shows a trace "
                  "file): an event at each entry too");
    cmd->add_flag("--raw", o->raw,
                  "Each call's return value as the bare rax, not typed by DWARF: the cheapest events (no type looked "
                  "up while placing, no memory read at a return); as FUNC $retval:raw");
    auto *out = cmd->add_option("-o,--output", o->output,
                                "Write the events to FILE, as the target wrote them (fast: nothing is formatted); "
                                "show them later with -i FILE");
    cmd->add_option("-i,--input", o->input, "Show the events of a trace file written with -o (with --json, --chrome, "
                                            "--count, --hist, --folded, --tid, --min-duration)")
        ->excludes(out);
    cmd->add_flag("--no-follow", o->no_follow,
                  "Do not trace the children the process forks, nor the programs they execute (-- CMD: both are "
                  "traced by default, each program with the same specs from before its main)");
    cmd->add_flag("--verbose", o->verbose,
                  "Name each probe left on the breakpoint path (microseconds a hit), with its reason; with "
                  "--count or --hist, also which of them were called, and how often");
    cmd->add_option("--chrome", o->chrome, "Write the calls to FILE as Chrome trace events (chrome://tracing, Perfetto)");
    cmd->add_option("--maxactive", o->maxactive,
                    "Calls of one function followed at once, per function (default 16384: recursion that deep; "
                    "deeper calls are counted as missed; memory is taken only as calls nest)")
        ->check(CLI::Range(1, 100000));
    cmd->add_option("--duration", o->duration, "Stop tracing after this many seconds (a program started with -- runs on)");
    cmd->add_option("--tid", o->print.tid, "Only the calls of this thread");
    cmd->add_option("--min-duration", o->print.min_duration, "Only the calls that took at least this long (ns, or 10us, 2ms, 1s)")
        ->transform(duration_units());
    cmd->add_option("specs", o->specs,
                    "What to trace: FUNC (NAME, OBJECT:NAME, a C++ name or a glob such as '*' or 'libz.so.1:*'), "
                    "FUNC+OFF, SRCFILE:LINE, FUNC:RELLINE, 'p:LOC FETCHARG...' or 'r:FUNC FETCHARG...' (one argument "
                    "each)");
    cmd->footer("Specs, as the kernel's kprobe_events (one shell argument each):\n"
                "  FUNC [$retval[:TYPE]]     each call's return value (typed by DWARF) and duration\n"
                "  FUNC+OFF                  each time a thread reaches the instruction at FUNC+OFF\n"
                "  SRCFILE:LINE, FUNC:RELLINE  each time a thread reaches the source line (as perf probe)\n"
                "  p:LOC [FETCHARG...]       at LOC (FUNC, FUNC+OFF or a line), the values FETCHARG...\n"
                "  r[N]:FUNC [FETCHARG...]   at FUNC's return (N: calls followed at once)\n"
                "  p:GRP/EVENT LOC ...       the same, the event named GRP/EVENT\n"
                "FETCHARG: [NAME=]FETCH[:TYPE]; FETCH: a parameter's or, at a line, a variable's name (from\n"
                "  DWARF, typed as declared), %REG (%di, %rax, ...), %xmmN, $argN (1-based), $retval (r:),\n"
                "  $stack, $stackN, $comm, @ADDR, @SYM[+OFF], +|-OFF(FETCH) (memory at FETCH+OFF), \\IMM;\n"
                "  TYPE: u8..u64, s8..s64, x8..x64 (default x64), f32, f64, string.\n"
                "  `liveprobe list -x FILE --params` and `--lines FUNC` show what a program has.\n"
                "How a trace ends:\n"
                "  -p PID: Ctrl-C, SIGTERM, SIGHUP, --duration or the process's end. The probes are removed\n"
                "    and the process runs on; if the tool dies (SIGKILL, OOM) its agent removes them itself.\n"
                "  -- CMD: with the program (the programs it and its children execute are traced too, until\n"
                "    it ends). It stays in the terminal's foreground, so Ctrl-C reaches it as\n"
                "    without liveprobe; signals sent to the tool are passed on to it. --duration stops the\n"
                "    tracing and lets it run on untraced (the tool waits for it); if the tool is killed,\n"
                "    the program runs on with its probes removed.\n"
                "  detach: `liveprobe detach -p PID` removes everything placed through the agent.\n"
                "Examples:\n  liveprobe trace -p 1234 do_sys_open\n  liveprobe trace --count '*' -- ./server\n"
                "  liveprobe trace --hist 'libz.so.1:*' -p 1234\n"
                "  liveprobe trace -p 1234 'p:open path=+0($arg1):string flags=$arg2:x32' 'r:open fd=$retval:s32'\n"
                "  liveprobe trace 'p:parse_config path depth' -- ./server   (parameters by name: built with -g)\n"
                "  liveprobe trace 'p:parse.c:120 depth node' -- ./server     (a source line, its variables)\n"
                "  liveprobe trace -o calls.lptrace '*' -- ./server; liveprobe trace -i calls.lptrace --json\n"
                "  liveprobe trace --follow-name nginx --serve 127.0.0.1:9464 'ngx_http_*'   (Prometheus metrics)\n"
                "  liveprobe trace --config /etc/liveprobe/metrics/nginx.toml   (the options from a file, [trace])");
    return [o, filter] {
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
            if (filter->count() || !o->by.empty() || !o->hist_of.empty() || o->tree || o->stacks || o->interval > 0) {
                complain("trace: -i FILE shows what the file holds: --filter, --by, --hist-of, --tree, --stacks and "
                         "--interval are decided while tracing (replay, report and graph read a file with filters)");
                return kExitUsage;
            }
            return show_file(*o);
        }
        if (o->specs.empty()) {
            complain("trace: what to trace is missing (a function, a glob, p:..., r:...; see --help)");
            return kExitUsage;
        }
        if (!check_serve(*o, command)) return kExitUsage;
        if ((o->pid != 0) == !command.empty() && o->follow_name.empty()) {
            complain("trace: give either -p PID or a program to start after --");
            return kExitUsage;
        }
        if (o->tree) {
            if (o->count || o->hist || o->print.json || o->print.chrome || !o->output.empty() || o->print.min_duration) {
                complain("trace: --tree draws calls as they begin: not with --count, --hist, --json, --chrome, -o or "
                         "--min-duration (trace -o FILE, then liveprobe replay FILE, takes filters)");
                return kExitUsage;
            }
            o->print.sink = &o->tree_printer;
        }
        if (!resolve_source_specs(o->specs, o->pid, command)) return kExitUsage;
        if (o->raw) raw_calls(o->specs);
        // Every spec parsed here first: a mistake is shown before anything is attached or run.
        for (const std::string &text : o->specs) {
            trace::Spec spec;
            std::string error;
            size_t at = 0;
            if (text == "[" || text == "]") {  // CLI11 reads an array on one line only
                complain("trace: a spec '" + text + "': an array of --config's across lines? Write it on one line "
                         "(specs = [\"f\", \"g\"]), or specs = \"f\" a line each");
                return kExitUsage;
            }
            if (!trace::parse_spec(text, &spec, &error, &at)) {
                complain("trace: " + trace::point_at(text, at, error));
                return kExitUsage;
            }
            if (std::string c = trace::mode_conflict(spec, o->count, o->hist); !c.empty()) {
                complain("trace: " + c + (o->serve.empty() ? "" : " (--serve keeps --hist, or --count)"));
                return kExitUsage;
            }
        }
        if (filter->count() && !add_filter(*o)) return kExitUsage;
        if (!add_stacks(*o)) return kExitUsage;
        if ((!o->by.empty() || !o->hist_of.empty() || o->folded) && !add_keys(*o)) return kExitUsage;
        if (o->keyed) o->keyed->set_limit(o->max_keys ? o->max_keys : !o->serve.empty() ? 10000 : 0);
        // (--by, --hist-of, --folded: per event; add_keys cleared count and hist)
        const char *mode = o->count ? "count" : o->hist ? "hist" : o->tree ? "tree" : "events";
        if (o->interval > 0 && !o->count && !o->hist && !o->keyed) {
            complain("trace: --interval prints aggregates: with --count, --hist or --hist-of");
            return kExitUsage;
        }
        if (!o->serve.empty()) return serve_metrics(*o, mode);
        // Taken by the loop below through a signalfd: blocked first, in every thread (the
        // trace file's writer thread, started next, inherits the mask; with SIGINT open there,
        // Ctrl-C killed the tool before its summary).
        // A reader that goes away (| head) ends the trace, cleanly. Not in the program started
        // (-- CMD): its disposition is the one the tool was given (an ignored SIGPIPE is kept
        // across exec, and the programs it ran then failed with EPIPE where they would have
        // ended quietly: `cat: write error: Broken pipe`, xzgrep's test failing).
        struct sigaction ignore_pipe {}, program_pipe {};
        ignore_pipe.sa_handler = SIG_IGN;
        sigaction(SIGPIPE, &ignore_pipe, &program_pipe);
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
        }
        auto first = std::make_unique<Image>();
        if (!o->output.empty()) {
            first->out = std::make_unique<TraceWriter>();
            std::string why;
            if (!first->out->open(o->output, &why)) {
                complain("trace: " + why);
                return kExitFailure;
            }
        }
        Shm &shm = first->shm;
        Follower follower;  // -- CMD: the programs the tree executes (unless --no-follow)
        std::string auxv;   // -p: the process's, to tell that it executed a program
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
            first->pid = o->pid;
            auxv = process_auxv(o->pid);
            if (!start_session(*o, mode, o->pid, *first, &owner_conn, &stop_args)) return kExitFailure;
        } else {
            // A program to start: our memfd, inherited; the probes are placed before its main.
            std::string library = agent_library(&why);
            if (library.empty()) {
                complain(why);
                return kExitFailure;
            }
            std::string start = start_library(library, "trace");
            if (start.empty()) return kExitFailure;
            if (check_loadable(command[0], &why) < 0) {
                complain("trace: " + why);
                return kExitFailure;
            }
            // Its size sealed before the program gets it: a program that shrank it would kill the
            // tool with SIGBUS.
            int mfd = static_cast<int>(syscall(SYS_memfd_create, "liveprobe-trace", 2u /* MFD_ALLOW_SEALING */));
            if (mfd < 0 || ftruncate(mfd, static_cast<off_t>(trace::kToolMemfdBytes)) != 0 ||
                fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
                complain(fmt::format("trace: cannot make the shared memory: {}", std::strerror(errno)));
                return kExitFailure;
            }
            shm.bytes = trace::kToolMemfdBytes;
            shm.base = mmap(nullptr, shm.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
            std::string spec = std::string(mode) + " " + std::to_string(o->maxactive);
            for (const std::string &s : o->specs) spec += " " + agent::encode_arg(s);
            if (!o->no_follow && !follower.listen(&why)) {
                complain(fmt::format("trace: following exec: {} (--no-follow does without)", why));
                return kExitFailure;
            }
            int owner[2] = {-1, -1};
            if (pipe2(owner, O_CLOEXEC) != 0) {
                complain(fmt::format("trace: pipe: {}", std::strerror(errno)));
                return kExitFailure;
            }
            // In the terminal's foreground process group, as without liveprobe: the terminal's
            // Ctrl-C and SIGHUP reach the program itself; the tool passes on what is sent to it.
            child = fork();
            if (child == 0) {
                sigaction(SIGPIPE, &program_pipe, nullptr);
                sigprocmask(SIG_UNBLOCK, &set, nullptr);
                fcntl(owner[0], F_SETFD, 0);  // the program's agent takes it (agent.cpp)
                setenv("LIVEPROBE_TRACE_OWNER_FD", std::to_string(owner[0]).c_str(), 1);
                setenv("LIVEPROBE_TRACE", spec.c_str(), 1);
                setenv("LIVEPROBE_TRACE_FD", std::to_string(mfd).c_str(), 1);
                if (o->no_follow) setenv("LIVEPROBE_TRACE_NOFOLLOW", "1", 1);
                else setenv("LIVEPROBE_TRACE_FOLLOW", follower.path().c_str(), 1);
                if (o->verbose) setenv("LIVEPROBE_TRACE_VERBOSE", "1", 1);
                exec_with_agent(command, library, start);
            }
            close(mfd);
            close(owner[0]);
            if (!o->no_follow) Follower::widen_fd_limit();
            owner_conn = owner[1];
            first->pid = child;
            std::fprintf(stderr, "liveprobe: started PID %d\n", child);
        }
        if (shm.base == MAP_FAILED || shm.base == nullptr) {
            complain(fmt::format("trace: cannot map the shared memory: {}", std::strerror(errno)));
            return kExitFailure;
        }
        Reader rd{*o, {}, {}};
        rd.images.push_back(std::move(first));
        // The reading loop, until the end (Ctrl-C, --duration, the process gone): the rings are
        // drained again at once while they have events, every 20 ms when they are quiet; the end
        // is looked for every 20 ms. The per-event modes read the rings again at once after a
        // large batch, else after a millisecond. Not 20 ms: a program that was quiet for a while
        // (jq reading its next test) can fill 8 MiB of ring (262,144 records) in under 20 ms once
        // it runs again (jq's traced calls: 13 million a second), and a reader asleep for 20 ms
        // dropped a fifth of jq's events while using a tenth of a core. Not at once after every
        // batch either: a reader that spins takes the rings' cache lines from the writers all
        // the time (jq ran 30% longer so).
        auto t0 = std::chrono::steady_clock::now();
        auto checked = t0, shown = t0;
        uint64_t last = 0;
        int status = 0;
        bool ended = false, child_done = false, executed = false;
        const int idle_ms = o->count || o->hist ? 20 : 1;
        std::vector<struct pollfd> fds;
        ProgressLine placing;  // -- CMD: until the program's probes are placed
        while (!ended) {
            fds.assign(1, {sfd, POLLIN, 0});
            follower.add_pollfds(&fds);
            poll(fds.data(), fds.size(), last >= kPrintBatch ? 0 : idle_ms);  // a batch as large as drain takes: at once
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
                if (owner_conn >= 0 && !child) {  // the agent ends it when the session was stopped for us
                    struct pollfd c = {owner_conn, POLLIN, 0};
                    if (poll(&c, 1, 0) > 0 && !ended) {
                        // Or the process executed a program: the agent, its probes and the
                        // connection went with the old one (no agent can be carried over
                        // into an image the tool did not start).
                        std::string ignored;
                        auto now = process_info(o->pid, &ignored);
                        // (A process killed meanwhile has no auxv left to read: not a new program.)
                        const std::string auxv_now = now ? process_auxv(o->pid) : std::string();
                        if (now && now->state != 'Z' && !auxv.empty() && !auxv_now.empty() && auxv_now != auxv) {
                            std::fprintf(stderr,
                                         "liveprobe: process %d executed a program (%s): its probes went with the old "
                                         "one, and a -p trace does not follow exec (trace it again with -p, or start "
                                         "it with liveprobe trace -- CMD, which follows exec)\n",
                                         o->pid, now->exe.c_str());
                            executed = true;
                        } else if (now && now->state != 'Z') {
                            std::fprintf(stderr,
                                         "liveprobe: the session was ended in process %d (liveprobe detach, or the "
                                         "program closed liveprobe's descriptors)\n",
                                         o->pid);
                            // The agent copies the session's misses as it stops it: a moment.
                            const trace::Header *h = trace::header_of(rd.images[0]->shm.base);
                            for (int i = 0; i < 100 && rd.images[0]->shm.base && !h->final.load(); ++i) usleep(10000);
                        }
                        ended = true;
                    }
                }
                rd.reap();
            }
            if (child && placing.enabled()) say_placing(placing, *rd.images[0], std::chrono::duration<double>(now - t0).count());
            for (FollowReport &r : follower.take_reports()) rd.adopt(std::move(r), follower);
            last = rd.step();
            if (rd.output_failed()) ended = true;
            if (o->interval > 0 && std::chrono::duration<double>(now - shown).count() >= o->interval) {
                shown = now;
                rd.print_interval();
            }
        }
        placing.clear();
        // The images that reported by now (a program that ran and ended just before the one
        // started): read too. The others, connected or not, run on untraced.
        for (FollowReport &r : follower.take_reports()) rd.adopt(std::move(r), follower);
        follower.close_socket();
        bool running_on = false;  // -- CMD: the program outlives the trace (--duration, output gone)
        if (o->pid && !child && !executed) {
            agent::Reply reply;
            agent::request(o->pid, "trace-stop", stop_args, &reply, &why);  // publishes the misses
            if (owner_conn >= 0) close(owner_conn);
        } else if (child && !child_done) {
            // The program runs on, untraced: its session stopped (its misses published), and
            // the pipe closed for the children it forked, whose agents stop theirs (and the
            // connections of the followed images, below).
            agent::Reply reply;
            agent::request(child, "trace-stop", {}, &reply, &why);
            close(owner_conn);
            running_on = true;
            std::fprintf(stderr, "liveprobe: tracing stopped (%s); PID %d runs on untraced\n",
                         rd.output_failed() ? "the output failed" : "--duration", child);
        }
        Image &top = *rd.images[0];
        rd.name(top);
        if (!top.named && rd.followed == 0) {
            complain(child ? "trace: nothing was traced: the program ran untraced, or ended before its probes were placed "
                             "(see its messages above)"
                           : "trace: the shared memory holds no session");
            if (top.out) {  // nothing written into it: no empty file left to be taken for a trace
                top.out.reset();
                std::remove(o->output.c_str());
            }
            return child && WIFEXITED(status) ? WEXITSTATUS(status) : kExitFailure;
        }
        for (auto &im : rd.images) rd.finish(*im);
        const TraceProbes names = rd.folded.probes();
        if (o->interval > 0) {
            rd.print_interval(true);  // what was counted since the last interval
        } else {
            if (o->keyed) o->keyed->print();
            if (o->count) print_counts(rd.folded.totals(), names);
            if (o->hist) print_hists(rd.folded.totals(), names);
        }
        if (o->print.chrome) {
            chrome_end(o->print.chrome);
            std::fclose(o->print.chrome);
            std::fprintf(stderr, "liveprobe: wrote %s\n", o->chrome.c_str());
        }
        if (top.out) {
            size_t size = 0;
            std::string why;
            if (!top.out->close(&size, &why)) complain(fmt::format("trace: {}: {}", o->output, why));
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
            top.out.reset();
            if (rd.files)
                std::fprintf(stderr, "liveprobe: wrote %.1f MiB to %zu more files %s.PID, one for each program executed\n",
                             static_cast<double>(rd.file_bytes) / (1 << 20), rd.files, o->output.c_str());
        }
        rd.images.clear();  // the followed images' connections closed: their sessions stop
        std::fflush(stdout);  // the summary (stderr) after what it sums up
        if (o->verbose && (o->count || o->hist)) print_breakpoint_calls(rd.folded, names);
        if (o->verbose) print_missed_by_function(rd.folded, names);
        if (rd.followed || rd.untraced)
            std::fprintf(stderr, "liveprobe: followed exec: %zu run%s of %zu program%s traced%s\n",
                         rd.followed + (top.named ? 1 : 0), rd.followed + (top.named ? 1 : 0) == 1 ? "" : "s",
                         rd.folded.exes.size(), rd.folded.exes.size() == 1 ? "" : "s",
                         rd.untraced ? fmt::format(", {} ran untraced", rd.untraced).c_str() : "");
        if (o->keyed && rd.folded.dropped)  // the aggregates are the tool's: they miss what was dropped
            std::fprintf(stderr,
                         "liveprobe: the rings were full for %" PRIu64 " calls, which the aggregates above do not count "
                         "(--by and --hist-of count the events read: trace fewer functions, or --filter in the target)\n",
                         rd.folded.dropped);
        print_summary(rd.folded, rd.events, o->count || o->hist ? std::string()
                                            : !o->output.empty() ? fmt::format(" ({} events written)", rd.events)
                                                                 : fmt::format(" ({} events read)", rd.events));
        if (running_on) return wait_forwarding(child, sfd);
        if (child) return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
        return rd.corrupt ? kExitFailure : 0;
    };
}

}  // namespace liveprobe::tool
