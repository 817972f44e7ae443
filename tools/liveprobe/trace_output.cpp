#include "trace_output.hpp"

#include <stdio_ext.h>

#include <sys/stat.h>

#include "pipe_lines.hpp"
#include "progress_line.hpp"
#include "trace_codec.hpp"
#include "trace/session.hpp"

#include "symbols/names.hpp"
#include "trace/value_type.hpp"

#include <algorithm>
#include <cinttypes>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

namespace liveprobe::tool {
namespace {

using trace::Record;

std::string retval_text(uint64_t v)
{
    auto s = static_cast<int64_t>(v);
    if (s >= -4096 && s < (int64_t{1} << 32)) return std::to_string(s);
    return fmt::format("{:#x}", v);
}

// The first line of /proc/PATH (a name: comm), "" when it cannot be read (gone, or a file).
std::string proc_name(const std::string &path)
{
    std::string name;
    if (FILE *f = std::fopen(("/proc/" + path).c_str(), "re")) {
        char buf[64];
        if (std::fgets(buf, sizeof buf, f)) name = buf;
        std::fclose(f);
    }
    while (!name.empty() && name.back() == '\n') name.pop_back();
    return name;
}

// Chrome's metadata events ("M"), which chrome://tracing and Perfetto show as the processes' and
// threads' names: a process's before its first event (a forked child is a process of its own),
// a thread's before its first, named as the process names them now (comm), or by number when
// it is gone or the events are a trace file's (-i: a number in /proc now may be another's).
void chrome_names(int pid, uint32_t tid, PrintOptions &o)
{
    if (!o.chrome_named.insert(tid).second) return;
    if (o.chrome_processes.insert(pid).second) {
        std::string name = o.live && pid > 0 ? proc_name(fmt::format("{}/comm", pid)) : std::string();
        if (name.empty()) name = fmt::format("process {}", pid);
        std::fprintf(o.chrome, "%s\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":%s}}",
                     o.chrome_first ? "" : ",", pid, trace::json_string(name).c_str());
        o.chrome_first = false;
    }
    std::string name = o.live && pid > 0 ? proc_name(fmt::format("{}/task/{}/comm", pid, tid)) : std::string();
    if (name.empty()) name = fmt::format("thread {}", tid);
    std::fprintf(o.chrome, "%s\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%u,\"args\":{\"name\":%s}}",
                 o.chrome_first ? "" : ",", pid, tid, trace::json_string(name).c_str());
    o.chrome_first = false;
}

// --stacks: each frame of e's stack named, as text lines (indented) or a JSON member.
std::string stack_text(const TraceEvent &e, const TraceProbes &probes, const PrintOptions &o, int pid, bool json)
{
    const std::vector<uint64_t> frames = event_stack(e, probes);
    if (probes.stack_depth == 0) return "";
    std::string out = json ? ",\"stack\":[" : "";
    for (size_t i = 0; i < frames.size(); ++i) {
        const std::string name = o.frame_name ? o.frame_name(pid, frames[i], i > 0) : fmt::format("{:#x}", frames[i]);
        out += json ? (i ? "," : "") + trace::json_string(name) : "        " + name + "\n";
    }
    return json ? out + "]" : out;
}

void print_one(const TraceEvent &e, const TraceProbes &probes, PrintOptions &o)
{
    const Record &r = e.r;
    const trace::Spec &spec = probes.spec_of(r.probe);
    uint64_t took = r.exit_ns - r.entry_ns;
    const std::string &name = probes.names[r.probe];
    std::string where = fmt::format("{}+{:#x}", name, spec.offset);  // a hit's place, +0x0 included
    const int pid = e.pid ? e.pid : o.pid;
    if (o.chrome) {
        chrome_names(pid, r.tid, o);
        // A complete event ("X") per call, an instant event ("i") per hit, in microseconds, as
        // chrome://tracing and Perfetto read them.
        std::string args = spec.kind == trace::SpecKind::call ? call_value(spec, e, true) : values_text(spec, e.values, true);
        if (spec.kind == trace::SpecKind::probe)
            std::fprintf(o.chrome, "%s\n{\"name\":%s,\"ph\":\"i\",\"s\":\"t\",\"ts\":%.3f,\"pid\":%d,\"tid\":%u,\"args\":{%s}}",
                         o.chrome_first ? "" : ",", trace::json_string(where).c_str(), static_cast<double>(r.entry_ns) / 1e3, pid,
                         r.tid, args.c_str());
        else
            std::fprintf(o.chrome, "%s\n{\"name\":%s,\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":%d,\"tid\":%u,\"args\":{%s}}",
                         o.chrome_first ? "" : ",", trace::json_string(name).c_str(), static_cast<double>(r.entry_ns) / 1e3,
                         static_cast<double>(took) / 1e3, pid, r.tid, args.c_str());
        o.chrome_first = false;
        return;
    }
    if (o.json) {
        std::string head = fmt::format("{{\"time_ns\":{},\"pid\":{},\"tid\":{},\"function\":{}", r.exit_ns, pid, r.tid,
                                       trace::json_string(name));
        if (!spec.event.empty()) head += fmt::format(",\"event\":{}", trace::json_string(spec.event));
        head += stack_text(e, probes, o, pid, true);
        if (spec.kind == trace::SpecKind::call) {
            const std::string v = call_value(spec, e, true);
            std::printf("%s%s%s,\"duration_ns\":%" PRIu64 "}\n", head.c_str(), v.empty() ? "" : ",", v.c_str(), took);
        }
        else if (spec.kind == trace::SpecKind::probe)
            std::printf("%s,\"offset\":%" PRIu64 ",\"values\":{%s}}\n", head.c_str(), spec.offset,
                        values_text(spec, e.values, true).c_str());
        else
            std::printf("%s,\"return\":true,\"duration_ns\":%" PRIu64 ",\"values\":{%s}}\n", head.c_str(), took,
                        values_text(spec, e.values, true).c_str());
        return;
    }
    std::string stamp = fmt::format("[{:5}.{:06}] {}", r.exit_ns / 1000000000, r.exit_ns / 1000 % 1000000, r.tid);
    std::string event = spec.event.empty() ? std::string() : spec.event + " ";
    if (spec.kind == trace::SpecKind::call) {
        const std::string v = call_value(spec, e, false);
        std::printf("%s %s returned %s%sand took %" PRIu64 " ns to execute\n", stamp.c_str(), name.c_str(), v.c_str(),
                    v.empty() ? "" : " ", took);
    }
    else if (spec.kind == trace::SpecKind::probe)
        std::printf("%s %s%s%s\n", stamp.c_str(), event.c_str(), spec.event.empty() ? where.c_str() : ("(" + where + ")").c_str(),
                    values_text(spec, e.values, false).c_str());
    else
        std::printf("%s %s%s returned after %" PRIu64 " ns%s\n", stamp.c_str(), event.c_str(), name.c_str(), took,
                    values_text(spec, e.values, false).c_str());
    if (probes.stack_depth) std::printf("%s", stack_text(e, probes, o, pid, false).c_str());
}

// Format 3: events may say their process (a forked child's, trace_codec.hpp). Format 2, the
// same without that, is read as well.
// Format 4: the header ends with what events carry after their values (--by, --hist-of,
// --stacks: TraceProbes::extra_bytes, stack_depth) and the process's mappings (stacks).
constexpr char kMagic[8] = {'L', 'P', 'T', 'R', 'A', 'C', 'E', '4'};
constexpr char kMagicV3[8] = {'L', 'P', 'T', 'R', 'A', 'C', 'E', '3'};
constexpr char kMagicV2[8] = {'L', 'P', 'T', 'R', 'A', 'C', 'E', '2'};
constexpr char kMagicV1[8] = {'L', 'P', 'T', 'R', 'A', 'C', 'E', '1'};  // 32-byte records

bool get_u32(FILE *f, uint32_t *v) { return std::fread(v, 4, 1, f) == 1; }
bool get_text(FILE *f, std::string *s)
{
    uint32_t n = 0;
    if (!get_u32(f, &n) || n > (1u << 24)) return false;
    s->clear();
    return read_exactly(f, n, s);
}

// A trace file's header, into *probes (empty before): false when it is not one.
bool read_header(FILE *f, TraceProbes *probes, uint32_t *pid)
{
    char magic[sizeof kMagic];
    uint32_t nspecs = 0, nprobes = 0;
    bool ok = std::fread(magic, 1, sizeof magic, f) == sizeof magic &&
              (std::memcmp(magic, kMagic, sizeof magic) == 0 || std::memcmp(magic, kMagicV3, sizeof magic) == 0 ||
               std::memcmp(magic, kMagicV2, sizeof magic) == 0) &&
              get_u32(f, pid) && get_u32(f, &nspecs) && nspecs < (1u << 20);
    for (uint32_t i = 0; ok && i < nspecs; ++i) {
        std::string text, error;
        size_t at = 0;
        trace::Spec s;
        ok = get_text(f, &text) && trace::parse_spec(text, &s, &error, &at);
        probes->specs.push_back(std::move(s));
    }
    ok = ok && get_u32(f, &nprobes) && nprobes < (1u << 26);
    for (uint32_t p = 0; ok && p < nprobes; ++p) {
        uint32_t spec = 0;
        std::string name;
        ok = get_u32(f, &spec) && spec < nspecs && get_text(f, &name);
        probes->spec.push_back(spec);
        probes->names.push_back(std::move(name));
    }
    if (ok && std::memcmp(magic, kMagic, sizeof magic) == 0)
        ok = get_u32(f, &probes->extra_bytes) && probes->extra_bytes <= trace::kMaxExtraBytes &&
             get_u32(f, &probes->stack_depth) && probes->stack_depth <= trace::kMaxStackDepth &&
             (probes->stack_depth == 0 || probes->extra_bytes >= 8 + 8 * probes->stack_depth) && get_text(f, &probes->maps);
    return ok;
}

}  // namespace

// A call's (FUNC's) return value as text ("" for void), or as a JSON object's member ("" for
// void): typed by DWARF or by the spec's $retval:TYPE; without either the raw rax, said so.
std::string call_value(const trace::Spec &spec, const TraceEvent &e, bool json)
{
    if (spec.args.empty() || spec.args[0].type == trace::FetchType::raw)  // no DWARF, or --raw
        return json ? fmt::format("\"raw_retval\":{}", static_cast<int64_t>(e.r.retval)) : "raw " + retval_text(e.r.retval);
    const trace::FetchArg &a = spec.args[0];
    if (a.type == trace::FetchType::typed && a.vt->kind == trace::VKind::void_) return "";
    std::string v;
    if (trace::retval_in_record(spec)) {
        unsigned char bytes[8];
        std::memcpy(bytes, &e.r.retval, 8);
        v = json ? trace::format_value_json(a, bytes, false) : trace::format_value(a, bytes, false);
    } else if (e.values.size() >= trace::payload_bytes(spec)) {
        uint64_t faults;
        std::memcpy(&faults, e.values.data(), 8);
        const auto *bytes = reinterpret_cast<const unsigned char *>(e.values.data()) + trace::arg_offset(spec, 0);
        v = json ? trace::format_value_json(a, bytes, faults & 1) : trace::format_value(a, bytes, faults & 1);
    }
    return json ? "\"retval\":" + v : v;
}

// A fetched event's values as " name=value ..." (text) or a JSON object's members.
std::string values_text(const trace::Spec &spec, const std::string &payload, bool json)
{
    std::string out;
    if (payload.size() < trace::payload_bytes(spec)) return out;
    uint64_t faults;
    std::memcpy(&faults, payload.data(), 8);
    for (size_t i = 0; i < spec.args.size(); ++i) {
        const trace::FetchArg &a = spec.args[i];
        bool fault = faults >> i & 1;
        const auto *at = reinterpret_cast<const unsigned char *>(payload.data()) + trace::arg_offset(spec, i);
        // JSON: a string from its bytes (the text escapes every byte past ASCII).
        std::string v = json ? trace::format_value_json(a, at, fault) : trace::format_value(a, at, fault);
        if (json) {
            out += fmt::format("{}\"{}\":{}", i ? "," : "", a.name, v);
        } else {
            out += fmt::format(" {}={}", a.name, v);
        }
    }
    return out;
}


std::string TraceProbes::name_of(uint32_t p) const
{
    const trace::Spec &s = spec_of(p);
    return s.offset ? fmt::format("{}+{:#x}", names[p], s.offset) : names[p];
}

std::string demangled(const std::string &name)
{
    size_t z = name.rfind(":_Z") != std::string::npos ? name.rfind(":_Z") + 1 : name.rfind("_Z", 0) == 0 ? 0 : std::string::npos;
    if (z == std::string::npos) return name;
    std::string d = symbols::names::demangle(name.c_str() + z);
    return d.empty() ? name : name.substr(0, z) + d;
}

namespace {
constexpr size_t kStdoutBuffer = size_t{1} << 20;
constexpr size_t kLongestLine = size_t{64} << 10;  // a line's values are a few KiB at most
}  // namespace

void stdout_whole_lines()
{
    static char buf[kStdoutBuffer];
    // A pipe: each line one write, which the kernel keeps whole (pipe_lines.hpp). glibc's
    // stdout is a variable a program may set.
    struct stat st {};
    if (fstat(1, &st) == 0 && S_ISFIFO(st.st_mode))
        if (FILE *lines = open_pipe_lines(1)) stdout = lines;
    std::setvbuf(stdout, buf, _IOFBF, sizeof buf);
}

std::vector<uint64_t> event_stack(const TraceEvent &e, const TraceProbes &probes)
{
    std::vector<uint64_t> frames;
    if (probes.stack_depth == 0 || e.values.size() < probes.extra_bytes) return frames;
    const size_t at = e.values.size() - 8 - 8 * size_t{probes.stack_depth};  // the stack is last
    uint64_t n = 0;
    std::memcpy(&n, e.values.data() + at, 8);
    n = std::min<uint64_t>(n, probes.stack_depth);
    frames.resize(n);
    std::memcpy(frames.data(), e.values.data() + at + 8, 8 * n);
    return frames;
}

void room_for_line()
{
    if (__fpending(stdout) > kStdoutBuffer - kLongestLine) std::fflush(stdout);  // whole lines only
}

void print_events(std::vector<TraceEvent> &batch, const TraceProbes &probes, PrintOptions &o)
{
    if (o.sink) {
        o.sink->take(batch, probes, o);
        return;
    }
    std::stable_sort(batch.begin(), batch.end(), [](const TraceEvent &a, const TraceEvent &b) { return a.r.exit_ns < b.r.exit_ns; });
    for (const TraceEvent &e : batch) {
        if (e.r.probe >= probes.names.size()) continue;
        const trace::Spec &spec = probes.spec_of(e.r.probe);
        if (o.tid && static_cast<int>(e.r.tid) != o.tid) continue;
        if (spec.kind != trace::SpecKind::probe && e.r.exit_ns - e.r.entry_ns < o.min_duration) continue;
        room_for_line();
        print_one(e, probes, o);
    }
    std::fflush(stdout);
}

void chrome_begin(FILE *f) { std::fprintf(f, "{\"traceEvents\":["); }
void chrome_end(FILE *f) { std::fprintf(f, "\n],\"displayTimeUnit\":\"ns\"}\n"); }

std::string hist_bound(uint32_t b)
{
    if (b == 0) return "0";
    uint64_t v = uint64_t{1} << (b - 1);
    const char *unit[] = {"", "K", "M", "G", "T"};
    int u = 0;
    while (v >= 1024 && u < 4) v /= 1024, ++u;
    return fmt::format("{}{}", v, unit[u]);
}

uint32_t hist_bucket(uint64_t ns)
{
    uint32_t b = ns == 0 ? 0 : 64 - static_cast<uint32_t>(__builtin_clzll(ns));
    return b < trace::kHistBuckets ? b : trace::kHistBuckets - 1;
}

void TraceTotals::add(const TraceEvent &e, const TraceProbes &probes)
{
    if (e.r.probe >= count.size()) return;
    ++count[e.r.probe];
    if (probes.spec_of(e.r.probe).kind != trace::SpecKind::probe) ++hist[e.r.probe][hist_bucket(e.r.exit_ns - e.r.entry_ns)];
}

void print_counts(const TraceTotals &t, const TraceProbes &probes)
{
    std::vector<std::pair<uint64_t, uint32_t>> rows;
    for (uint32_t p = 0; p < t.count.size(); ++p)
        if (t.count[p]) rows.emplace_back(t.count[p], p);
    std::sort(rows.begin(), rows.end(), [](auto &a, auto &b) { return a.first != b.first ? a.first > b.first : a.second < b.second; });
    for (auto &[n, p] : rows) std::printf("%-40s %" PRIu64 "\n", probes.name_of(p).c_str(), n);
    std::printf("(%zu of %zu functions called)\n", rows.size(), t.count.size());
}


void print_buckets(const uint64_t *buckets, size_t n)
{
    const uint64_t peak = *std::max_element(buckets, buckets + n);
    if (peak == 0) return;
    size_t lo = 0, hi = n - 1;
    while (buckets[lo] == 0) ++lo;
    while (buckets[hi] == 0) --hi;
    for (size_t b = lo; b <= hi; ++b) {
        const std::string range = b == 0 ? "[0]" : fmt::format("[{}, {})", hist_bound(static_cast<uint32_t>(b)),
                                                                hist_bound(static_cast<uint32_t>(b + 1)));
        const int bar = static_cast<int>(buckets[b] * 52 / peak);
        std::printf("%-14s %10" PRIu64 " |%-52s|\n", range.c_str(), buckets[b], std::string(static_cast<size_t>(bar), '@').c_str());
    }
}

void print_hists(const TraceTotals &t, const TraceProbes &probes)
{
    for (uint32_t p = 0; p < t.hist.size(); ++p) {
        const auto &buckets = t.hist[p];
        uint64_t total = 0;
        for (uint64_t n : buckets) total += n;
        const uint64_t left = p < t.left.size() ? t.left[p] : 0;
        if (total == 0 && left == 0) continue;
        // Calls that left without returning have no duration: said beside the histogram.
        const std::string also =
            left ? fmt::format(", and {} that left without returning (an exception, a longjmp, a thread's exit)", left)
                 : std::string();
        std::printf("@ns[%s]: %" PRIu64 " calls%s\n", probes.name_of(p).c_str(), total, also.c_str());
        if (total == 0) {
            std::printf("\n");
            continue;
        }
        print_buckets(buckets.data(), buckets.size());
        std::printf("\n");
    }
}

std::string trace_header(int pid, const TraceProbes &probes)
{
    std::string out(kMagic, sizeof kMagic);
    auto u32 = [&](uint32_t v) { out.append(reinterpret_cast<const char *>(&v), 4); };
    auto text = [&](const std::string &t) {
        u32(static_cast<uint32_t>(t.size()));
        out += t;
    };
    u32(static_cast<uint32_t>(pid));
    u32(static_cast<uint32_t>(probes.specs.size()));
    for (const trace::Spec &s : probes.specs) text(trace::to_text(s));
    u32(static_cast<uint32_t>(probes.names.size()));
    for (size_t p = 0; p < probes.names.size(); ++p) {
        u32(probes.spec[p]);
        text(probes.names[p]);
    }
    u32(probes.extra_bytes);
    u32(probes.stack_depth);
    text(probes.maps);
    return out;
}

bool read_trace_file(const std::string &path, TraceProbes *probes, int *pid,
                     const std::function<void(std::vector<TraceEvent> &)> &each, std::string *why, bool progress)
{
    FILE *f = std::fopen(path.c_str(), "rb");
    if (!f) {
        *why = fmt::format("{}: {}", path, std::strerror(errno));
        return false;
    }
    struct stat st {};
    ProgressLine line(progress && fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode));
    const bool ok = read_trace_stream(f, path, probes, pid, each, why, &line, static_cast<uint64_t>(st.st_size));
    std::fclose(f);
    return ok;
}

// "liveprobe: reading t.lptrace: 45% (1.2 GiB of 2.7 GiB)"
static void say_read(FILE *f, const std::string &path, uint64_t size, ProgressLine *progress)
{
    if (!progress || !progress->enabled() || size == 0) return;
    const auto at = static_cast<double>(std::max<off_t>(ftello(f), 0));
    progress->show(fmt::format("liveprobe: reading {}: {:.0f}% ({} of {})", path, 100 * at / static_cast<double>(size),
                               human_bytes(at), human_bytes(static_cast<double>(size))));
}

bool read_trace_stream(FILE *f, const std::string &path, TraceProbes *probes, int *pid,
                       const std::function<void(std::vector<TraceEvent> &)> &each, std::string *why,
                       ProgressLine *progress, uint64_t size)
{
    char magic[sizeof kMagicV1] = {};
    if (std::fread(magic, 1, sizeof magic, f) == sizeof magic && std::memcmp(magic, kMagicV1, sizeof magic) == 0) {
        *why = fmt::format("{}: a trace file of an older liveprobe (format 1, 32-byte records), which this one does "
                           "not read: show it with the liveprobe that wrote it",
                           path);
        return false;
    }
    std::rewind(f);
    uint32_t upid = 0;
    bool ok = read_header(f, probes, &upid);
    if (!ok) {
        *why = fmt::format("{}: not a liveprobe trace file (written by liveprobe trace -o)", path);
        return false;
    }
    *pid = static_cast<int>(upid);
    // The events, a million at a time (a trace file may hold billions).
    std::vector<TraceEvent> batch;
    TraceDecoder dec(upid);
    std::string header;
    for (;;) {
        TraceEvent e;
        TraceDecoder::Step step = dec.next(f, &e.r, &header);
        if (step == TraceDecoder::kEnd) break;
        if (step == TraceDecoder::kHeader) {
            // Probes placed later: the header again, with them. What came before is shown first.
            if (!batch.empty()) each(batch);
            batch.clear();
            FILE *m = fmemopen(header.data(), header.size(), "rb");
            TraceProbes fresh;
            uint32_t ignored = 0;
            ok = m && read_header(m, &fresh, &ignored);
            if (m) std::fclose(m);
            if (!ok) break;
            *probes = std::move(fresh);
            continue;
        }
        if (step != TraceDecoder::kEvent || e.r.probe >= probes->names.size()) {
            ok = false;
            break;
        }
        if (const size_t bytes = trace::event_bytes(probes->spec_of(e.r.probe)) + probes->extra_bytes;
            bytes && !TraceDecoder::values(f, bytes, &e.values)) {
            ok = false;
            break;
        }
        e.pid = static_cast<int>(dec.pid());
        batch.push_back(std::move(e));
        if (batch.size() % 65536 == 0) say_read(f, path, size, progress);
        if (batch.size() == 1000000) {
            each(batch);
            batch.clear();
        }
    }
    if (!batch.empty()) each(batch);
    if (progress) progress->clear();
    if (!ok) *why = fmt::format("{}: cut short (the events that came before were shown)", path);
    return ok;
}

}  // namespace liveprobe::tool
