// liveprobe's cheap monotonic clock: nanoseconds on CLOCK_MONOTONIC's epoch, read from the
// invariant TSC (liveprobe_ktime_ns() in include/liveprobe/ktime.h; <linux/ktime.h>'s
// ktime_get() will wrap it). ktime_ns() below is the whole fast path, inline for internal
// callers: async-signal-safe, lock-free, no allocation, no libc, no floating point, no
// division, no vector register (it may be compiled with -mgeneral-regs-only).
//
// The conversion is piecewise linear and published as records in a small ring, kernel-style
// (timekeeping's cycle_last/mult/shift): a record holds the current segment, which starts at
// TSC `start` with value `ns` and runs at `mult` (ns per cycle, 32.32 fixed point), and the
// previous segment, which a reader still uses for t < start. Each segment is clamped at its
// `expire`: a reader holding a stale record never gets past the value the next record starts
// from, so no reader ever gets less than a value any reader got before it. Past
// `refine`, a reader calls the slow path (clock.cpp), which measures CLOCK_MONOTONIC again and
// publishes the next record: it corrects the rate, and removes the offset (slewed by at most
// about 0.1%; a larger one by stepping forward or standing still), so the values stay on
// CLOCK_MONOTONIC. See docs/DESIGN-NOTES.md, "Time source".
#pragma once

#include <atomic>
#include <cstdint>

namespace liveprobe::os::clock {

enum Source : uint8_t {
    kUninitialized = 0,  // before the library's initializer ran: clock_gettime
    kClockGettime = 1,   // the vDSO's clock_gettime(CLOCK_MONOTONIC), or the system call
    kTscLfence = 2,      // the TSC, read with lfence; rdtsc
    kTscRdtscp = 3,      // the TSC, read with rdtscp
};

// One published conversion (see the top of this file). For a TSC value t:
//   t < lo or t >= refine   the slow path
//   start <= t < refine     ns + (t - start) * mult >> 32
//   lo <= t < start         prev_ns + (min(t, prev_end) - lo) * prev_mult >> 32
// with lo <= start < refine < expire, and ns >= the previous segment's value at prev_end.
struct alignas(64) Conversion {
    std::atomic<uint64_t> start, ns, mult, refine;
    std::atomic<uint64_t> lo, prev_ns, prev_mult, prev_end;
    std::atomic<uint64_t> expire;  // the slow path only
};

constexpr unsigned kRing = 8;  // a reader retries if its record was reused while it read it

// Hidden: inline readers in other files reach them without the GOT.
#pragma GCC visibility push(hidden)
extern std::atomic<uint8_t> g_source;
extern std::atomic<uint32_t> g_gen;  // the current record is g_conv[g_gen % kRing]
extern Conversion g_conv[kRing];
#pragma GCC visibility pop

// The slow path: refines the conversion when t >= refine (unless another thread is doing
// it), and returns the clock's value for t.
uint64_t slow_ns(uint64_t t) noexcept;
// clock_gettime(CLOCK_MONOTONIC) in nanoseconds, through the vDSO without libc.
uint64_t monotonic_ns() noexcept;

inline uint64_t scale(uint64_t cycles, uint64_t mult) noexcept
{
    return static_cast<uint64_t>((static_cast<unsigned __int128>(cycles) * mult) >> 32);
}

// The TSC, not read before the loads that precede it have completed (the kernel's
// rdtsc_ordered): a thread that saw another's value reads a later one.
inline uint64_t tsc_ordered(uint8_t source) noexcept
{
    uint32_t lo, hi;
    if (source == kTscRdtscp)
        asm volatile("rdtscp" : "=a"(lo), "=d"(hi) : : "rcx", "memory");
    else
        asm volatile("lfence; rdtsc" : "=a"(lo), "=d"(hi) : : "memory");
    return (uint64_t{hi} << 32) | lo;
}

// The fast path's value for TSC value t in record c; false when t is outside its fast range
// (t < lo or t >= refine: the slow path's).
inline bool fast_value(const Conversion &c, uint64_t t, uint64_t *v) noexcept
{
    const uint64_t start = c.start.load(std::memory_order_relaxed);
    const uint64_t refine = c.refine.load(std::memory_order_relaxed);
    const uint64_t lo = c.lo.load(std::memory_order_relaxed);
    if (t >= start) {
        *v = c.ns.load(std::memory_order_relaxed) + scale(t - start, c.mult.load(std::memory_order_relaxed));
    } else {
        const uint64_t end = c.prev_end.load(std::memory_order_relaxed);
        *v = c.prev_ns.load(std::memory_order_relaxed) +
             scale((t < end ? t : end) - lo, c.prev_mult.load(std::memory_order_relaxed));
    }
    // One comparison for t < lo || t >= refine (lo < refine).
    return t - lo < refine - lo;
}

// The seqlock read of the current record shared by ktime_ns and tsc_ns: read_tsc() gives the TSC
// value to convert, called after the generation is loaded (ktime_ns reads the TSC there, so that
// it is never older than its record; tsc_ns's value was read before).
template <typename ReadTsc>
inline uint64_t convert_current(ReadTsc read_tsc) noexcept
{
    for (;;) {
        const uint32_t gen = g_gen.load(std::memory_order_acquire);
        const uint64_t t = read_tsc();
        uint64_t v;
        const bool fast = fast_value(g_conv[gen % kRing], t, &v);
        // Seqlock reader: the record was not reused while it was read.
        std::atomic_thread_fence(std::memory_order_acquire);
        if (__builtin_expect(g_gen.load(std::memory_order_relaxed) != gen, 0)) continue;
        if (__builtin_expect(!fast, 0)) return slow_ns(t);
        return v;
    }
}

inline uint64_t ktime_ns() noexcept
{
    const uint8_t source = g_source.load(std::memory_order_relaxed);
    if (__builtin_expect(source < kTscLfence, 0)) return monotonic_ns();
    // One loop for each way of reading the TSC, so that the source is not live in it: the fast
    // path then fits in the caller-saved registers, and a handler that reads the clock writes
    // no callee-saved register (the light kretprobe paths call such handlers directly).
    if (source == kTscRdtscp) return convert_current([] { return tsc_ordered(kTscRdtscp); });
    return convert_current([] { return tsc_ordered(kTscLfence); });
}

// For durations measured in TSC cycles (a tracer's, at both ends of a call): whether the clock
// is the TSC, the TSC unordered (cheaper than tsc_ordered: it may be read a few instructions
// early or late), and the current rate to turn cycles into nanoseconds. No call: a handler
// using them stays provably free of vector instructions.
inline bool is_tsc() noexcept { return g_source.load(std::memory_order_relaxed) >= kTscLfence; }
inline uint64_t tsc_unordered() noexcept
{
    uint32_t lo, hi;
    asm volatile("rdtsc" : "=a"(lo), "=d"(hi));
    return (uint64_t{hi} << 32) | lo;
}
// The clock's value at t, a TSC value the caller read unordered (tsc_unordered), when is_tsc():
// a tracer's timestamps, which need no ordering with the loads around them, one rdtsc each
// (an ordered read costs about twice as much: rdtscp or lfence; rdtsc). Where t is outside the
// current record's fast range, the slow path (which reads the TSC again, a few ns later).
inline uint64_t tsc_ns(uint64_t t) noexcept { return convert_current([t] { return t; }); }
// The clock's value at an earlier TSC value t, as the current record converts it (t in its fast
// range: its segment or the previous one), with no slow path; false for an older t. A call's
// entry converted so lies on the same line as the values read while it ran: its callees'
// entries and returns are never before its entry (now less the cycles scaled at the current
// rate is not: the rate of a slewed segment differs by up to 0.1%).
inline bool tsc_ns_recent(uint64_t t, uint64_t *v) noexcept
{
    for (;;) {
        const uint32_t gen = g_gen.load(std::memory_order_acquire);
        const bool fast = fast_value(g_conv[gen % kRing], t, v);
        std::atomic_thread_fence(std::memory_order_acquire);
        if (__builtin_expect(g_gen.load(std::memory_order_relaxed) == gen, 1)) return fast;
    }
}
inline uint64_t cycles_to_ns(uint64_t cycles) noexcept
{
    const Conversion &c = g_conv[g_gen.load(std::memory_order_acquire) % kRing];
    return scale(cycles, c.mult.load(std::memory_order_relaxed));
}

// The source in use, for liveprobe_clock_source(): "tsc" or "clock_gettime".
const char *source_name() noexcept;

}  // namespace liveprobe::os::clock
