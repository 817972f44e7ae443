// The tracer's per-thread state on its hit path (handlers.cpp; hist_return.S reads it too): this thread's
// ring and rows, and what a --hist return adds to them.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "os/linux/clock.hpp"
#include "trace/handlers.hpp"
#include "trace/rings.hpp"

namespace liveprobe::trace {

// This thread's ring and rows in slot 0's session, in one thread-local block (one address to
// compute per event) on one cache line: where the library's static TLS lands depends on the
// process, and a ThreadRows across two lines cost --hist 1.5 cycles a call.
struct alignas(64) ThreadRows {
    std::atomic<uint64_t> *counts = nullptr;  // the ring's row of counters
    uint64_t generation = 0;                  // g_slots[0].generation when they were set
    std::atomic<uint64_t> *hists = nullptr;   // its row of histograms (--hist)
    int32_t ring = -1;
    // The ring's tail as this thread last read it: the reader only moves it forward, so the ring
    // has at least as much room as this says, and the shared line is read only when it seems full.
    uint64_t tail = 0;
    std::atomic<uint64_t> *pending = nullptr;  // the ring's hist_pending (RingHead)
};
// constinit: no initializer runs, so other files reach it without a TLS wrapper call; hidden:
// without the GOT (as handlers.hpp's globals).
extern constinit thread_local ThreadRows t_rows __attribute__((visibility("hidden")));
// This thread's ring in the other slots' sessions, a word each (slot s at s - 1): the ring + 1
// (0: none) in the low half, the low half of the slot's generation when it was claimed in the
// high half. A word, not a ThreadRows: the library's thread-local storage is static (initial-exec,
// it may be loaded by dlopen into a running process), and glibc keeps little room for that.
extern constinit thread_local uint64_t t_other_rings[kSessions - 1] __attribute__((visibility("hidden")));

// The probe a kretprobe of the tracer belongs to, and its index.
inline const Probe *probe_of_rp(const struct kretprobe *rp) noexcept
{
    return reinterpret_cast<const Probe *>(reinterpret_cast<const char *>(rp) - offsetof(Probe, rp));
}
inline uint32_t index_of(const struct kretprobe *rp) noexcept { return probe_of_rp(rp)->index; }

// The nanoseconds between two TSC reads, stamp then end, read unordered: 0 when end is not
// later (an unordered read may come early).
inline uint64_t tsc_delta_ns(uint64_t stamp, uint64_t end) noexcept
{
    return end <= stamp ? 0 : os::clock::cycles_to_ns(end - stamp);
}

// One call that took delta ns, into a probe's row of buckets (this thread's row only).
inline void hist_add(std::atomic<uint64_t> *row, uint64_t delta) noexcept
{
    uint32_t bucket = delta == 0 ? 0 : 64 - static_cast<uint32_t>(__builtin_clzll(delta));
    if (bucket >= kHistBuckets) bucket = kHistBuckets - 1;
    std::atomic<uint64_t> *b = row + bucket;
    b->store(b->load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);  // the count: the buckets' sum
}

// --hist's return handler's rare cases, the whole return (handlers.cpp); for lp_call_keeping.
int hist_return_slow(void *ri) noexcept;

}  // namespace liveprobe::trace
