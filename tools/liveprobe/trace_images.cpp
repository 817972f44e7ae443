#include "trace_images.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include <fmt/format.h>

#include "agent/channel.hpp"
#include "trace/session.hpp"
#include "trace/spec.hpp"

namespace liveprobe::tool {

using trace::Header;
using trace::kRingRecords;
using trace::kRings;
using trace::Record;

Image::~Image()
{
    if (shm.base && shm.base != MAP_FAILED) munmap(shm.base, shm.bytes);
    if (conn >= 0) close(conn);
}

bool is_own_function(const std::string &raw)
{
    // "libz.so.1:inflate" is a library's; "ns::f" (a C++ name given as a spec) is not.
    const size_t colon = raw.find(':');
    return colon == std::string::npos || (colon + 1 < raw.size() && raw[colon + 1] == ':');
}

std::string base_name(const std::string &path) { return path.substr(path.rfind('/') + 1); }

void *map_session(int fd, size_t *bytes, std::string *why)
{
    struct stat st {};
    if (fstat(fd, &st) != 0) {
        *why = fmt::format("cannot read its size: {}", std::strerror(errno));
        return nullptr;
    }
    const int seals = fcntl(fd, F_GET_SEALS);
    if (seals < 0 || !(seals & F_SEAL_SHRINK)) {
        *why = "its size is not sealed, and the process could shrink it under the tool (an agent older than this "
               "tool: restart the program)";
        return nullptr;
    }
    if (static_cast<size_t>(st.st_size) < trace::kRingsBytes) {
        *why = fmt::format("{} bytes, fewer than a session's {}", st.st_size, trace::kRingsBytes);
        return nullptr;
    }
    *bytes = static_cast<size_t>(st.st_size);
    void *base = mmap(nullptr, *bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) {
        *why = fmt::format("cannot map it: {}", std::strerror(errno));
        return nullptr;
    }
    return base;
}

namespace {

// The layout's fields as the target wrote them, each read once, checked against the mapping's
// size: "" when they fit, else what does not. The target may write them at any time: what is
// used afterwards is the copy checked here.
std::string check_layout(const Shm &shm, uint32_t capacity, bool hist, uint64_t names_at, uint64_t names_bytes)
{
    constexpr uint32_t kMaxCapacity = 1u << 24;  // far above any session's probes
    if (capacity > kMaxCapacity) return fmt::format("capacity {} (at most {})", capacity, kMaxCapacity);
    const size_t layout = trace::names_offset(capacity, hist);
    if (layout > shm.bytes) return fmt::format("a layout of {} bytes in a mapping of {}", layout, shm.bytes);
    if (names_at < layout || names_at > shm.bytes || names_bytes > shm.bytes - names_at)
        return fmt::format("names at {} ({} bytes) in a mapping of {}", names_at, names_bytes, shm.bytes);
    return {};
}

}  // namespace

bool load_names(Image &im)
{
    Shm *shm = &im.shm;
    if (!shm->corrupt.empty()) return false;
    Header *h = trace::header_of(shm->base);
    if (h->magic != trace::kRingsMagic || h->ready.load(std::memory_order_acquire) != 1) return false;
    uint32_t published = h->probes.load(std::memory_order_acquire);
    const uint32_t capacity = h->capacity;
    const bool hist = h->hist != 0;
    const uint32_t extra = h->extra_bytes;  // --by, --hist-of: checked against the most there is
    if (extra > trace::kMaxExtraBytes) shm->corrupt = fmt::format("events carry {} bytes more", extra);
    if (!shm->corrupt.empty()) return false;
    const uint64_t names_at = h->names_offset;
    const uint64_t names_bytes = h->names_bytes.load(std::memory_order_acquire);  // names first, then probes
    if (shm->names_bytes != 0 && capacity != shm->capacity) shm->corrupt = "its capacity changed";
    else shm->corrupt = check_layout(*shm, capacity, hist, names_at, names_bytes);
    if (!shm->corrupt.empty()) {
        shm->probes = 0;
        return false;
    }
    shm->capacity = capacity;
    shm->names_bytes = names_bytes;
    std::string text(static_cast<const char *>(shm->base) + names_at, names_bytes);
    std::istringstream in(text);
    // "spec TEXT" for each spec as the target placed it (parameters resolved), then
    // "ADDRESS SPEC NAME" for each probe, the name to the end of the line (a C++ name has spaces).
    TraceProbes &probes = im.probes;
    probes.names.clear();
    probes.spec.clear();
    im.own.clear();
    im.slow.clear();
    std::vector<trace::Spec> placed;
    std::string maps;
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("map ", 0) == 0) {  // --by caller, --stacks: an executable mapping of the process
            maps += line.substr(4) + "\n";
            continue;
        }
        if (line.rfind("exe ", 0) == 0) {  // trace -- CMD: the image's executable
            im.exe = agent::escape_controls(line.substr(4));
            continue;
        }
        if (line.rfind("slow ", 0) == 0) {  // "slow INDEX REASON": probe INDEX on the breakpoint path
            char *end = nullptr;
            const unsigned long p = std::strtoul(line.c_str() + 5, &end, 10);
            if (end && *end == ' ' && p < probes.names.size()) im.slow[static_cast<uint32_t>(p)] = agent::escape_controls(end + 1);
            continue;
        }
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
        const std::string raw = line.substr(b + 1);
        const bool own = is_own_function(raw);
        probes.spec.push_back(spec);
        // A name as the target's files spell it: its control characters escaped (it is printed).
        probes.names.push_back((own ? im.prefix : std::string()) + agent::escape_controls(demangled(raw)));
        im.own.push_back(own);
    }
    if (probes.names.size() > capacity) {
        shm->corrupt = fmt::format("{} probes named, room for {}", probes.names.size(), capacity);
        shm->probes = 0;
        return false;
    }
    probes.specs = std::move(placed);
    probes.extra_bytes = extra;
    probes.stack_depth = std::min(h->stack_depth, trace::kMaxStackDepth);
    probes.maps = maps;
    probes.payload.clear();
    for (uint32_t p = 0; p < probes.spec.size(); ++p)
        probes.payload.push_back(static_cast<uint32_t>(trace::event_bytes(probes.spec_of(p)) + extra));
    // Every probe named is known (one that is named but not yet counted cannot fire yet).
    shm->probes = static_cast<uint32_t>(probes.names.size());
    return shm->probes >= published;
}

namespace {

// The process whose thread claimed ring h: a forked child's threads write rings of their own
// in the memory it shares with its parent (rings.hpp RingHead::pid). An agent older than that
// field leaves it 0: the image's process, as before. Whatever the target wrote, it is only a
// number shown.
int ring_pid(const Image &im, const trace::RingHead *h)
{
    const int32_t pid = h->pid.load(std::memory_order_relaxed);
    return pid > 0 ? pid : im.pid;
}

// A trace file holds the events encoded (trace_codec.hpp), each with its values. A ring's
// [tail, head) always ends at an event's end. The events are encoded straight into one of the
// writer's buffers (no per-event append), handed over when full.
uint64_t write_out(Image &im)
{
    const Shm &shm = im.shm;
    uint64_t events = 0;
    std::vector<char> &buf = im.encoded;
    if (buf.empty()) buf = im.out->buffer();
    size_t used = 0;
    auto hand_over = [&] {
        im.out->submit(std::move(buf), used);
        buf = im.out->buffer();
        used = 0;
    };
    std::string values;
    for (uint32_t i = 0; i < kRings; ++i) {
        trace::RingHead *h = trace::ring_head(shm.base, i);
        uint64_t tail = h->tail.load(std::memory_order_relaxed);
        uint64_t head = h->head.load(std::memory_order_acquire);
        if (head < tail || head - tail > kRingRecords) {  // no ring holds more: not the writer's
            im.shm.corrupt = fmt::format("ring {} holds {} records, of {}", i, head - tail, kRingRecords);
            break;
        }
        const Record *recs = trace::ring_records(shm.base, i);
        if (shm.probes < trace::header_of(shm.base)->probes.load(std::memory_order_acquire))
            continue;  // probes were placed since the names were read: their names go first
        const auto pid = static_cast<uint32_t>(ring_pid(im, h));  // after head's acquire: the claim's
        uint64_t k = tail;
        while (k < head) {
            const Record &r = recs[k % kRingRecords];
            if (r.probe >= shm.probes) break;  // not named yet: the next time
            const size_t bytes = im.probes.payload[r.probe];
            const uint64_t slots = bytes ? trace::record_slots(bytes) : 1;
            if (k + slots > head) break;
            if (slots > 1) {
                values.clear();
                for (uint64_t v = k + 1; v < k + slots; ++v)
                    values.append(reinterpret_cast<const char *>(&recs[v % kRingRecords]), sizeof(Record));
            }
            if (const size_t need = used + TraceEncoder::kMaxEventBytes + bytes; need > buf.size())
                buf.resize(std::max(need, 2 * buf.size()));  // values larger than a buffer
            used = static_cast<size_t>(im.encoder.event(r, pid, values.data(), bytes, buf.data() + used) - buf.data());
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

}  // namespace

uint64_t drain(Image &im, PrintOptions &print)
{
    if (!im.shm.corrupt.empty()) return 0;
    if (im.out) return write_out(im);
    const Shm &shm = im.shm;
    std::vector<TraceEvent> batch;
    uint64_t events = 0;
    for (uint32_t i = 0; i < kRings; ++i) {
        trace::RingHead *h = trace::ring_head(shm.base, i);
        uint64_t tail = h->tail.load(std::memory_order_relaxed);
        uint64_t head = h->head.load(std::memory_order_acquire);
        if (head < tail || head - tail > kRingRecords) {  // no ring holds more: not the writer's
            im.shm.corrupt = fmt::format("ring {} holds {} records, of {}", i, head - tail, kRingRecords);
            return 0;
        }
        const Record *recs = trace::ring_records(shm.base, i);
        const int pid = ring_pid(im, h);  // after head's acquire: the claim's
        uint64_t k = tail;
        while (k < head && k - tail < kPrintBatch) {
            TraceEvent e{recs[k % kRingRecords], {}, pid};
            if (e.r.probe >= shm.probes) break;  // placed since the names were read: the next time
            ++k;
            const bool marker = trace::is_tree_marker(e.r);  // --tree's: no values, and no call
            events += !marker;
            for (size_t bytes = marker ? 0 : im.probes.payload[e.r.probe]; e.values.size() < bytes && k < head; ++k)
                e.values.append(reinterpret_cast<const char *>(&recs[k % kRingRecords]),
                                std::min(bytes - e.values.size(), sizeof(Record)));
            batch.push_back(std::move(e));
        }
        h->tail.store(k, std::memory_order_release);
    }
    print.pid = im.pid;
    print_events(batch, im.probes, print);
    return events;
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
    const bool calls = trace::header_of(shm.base)->counts_calls != 0;  // else the rows hold calls that left
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
            if (calls) {
                t.count[p] += trace::count_of(shm.base, shm.capacity, r, p)->load();
                continue;
            }
            t.left[p] += trace::count_of(shm.base, shm.capacity, r, p)->load();
            if (!hist) continue;
            for (uint32_t b = 0; b < trace::kHistBuckets; ++b) {  // --hist counts no calls but in buckets
                const uint64_t n = trace::hist_of(shm.base, shm.capacity, r, p)[b].load();
                t.hist[p][b] += n;
                t.count[p] += n;
            }
        }
    }
    return t;
}

void Folded::add(const Image &im)
{
    const Shm &shm = im.shm;
    if (!im.named || !shm.corrupt.empty()) return;
    const TraceTotals t = totals_of(shm);
    std::vector<uint32_t> key_of(shm.probes);
    for (uint32_t p = 0; p < shm.probes; ++p) {
        // Keyed without the events' prefix: probes() puts the executable's name back when
        // there is more than one.
        std::string name = im.probes.name_of(p).substr(im.own[p] ? im.prefix.size() : 0);
        auto key = std::make_pair(im.own[p] ? im.exe : std::string(), im.probes.spec_of(p).text + '\n' + name);
        auto [it, added] = index.emplace(key, static_cast<uint32_t>(keys.size()));
        if (added) {
            keys.push_back(key);
            count.push_back(0);
            left.push_back(0);
            missed_by.push_back(0);
            hist.push_back({});
        }
        key_of[p] = it->second;
        count[it->second] += t.count[p];
        left[it->second] += t.left[p];
        if (auto s = im.slow.find(p); s != im.slow.end()) slow.emplace(it->second, s->second);
        for (uint32_t b = 0; b < trace::kHistBuckets; ++b) hist[it->second][b] += t.hist[p][b];
    }
    Header *h = trace::header_of(shm.base);
    for (uint32_t i = 0; i < kRings; ++i) dropped += trace::ring_head(shm.base, i)->dropped.load();
    unringed += h->unringed.load();
    if (h->final.load())
        for (uint32_t p = 0; p < shm.probes; ++p) {
            const uint64_t m = trace::missed_of(shm.base, p)->load();
            missed += m;
            missed_by[key_of[p]] += m;
        }
    else
        ++unknown_missed;
    exes.insert(im.exe);
    ++images;
}

TraceProbes Folded::probes() const
{
    TraceProbes out;
    out.specs.emplace_back();  // the names carry their offsets
    for (const auto &[exe, key] : keys) {
        const std::string name = key.substr(key.find('\n') + 1);
        out.names.push_back(exes.size() > 1 && !exe.empty() ? base_name(exe) + ":" + name : name);
        out.spec.push_back(0);
        out.payload.push_back(0);
    }
    return out;
}

TraceTotals Folded::totals() const
{
    TraceTotals t(keys.size());
    t.count = count;
    t.hist = hist;
    t.left = left;
    return t;
}

}  // namespace liveprobe::tool
