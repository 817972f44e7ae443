#include "agent/log_ring.hpp"

#include <algorithm>
#include <cstring>

#include <liveprobe/ktime.h>

namespace liveprobe::agent {

void LogRing::write(const char *text, size_t len, int level, bool cont) noexcept
{
    uint64_t now = liveprobe_ktime_ns();
    uint32_t lv = static_cast<uint32_t>(level < 0 || level > 7 ? kDefaultLevel : level) << 8 | (cont ? kCont : 0);
    len = std::min(len, kPayload * kRecords);
    uint64_t n = len == 0 ? 1 : (len + kPayload - 1) / kPayload;
    uint64_t seq = next_.fetch_add(n, std::memory_order_relaxed);
    for (uint64_t i = 0; i < n; ++i) {
        Record &r = records_[(seq + i) % kRecords];
        uint64_t s = seq + i;
        // Odd: being written. A reader that sees it, or sees it change, drops the record. The
        // slot is claimed only from a complete state: a writer lapped by kRecords records of
        // others while it writes still holds it, and the newer record is dropped (counted)
        // rather than written over the older one at the same time.
        uint64_t cur = r.word.load(std::memory_order_relaxed);
        if ((cur & 1) || cur >= 2 * s + 1 ||
            !r.word.compare_exchange_strong(cur, 2 * s + 1, std::memory_order_acquire, std::memory_order_relaxed)) {
            dropped_.fetch_add(1, std::memory_order_relaxed);
            continue;
        }
        size_t off = i * kPayload;
        size_t chunk = std::min(kPayload, len - std::min(len, off));
        r.len.store(static_cast<uint32_t>(chunk), std::memory_order_relaxed);
        r.flags.store((i == 0 ? kFirst : 0) | (i + 1 == n ? kLast : 0) | lv, std::memory_order_relaxed);
        r.ns.store(now, std::memory_order_relaxed);
        for (size_t w = 0; w * 8 < chunk; ++w) {
            uint64_t word = 0;
            std::memcpy(&word, text + off + w * 8, std::min<size_t>(8, chunk - w * 8));
            r.payload[w].store(word, std::memory_order_relaxed);
        }
        r.word.store(2 * s + 2, std::memory_order_release);
    }
    lines_.fetch_add(1, std::memory_order_relaxed);
}

bool LogRing::copy(uint64_t seq, Copy *out) const noexcept
{
    const Record &r = records_[seq % kRecords];
    uint64_t before = r.word.load(std::memory_order_acquire);
    if (before != 2 * seq + 2) return false;
    out->len = std::min<uint32_t>(r.len.load(std::memory_order_relaxed), kPayload);
    out->flags = r.flags.load(std::memory_order_relaxed);
    out->ns = r.ns.load(std::memory_order_relaxed);
    // Acquire loads (plain loads on x86): the second look at `word` cannot move before them.
    for (size_t w = 0; w * 8 < out->len; ++w) {
        uint64_t word = r.payload[w].load(std::memory_order_acquire);
        std::memcpy(out->payload + w * 8, &word, 8);
    }
    out->flags = r.flags.load(std::memory_order_acquire);
    return r.word.load(std::memory_order_relaxed) == before;
}

std::vector<LogRing::Line> LogRing::read(uint64_t from, uint64_t *next) const
{
    std::vector<Line> out;
    uint64_t end = next_.load(std::memory_order_acquire);
    uint64_t start = std::max(from, end > kRecords ? end - kRecords : 0);
    Copy rec;
    Line cur;
    bool open = false;
    for (uint64_t s = start; s < end; ++s) {
        if (!copy(s, &rec)) {
            if (records_[s % kRecords].word.load(std::memory_order_acquire) == 2 * s + 1) {
                // Being written now: it, and the line it belongs to, are for the next read.
                *next = open ? cur.seq : s;
                return out;
            }
            open = false;  // overwritten meanwhile: its line is lost
            continue;
        }
        if (rec.flags & kFirst) {
            cur = Line{s, rec.ns, static_cast<int>((rec.flags >> 8) & 7), (rec.flags & kCont) != 0, {}};
            open = true;
        }
        if (!open) continue;  // the tail of a line whose head was overwritten
        cur.text.append(rec.payload, rec.len);
        if (rec.flags & kLast) {
            out.push_back(std::move(cur));
            open = false;
        }
    }
    // A line still being written stays for the next read.
    *next = open ? cur.seq : end;
    return out;
}

namespace {
// Constant-initialized (in .bss, no constructor, no destructor to race with writers at exit).
constinit LogRing g_ring;
}  // namespace

LogRing &log_ring() noexcept { return g_ring; }

}  // namespace liveprobe::agent
