#include "trace_images.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <sstream>

#include "agent/channel.hpp"
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

bool load_names(Image &im)
{
    Shm *shm = &im.shm;
    Header *h = trace::header_of(shm->base);
    if (h->magic != trace::kRingsMagic || h->ready.load(std::memory_order_acquire) != 1) return false;
    uint32_t published = h->probes.load(std::memory_order_acquire);
    shm->capacity = h->capacity;
    shm->names_bytes = h->names_bytes.load(std::memory_order_acquire);  // names first, then probes
    std::string text(static_cast<const char *>(shm->base) + h->names_offset, shm->names_bytes);
    std::istringstream in(text);
    // "spec TEXT" for each spec as the target placed it (parameters resolved), then
    // "ADDRESS SPEC NAME" for each probe, the name to the end of the line (a C++ name has spaces).
    TraceProbes &probes = im.probes;
    probes.names.clear();
    probes.spec.clear();
    im.own.clear();
    im.slow.clear();
    std::vector<trace::Spec> placed;
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("exe ", 0) == 0) {  // trace -- CMD: the image's executable
            im.exe = line.substr(4);
            continue;
        }
        if (line.rfind("slow ", 0) == 0) {  // "slow INDEX REASON": probe INDEX on the breakpoint path
            char *end = nullptr;
            const unsigned long p = std::strtoul(line.c_str() + 5, &end, 10);
            if (end && *end == ' ' && p < probes.names.size()) im.slow[static_cast<uint32_t>(p)] = end + 1;
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
        probes.names.push_back((own ? im.prefix : std::string()) + demangled(raw));
        im.own.push_back(own);
    }
    probes.specs = std::move(placed);
    probes.payload.clear();
    for (uint32_t p = 0; p < probes.spec.size(); ++p)
        probes.payload.push_back(static_cast<uint32_t>(trace::event_bytes(probes.spec_of(p))));
    // Every probe named is known (one that is named but not yet counted cannot fire yet).
    shm->probes = static_cast<uint32_t>(probes.names.size());
    return shm->probes >= published;
}

namespace {

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
        const Record *recs = trace::ring_records(shm.base, i);
        if (shm.probes < trace::header_of(shm.base)->probes.load(std::memory_order_acquire))
            continue;  // probes were placed since the names were read: their names go first
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
            used = static_cast<size_t>(im.encoder.event(r, values.data(), bytes, buf.data() + used) - buf.data());
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
    if (im.out) return write_out(im);
    const Shm &shm = im.shm;
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
            for (const size_t bytes = im.probes.payload[e.r.probe]; e.values.size() < bytes && k < head; ++k)
                e.values.append(reinterpret_cast<const char *>(&recs[k % kRingRecords]),
                                std::min(bytes - e.values.size(), sizeof(Record)));
            batch.push_back(std::move(e));
        }
        h->tail.store(k, std::memory_order_release);
    }
    print.pid = im.pid;
    print_events(batch, im.probes, print);
    return static_cast<uint64_t>(batch.size());
}

namespace {

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

}  // namespace

void Folded::add(const Image &im)
{
    const Shm &shm = im.shm;
    if (!im.named) return;
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
