// liveprobe trace [-p PID] [--count | --hist] [OPTIONS] SPEC... [-- CMD [ARGS]]: the ready
// tracer. Each SPEC is a function or a glob ("do_sys_open", "libz.so.1:*", "*"); the target's
// agent puts a probe on each (src/trace/session.hpp) and its handlers write into shared memory
// (src/trace/rings.hpp) that this command reads:
//   default  one line per call that returned, in the seeds' form, with time and thread;
//   --count  at the end, one line per function called: NAME COUNT, most called first;
//   --hist   at the end, a log2 histogram of each function's durations.
// Then a summary: calls seen, events dropped, calls missed.
#include <CLI/CLI.hpp>
#include <cxxabi.h>

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
#include "trace/spec.hpp"

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
    std::vector<trace::Spec> parsed;  // the same, parsed
};

// What the reader knows of the shared memory.
struct Shm {
    void *base = nullptr;
    size_t bytes = 0;
    uint32_t probes = 0;
    std::vector<std::string> names;  // each probe's function
    std::vector<uint32_t> spec;      // and the spec (Opts::parsed) that named it
};

// A function's name as a user reads it: C++ names demangled ("OBJECT:" kept).
std::string demangled(const std::string &name)
{
    size_t z = name.rfind(":_Z") != std::string::npos ? name.rfind(":_Z") + 1 : name.rfind("_Z", 0) == 0 ? 0 : std::string::npos;
    if (z == std::string::npos) return name;
    int status = 0;
    char *d = abi::__cxa_demangle(name.c_str() + z, nullptr, nullptr, &status);
    if (status != 0 || d == nullptr) return name;
    std::string out = name.substr(0, z) + d;
    std::free(d);
    return out;
}

bool load_names(Shm *shm, const Opts &o)
{
    Header *h = trace::header_of(shm->base);
    if (h->magic != trace::kRingsMagic || h->ready.load(std::memory_order_acquire) != 1) return false;
    shm->probes = h->probes;
    std::string text(static_cast<const char *>(shm->base) + h->names_offset, h->names_bytes);
    std::istringstream in(text);
    // "ADDRESS SPEC NAME", the name to the end of the line (a C++ name has spaces).
    for (std::string line; std::getline(in, line);) {
        size_t a = line.find(' '), b = a == std::string::npos ? a : line.find(' ', a + 1);
        if (b == std::string::npos) return false;
        uint32_t spec = static_cast<uint32_t>(std::strtoul(line.c_str() + a + 1, nullptr, 10));
        if (spec >= o.parsed.size()) return false;
        shm->spec.push_back(spec);
        shm->names.push_back(demangled(line.substr(b + 1)));
    }
    return shm->names.size() == shm->probes;
}

// A JSON string: quoted, with what must be escaped escaped. `raw`: `s` is the text a string
// value printed (escapes \xHH and \" already), re-escaped for JSON.
std::string json_string(const std::string &s, bool raw = false)
{
    std::string out = "\"";
    for (size_t i = 0; i < s.size(); ++i) {
        unsigned char c = static_cast<unsigned char>(s[i]);
        if (raw && c == '\\' && i + 1 < s.size()) {
            char n = s[++i];
            if (n == 'x' && i + 2 < s.size()) {
                out += fmt::format("\\u00{}", s.substr(i + 1, 2));
                i += 2;
            } else {
                out += '\\';
                out += n;
            }
            continue;
        }
        if (c == '"' || c == '\\') out += '\\', out += static_cast<char>(c);
        else if (c < 0x20) out += fmt::format("\\u{:04x}", c);
        else out += static_cast<char>(c);
    }
    return out + "\"";
}

std::string retval_text(uint64_t v)
{
    auto s = static_cast<int64_t>(v);
    if (s >= -4096 && s < (int64_t{1} << 32)) return std::to_string(s);
    return fmt::format("{:#x}", v);
}

struct Event {
    Record r;
    std::string values;  // p:, r:: the payload (trace/spec.hpp)
};

// A fetched event's values as "name=value ..." (text) or a JSON object's members.
std::string values_text(const trace::Spec &spec, const std::string &payload, bool json)
{
    std::string out;
    if (payload.size() < trace::payload_bytes(spec)) return out;
    uint64_t faults;
    std::memcpy(&faults, payload.data(), 8);
    for (size_t i = 0; i < spec.args.size(); ++i) {
        const trace::FetchArg &a = spec.args[i];
        bool fault = faults >> i & 1;
        std::string v = trace::format_value(a, reinterpret_cast<const unsigned char *>(payload.data()) +
                                                   trace::arg_offset(spec, i), fault);
        if (json) {
            bool number = a.type != trace::FetchType::string && a.type >= trace::FetchType::u8 && a.type <= trace::FetchType::s64;
            if (fault) v = "null";
            else if (!number) v = json_string(a.type == trace::FetchType::string ? v.substr(1, v.rfind('"') - 1) : v, a.type == trace::FetchType::string);
            out += fmt::format("{}\"{}\":{}", i ? "," : "", a.name, v);
        } else {
            out += fmt::format(" {}={}", a.name, v);
        }
    }
    return out;
}

// Drains every ring, prints the events (time order within the batch); returns how many.
uint64_t drain(const Shm &shm, Opts &o)
{
    std::vector<Event> batch;
    for (uint32_t i = 0; i < kRings; ++i) {
        trace::RingHead *h = trace::ring_head(shm.base, i);
        uint64_t tail = h->tail.load(std::memory_order_relaxed);
        uint64_t head = h->head.load(std::memory_order_acquire);
        const Record *recs = trace::ring_records(shm.base, i);
        uint64_t k = tail;
        while (k < head) {
            Event e{recs[k % kRingRecords], {}};
            uint32_t slots = 1;
            if (e.r.probe < shm.probes) {
                const trace::Spec &spec = o.parsed[shm.spec[e.r.probe]];
                if (spec.kind != trace::SpecKind::call) {
                    size_t bytes = trace::payload_bytes(spec);
                    slots = trace::record_slots(bytes);
                    e.values.assign(reinterpret_cast<const char *>(e.r.args), std::min(bytes, sizeof e.r.args));
                    for (uint32_t s = 1; s < slots && k + s < head; ++s)
                        e.values.append(reinterpret_cast<const char *>(&recs[(k + s) % kRingRecords]),
                                        std::min(bytes - e.values.size(), sizeof(Record)));
                }
            }
            batch.push_back(std::move(e));
            k += slots;
        }
        h->tail.store(head, std::memory_order_release);
    }
    std::sort(batch.begin(), batch.end(), [](const Event &a, const Event &b) { return a.r.exit_ns < b.r.exit_ns; });
    for (const Event &e : batch) {
        const Record &r = e.r;
        uint64_t took = r.exit_ns - r.entry_ns;
        if (r.probe >= shm.probes) continue;
        const trace::Spec &spec = o.parsed[shm.spec[r.probe]];
        if ((o.tid && static_cast<int>(r.tid) != o.tid) || (took < o.min_duration && spec.kind != trace::SpecKind::probe))
            continue;
        const std::string &name = shm.names[r.probe];
        std::string where = spec.kind == trace::SpecKind::probe ? fmt::format("{}+{:#x}", name, spec.offset) : name;
        if (o.chrome_out) {
            // A complete event ("X") per call, an instant event ("i") per hit, in microseconds, as
            // chrome://tracing and Perfetto read them.
            std::string args = spec.kind == trace::SpecKind::call ? fmt::format("\"retval\":{}", static_cast<int64_t>(r.retval))
                                                                   : values_text(spec, e.values, true);
            if (spec.kind == trace::SpecKind::probe)
                std::fprintf(o.chrome_out, "%s\n{\"name\":%s,\"ph\":\"i\",\"s\":\"t\",\"ts\":%.3f,\"pid\":%d,\"tid\":%u,\"args\":{%s}}",
                             o.chrome_first ? "" : ",", json_string(where).c_str(), static_cast<double>(r.entry_ns) / 1e3,
                             o.traced, r.tid, args.c_str());
            else
                std::fprintf(o.chrome_out, "%s\n{\"name\":%s,\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":%d,\"tid\":%u,"
                                           "\"args\":{%s}}",
                             o.chrome_first ? "" : ",", json_string(name).c_str(), static_cast<double>(r.entry_ns) / 1e3,
                             static_cast<double>(took) / 1e3, o.traced, r.tid, args.c_str());
            o.chrome_first = false;
            continue;
        }
        std::string event = spec.event.empty() ? std::string() : spec.event + " ";
        if (o.json) {
            std::string head = fmt::format("{{\"time_ns\":{},\"tid\":{},\"function\":{}", r.exit_ns, r.tid, json_string(name));
            if (!spec.event.empty()) head += fmt::format(",\"event\":{}", json_string(spec.event));
            if (spec.kind == trace::SpecKind::call)
                std::printf("%s,\"retval\":%" PRId64 ",\"duration_ns\":%" PRIu64 ",\"args\":[%" PRIu64 ",%" PRIu64
                            ",%" PRIu64 ",%" PRIu64 "]}\n",
                            head.c_str(), static_cast<int64_t>(r.retval), took, r.args[0], r.args[1], r.args[2], r.args[3]);
            else if (spec.kind == trace::SpecKind::probe)
                std::printf("%s,\"offset\":%" PRIu64 ",\"values\":{%s}}\n", head.c_str(), spec.offset,
                            values_text(spec, e.values, true).c_str());
            else
                std::printf("%s,\"return\":true,\"duration_ns\":%" PRIu64 ",\"values\":{%s}}\n", head.c_str(), took,
                            values_text(spec, e.values, true).c_str());
            continue;
        }
        std::string stamp = fmt::format("[{:5}.{:06}] {}", r.exit_ns / 1000000000, r.exit_ns / 1000 % 1000000, r.tid);
        if (spec.kind == trace::SpecKind::call)
            std::printf("%s %s returned %s and took %" PRIu64 " ns to execute\n", stamp.c_str(), name.c_str(),
                        retval_text(r.retval).c_str(), took);
        else if (spec.kind == trace::SpecKind::probe)
            std::printf("%s %s%s%s%s\n", stamp.c_str(), event.c_str(), spec.event.empty() ? "" : "(", where.c_str(),
                        (spec.event.empty() ? std::string() : std::string(")")).append(values_text(spec, e.values, false)).c_str());
        else
            std::printf("%s %s%s returned after %" PRIu64 " ns%s\n", stamp.c_str(), event.c_str(), name.c_str(), took,
                        values_text(spec, e.values, false).c_str());
    }
    std::fflush(stdout);
    return static_cast<uint64_t>(batch.size());
}

// A probe as --count and --hist name it: FUNC, or FUNC+0xOFF for an instruction.
std::string probe_name(const Shm &shm, const Opts &o, uint32_t p)
{
    const trace::Spec &spec = o.parsed[shm.spec[p]];
    return spec.offset ? fmt::format("{}+{:#x}", shm.names[p], spec.offset) : shm.names[p];
}

uint64_t count_of(const Shm &shm, uint32_t p)
{
    uint64_t n = 0;
    for (uint32_t r = 0; r < kRings; ++r) n += trace::count_of(shm.base, shm.probes, r, p)->load();
    return n;
}

void print_counts(const Shm &shm, const Opts &o)
{
    std::vector<std::pair<uint64_t, uint32_t>> rows;
    for (uint32_t p = 0; p < shm.probes; ++p)
        if (uint64_t n = count_of(shm, p)) rows.emplace_back(n, p);
    std::sort(rows.begin(), rows.end(), [](auto &a, auto &b) { return a.first != b.first ? a.first > b.first : a.second < b.second; });
    for (auto &[n, p] : rows) std::printf("%-40s %" PRIu64 "\n", probe_name(shm, o, p).c_str(), n);
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

void print_hists(const Shm &shm, const Opts &o)
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
        std::printf("@ns[%s]: %" PRIu64 " calls\n", probe_name(shm, o, p).c_str(), total);
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
    cmd->add_option("specs", o->specs,
                    "What to trace: FUNC (NAME, OBJECT:NAME, a C++ name or a glob such as '*' or 'libz.so.1:*'), "
                    "FUNC+OFF, 'p:LOC FETCHARG...' or 'r:FUNC FETCHARG...' (one argument each)")
        ->required();
    cmd->footer("Specs, as the kernel's kprobe_events (one shell argument each):\n"
                "  FUNC                      each call's return value and duration\n"
                "  FUNC+OFF                  each time a thread reaches the instruction at FUNC+OFF\n"
                "  p[:EVENT] LOC [FETCHARG...]   at LOC (FUNC or FUNC+OFF), the values FETCHARG...\n"
                "  r[N][:EVENT] FUNC [FETCHARG...]  at FUNC's return (N: calls followed at once)\n"
                "FETCHARG: [NAME=]FETCH[:TYPE]; FETCH: %REG (%di, %rax, ...), $argN (1-based), $retval (r:),\n"
                "  $stack, $stackN, $comm, @ADDR, @SYM[+OFF], +|-OFF(FETCH) (memory at FETCH+OFF), \\IMM;\n"
                "  TYPE: u8..u64, s8..s64, x8..x64 (default x64), string.\n"
                "Examples:\n  liveprobe trace -p 1234 do_sys_open\n  liveprobe trace --count '*' -- ./server\n"
                "  liveprobe trace --hist 'libz.so.1:*' -p 1234\n"
                "  liveprobe trace -p 1234 'p:open path=+0($arg1):string flags=$arg2:x32' 'r:open fd=$retval:s32'");
    return [o] {
        const std::vector<std::string> &command = insmod_command();
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
            o->parsed.push_back(std::move(spec));
        }
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
            for (const std::string &l : reply.lines) {
                if (l.rfind("memfd ", 0) == 0) fd = std::atoi(l.c_str() + 6);
                if (l.rfind("placed ", 0) == 0) std::fprintf(stderr, "liveprobe: %s\n", l.c_str());
                if (l.rfind("slow ", 0) == 0) std::fprintf(stderr, "liveprobe: on the breakpoint path: %s\n", l.c_str() + 5);
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
            if (!named) named = load_names(&shm, *o);
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
        if (!named) named = load_names(&shm, *o);
        if (!named) {
            complain(child ? "trace: the program ended before its probes were placed (see its messages above)"
                           : "trace: the shared memory holds no session");
            return child && WIFEXITED(status) ? WEXITSTATUS(status) : kExitFailure;
        }
        if (!o->count && !o->hist) events += drain(shm, *o);
        if (o->count) print_counts(shm, *o);
        if (o->hist) print_hists(shm, *o);
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
