// liveprobe's cheap monotonic clock (clock.hpp): choosing the source at load, calibrating the
// TSC against CLOCK_MONOTONIC, and the slow path that keeps it there.
//
// Everything reachable from liveprobe_ktime_ns() (ktime_ns, slow_ns, refine, monotonic_ns) is
// async-signal-safe: no lock (a refinement is claimed with a CAS, and a thread that finds one
// in progress, its own included when a signal interrupted it, reads the published record),
// no allocation, no libc (CLOCK_MONOTONIC is read through the vDSO's own function, or with a
// raw system call). Only the initializer, which runs when the library is loaded, uses libc.
#include "os/linux/clock.hpp"

#include <cpuid.h>
#include <elf.h>
#include <fcntl.h>
#include <liveprobe/ktime.h>
#include <pthread.h>
#include <sys/auxv.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "os/linux/raw_syscall.hpp"

namespace liveprobe::os::clock {

std::atomic<uint8_t> g_source{kUninitialized};
std::atomic<uint32_t> g_gen{0};
Conversion g_conv[kRing];

namespace {

using ClockGettime = int (*)(clockid_t, struct timespec *);
std::atomic<ClockGettime> g_vdso_clock_gettime{nullptr};

// Set once by the initializer, before g_source says "tsc".
uint64_t g_period = 0;  // cycles: a record's refine = start + period, expire = start + 2 period
uint64_t g_lease = 0;   // cycles: a refinement older than this was abandoned; it is taken over
uint64_t g_step = 0;    // ns: off CLOCK_MONOTONIC by more than this, step forward or stand still
constexpr unsigned kSlewShift = 10;            // slew at most rate / 1024 (~0.1%) off the rate
constexpr int64_t kSuspendNs = 10'000'000;     // CLOCK_BOOTTIME - CLOCK_MONOTONIC grew: suspend
constexpr uint64_t kMaxFreezeNs = 1'000'000'000;  // the longest standstill (bounds the sums)

// The refinement's own state: only the thread holding g_refiner touches it.
std::atomic<uint64_t> g_refiner{0};  // TSC when the refinement in progress began; 0: none
uint64_t g_base_tsc = 0;             // the sample the next rate is measured from
uint64_t g_base_mono = 0;
uint64_t g_boot_offset = 0;          // CLOCK_BOOTTIME - CLOCK_MONOTONIC at the last refinement
uint64_t g_rate = 0;                 // measured ns per cycle, 32.32 fixed point
uint64_t g_unconfirmed_rate = 0;     // a measured rate far from g_rate, not yet confirmed

uint64_t clock_ns(clockid_t id) noexcept
{
    struct timespec ts = {0, 0};
    ClockGettime f = g_vdso_clock_gettime.load(std::memory_order_relaxed);
    if (!f || f(id, &ts) != 0) raw_syscall(SYS_clock_gettime, id, reinterpret_cast<long>(&ts));
    return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(ts.tv_nsec);
}

// A record, copied out consistently.
struct Plain {
    uint64_t start, ns, mult, refine, lo, prev_ns, prev_mult, prev_end, expire;
};

uint32_t load_current(Plain *p) noexcept
{
    for (;;) {
        const uint32_t gen = g_gen.load(std::memory_order_acquire);
        const Conversion &c = g_conv[gen % kRing];
        p->start = c.start.load(std::memory_order_relaxed);
        p->ns = c.ns.load(std::memory_order_relaxed);
        p->mult = c.mult.load(std::memory_order_relaxed);
        p->refine = c.refine.load(std::memory_order_relaxed);
        p->lo = c.lo.load(std::memory_order_relaxed);
        p->prev_ns = c.prev_ns.load(std::memory_order_relaxed);
        p->prev_mult = c.prev_mult.load(std::memory_order_relaxed);
        p->prev_end = c.prev_end.load(std::memory_order_relaxed);
        p->expire = c.expire.load(std::memory_order_relaxed);
        std::atomic_thread_fence(std::memory_order_acquire);
        if (g_gen.load(std::memory_order_relaxed) == gen) return gen;
    }
}

// The highest value a reader can get from record c: its current segment at expire.
uint64_t ceiling(const Plain &c) noexcept { return c.ns + scale(c.expire - c.start, c.mult); }

// The value of record c at t, every segment clamped at its end. Below lo (the TSC went
// backward, as after a suspend that reset it) the record's ceiling: no reader of this record
// got more, and the next record starts at least there.
uint64_t value_at(const Plain &c, uint64_t t) noexcept
{
    if (t < c.lo) return ceiling(c);
    if (t >= c.start) return c.ns + scale((t < c.expire ? t : c.expire) - c.start, c.mult);
    return c.prev_ns + scale((t < c.prev_end ? t : c.prev_end) - c.lo, c.prev_mult);
}

void publish(uint32_t gen, const Plain &n) noexcept
{
    Conversion &c = g_conv[(gen + 1) % kRing];
    // Seqlock writer: readers that see any of these stores see the generation moved first.
    std::atomic_thread_fence(std::memory_order_release);
    c.start.store(n.start, std::memory_order_relaxed);
    c.ns.store(n.ns, std::memory_order_relaxed);
    c.mult.store(n.mult, std::memory_order_relaxed);
    c.refine.store(n.refine, std::memory_order_relaxed);
    c.lo.store(n.lo, std::memory_order_relaxed);
    c.prev_ns.store(n.prev_ns, std::memory_order_relaxed);
    c.prev_mult.store(n.prev_mult, std::memory_order_relaxed);
    c.prev_end.store(n.prev_end, std::memory_order_relaxed);
    c.expire.store(n.expire, std::memory_order_relaxed);
    g_gen.store(gen + 1, std::memory_order_release);
}

// One (TSC, CLOCK_MONOTONIC) pair: the TSC halfway between two reads around the clock's, the
// tightest of a few tries (a preempted try is wide).
struct Sample {
    uint64_t tsc, mono;
};

Sample sample(uint8_t source) noexcept
{
    Sample best = {0, 0};
    uint64_t best_width = ~uint64_t{0};
    for (int i = 0; i < 4; ++i) {
        const uint64_t a = tsc_ordered(source);
        const uint64_t m = clock_ns(CLOCK_MONOTONIC);
        const uint64_t b = tsc_ordered(source);
        if (b - a < best_width) {
            best_width = b - a;
            best = {a + (b - a) / 2, m};
        }
    }
    return best;
}

// CLOCK_BOOTTIME - CLOCK_MONOTONIC: constant but for suspends, which it counts. The smaller of
// two readings: being preempted between the two clocks only makes it larger.
uint64_t boot_offset() noexcept
{
    uint64_t best = ~uint64_t{0};
    for (int i = 0; i < 2; ++i) {
        const uint64_t mono = clock_ns(CLOCK_MONOTONIC);
        const uint64_t off = clock_ns(CLOCK_BOOTTIME) - mono;
        if (off < best) best = off;
    }
    return best;
}

// cycles * rate / 2^32 = ns, the other way; capped so a sum with a TSC cannot overflow.
uint64_t cycles_for(uint64_t ns, uint64_t rate) noexcept
{
    if (ns > kMaxFreezeNs) ns = kMaxFreezeNs;
    return static_cast<uint64_t>((static_cast<unsigned __int128>(ns) << 32) / rate);
}

// Measures CLOCK_MONOTONIC and publishes the next record, unless another thread is doing it
// (or this one, interrupted by the signal whose handler is reading the clock).
void refine(uint8_t source) noexcept
{
    const uint64_t now = tsc_ordered(source);
    uint64_t held = g_refiner.load(std::memory_order_relaxed);
    // A refinement abandoned (a signal handler that longjmp'ed out of it) is taken over after
    // the lease; a child of fork() starts with none (the atfork handler).
    if (held != 0 && static_cast<int64_t>(now - held) < static_cast<int64_t>(g_lease)) return;
    if (!g_refiner.compare_exchange_strong(held, now | 1, std::memory_order_acquire,
                                           std::memory_order_relaxed))
        return;

    const Sample s = sample(source);
    const uint64_t boot = boot_offset();
    Plain c;
    const uint32_t gen = load_current(&c);
    if (s.tsc >= c.lo && s.tsc < c.refine) {  // another thread published one meanwhile
        g_refiner.store(0, std::memory_order_release);
        return;
    }
    const bool suspended = static_cast<int64_t>(boot - g_boot_offset) > kSuspendNs;
    g_boot_offset = boot;

    // The rate, over the time since the last sample used: that is the kernel's own, NTP's
    // frequency correction included. Not across a suspend (the TSC may have counted it,
    // CLOCK_MONOTONIC does not), nor when the TSC went backward. A rate more than 1/64 away
    // from the current one means the TSC jumped (or the first rate was wrong): it is taken
    // only when the next measurement agrees with it.
    if (suspended || s.tsc <= g_base_tsc || s.mono <= g_base_mono) {
        g_base_tsc = s.tsc;
        g_base_mono = s.mono;
    } else if (s.tsc - g_base_tsc >= g_period / 2) {
        const uint64_t r = static_cast<uint64_t>(
            (static_cast<unsigned __int128>(s.mono - g_base_mono) << 32) / (s.tsc - g_base_tsc));
        const auto near = [](uint64_t a, uint64_t b, unsigned shift) {
            return (a > b ? a - b : b - a) <= (b >> shift);
        };
        if (near(r, g_rate, 6) || near(r, g_unconfirmed_rate, 10)) g_rate = r;
        g_unconfirmed_rate = near(r, g_rate, 6) ? 0 : r;
        g_base_tsc = s.tsc;
        g_base_mono = s.mono;
    }

    const uint64_t top = ceiling(c);
    Plain n;
    uint64_t mult = g_rate;
    if (!suspended && s.tsc >= c.start && s.tsc < c.expire) {
        // On time: the next segment starts where this one expires, from its value there, at
        // the rate, slewed so that it meets CLOCK_MONOTONIC where the segment after it starts
        // (its own expiry, two periods on: correcting over one period would overshoot and
        // the offset would swing from one side to the other forever).
        n.start = c.expire;
        n.ns = top;
        const uint64_t target = s.mono + scale(n.start - s.tsc, g_rate);
        int64_t off = static_cast<int64_t>(n.ns - target);  // > 0: ahead
        // Further off than one segment can slew (a wrong first rate, a TSC that jumped): far
        // behind, step forward; far ahead, stand still (this record's value at its expiry)
        // until CLOCK_MONOTONIC gets there.
        if (off < -static_cast<int64_t>(g_step)) {
            n.ns = target;
            off = 0;
        } else if (off > static_cast<int64_t>(g_step)) {
            n.start += cycles_for(static_cast<uint64_t>(off), g_rate);
            off = 0;
        }
        const int64_t limit = static_cast<int64_t>(g_rate >> kSlewShift);
        __int128 corr = (static_cast<__int128>(off) * (__int128{1} << 32)) /
                        static_cast<__int128>(2 * g_period);
        if (corr > limit) corr = limit;
        if (corr < -limit) corr = -limit;
        mult = static_cast<uint64_t>(static_cast<int64_t>(g_rate) - static_cast<int64_t>(corr));
    } else {
        // Late (nobody read the clock before this record expired), after a suspend, or the
        // TSC went backward: restart on CLOCK_MONOTONIC now, or, if this record may already
        // have given more (it can be at most about two periods ahead), stand still until
        // CLOCK_MONOTONIC gets there.
        if (s.mono >= top) {
            n.start = s.tsc;
            n.ns = s.mono;
        } else {
            n.start = s.tsc + cycles_for(top - s.mono, g_rate);
            n.ns = top;
        }
    }
    if (s.tsc >= c.start) {
        // Readers before the new start keep this record's current segment, clamped.
        n.lo = c.start;
        n.prev_ns = c.ns;
        n.prev_mult = c.mult;
        n.prev_end = c.expire;
    } else {
        // The TSC went backward: before the new start, stand at this record's ceiling.
        n.lo = 0;
        n.prev_ns = top;
        n.prev_mult = 0;
        n.prev_end = 0;
    }
    n.mult = mult;
    n.refine = n.start + g_period;
    n.expire = n.start + 2 * g_period;
    publish(gen, n);
    g_refiner.store(0, std::memory_order_release);
}

// ---------------------------------------------------------------------------------------------
// Start-up

bool invariant_tsc()
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(d & (1u << 4))) return false;  // TSC
    if (__get_cpuid_max(0x80000000, nullptr) < 0x80000007) return false;
    __cpuid(0x80000007, a, b, c, d);
    return d & (1u << 8);  // "TscInvariant": constant rate in every P-, C- and T-state
}

bool has_rdtscp()
{
    unsigned a, b, c, d;
    return __get_cpuid(0x80000001, &a, &b, &c, &d) && (d & (1u << 27));
}

// The kernel's current clocksource. The CPUID bit says the TSC's rate is constant on each
// CPU; it does not say the TSCs of all CPUs agree, nor that they survive what the hypervisor
// does. The kernel checks both (TSC_ADJUST, its sync test at CPU bring-up, the clocksource
// watchdog, hypervisor hints) and falls back to another clocksource (hpet, acpi_pm,
// kvm-clock...) when it does not trust the TSC: then neither does liveprobe, because a thread
// that moves to another CPU could read an earlier value there. When the kernel uses the TSC,
// CLOCK_MONOTONIC is itself a linear function of it, which is what the calibration measures.
bool kernel_uses_tsc()
{
    int fd = open("/sys/devices/system/clocksource/clocksource0/current_clocksource",
                  O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;  // not knowing is not trusting
    char buf[32] = {};
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    return n >= 3 && std::strncmp(buf, "tsc", 3) == 0 && (n == 3 || buf[3] == '\n');
}

// A process can make rdtsc fault (prctl PR_SET_TSC, seccomp sandboxes do).
bool tsc_readable()
{
    int mode = 0;
    if (prctl(PR_GET_TSC, &mode, 0, 0, 0) != 0) return true;
    return mode != PR_TSC_SIGSEGV;
}

// The TSC frequency the CPU or the hypervisor states, in Hz; 0 when none.
uint64_t stated_frequency()
{
    unsigned a, b, c, d;
    const unsigned max = __get_cpuid_max(0, nullptr);
    if (max >= 0x15) {
        __cpuid_count(0x15, 0, a, b, c, d);  // TSC = crystal (ecx Hz) * ebx / eax
        if (a != 0 && b != 0 && c != 0) return uint64_t{c} * b / a;
        if (a != 0 && b != 0 && max >= 0x16) {
            // No crystal frequency: the kernel takes the base frequency of leaf 0x16 (MHz).
            unsigned base, e, f, g;
            __cpuid_count(0x16, 0, base, e, f, g);
            if (base != 0) return uint64_t{base} * 1'000'000;
        }
    }
    // Hypervisors (VMware, KVM with QEMU's vmware-cpuid-freq) give it in kHz at 0x40000010.
    __cpuid(1, a, b, c, d);
    if (c & (1u << 31)) {
        __cpuid(0x40000000, a, b, c, d);
        if (a >= 0x40000010) {
            __cpuid(0x40000010, a, b, c, d);
            if (a != 0) return uint64_t{a} * 1000;
        }
    }
    return 0;
}

// __vdso_clock_gettime from the vDSO's dynamic symbol table (as the kernel's parse_vdso.c).
ClockGettime find_vdso_clock_gettime()
{
    const uintptr_t base = getauxval(AT_SYSINFO_EHDR);
    if (!base) return nullptr;
    const auto *eh = reinterpret_cast<const Elf64_Ehdr *>(base);
    if (std::memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64)
        return nullptr;
    const auto *ph = reinterpret_cast<const Elf64_Phdr *>(base + eh->e_phoff);
    uintptr_t bias = 0;
    bool loaded = false;
    const Elf64_Dyn *dyn = nullptr;
    for (unsigned i = 0; i < eh->e_phnum; ++i) {
        if (ph[i].p_type == PT_LOAD && !loaded) {
            bias = base + ph[i].p_offset - ph[i].p_vaddr;
            loaded = true;
        } else if (ph[i].p_type == PT_DYNAMIC) {
            dyn = reinterpret_cast<const Elf64_Dyn *>(base + ph[i].p_offset);
        }
    }
    if (!loaded || !dyn) return nullptr;
    const Elf64_Sym *symtab = nullptr;
    const char *strtab = nullptr;
    const uint32_t *hash = nullptr, *gnu_hash = nullptr;
    for (const Elf64_Dyn *d = dyn; d->d_tag != DT_NULL; ++d) {
        const uintptr_t p = bias + d->d_un.d_ptr;
        if (d->d_tag == DT_SYMTAB) symtab = reinterpret_cast<const Elf64_Sym *>(p);
        if (d->d_tag == DT_STRTAB) strtab = reinterpret_cast<const char *>(p);
        if (d->d_tag == DT_HASH) hash = reinterpret_cast<const uint32_t *>(p);
        if (d->d_tag == DT_GNU_HASH) gnu_hash = reinterpret_cast<const uint32_t *>(p);
    }
    if (!symtab || !strtab || (!hash && !gnu_hash)) return nullptr;
    uint32_t count = 0;
    if (hash) {
        count = hash[1];  // nchain: one per symbol
    } else {
        // The highest symbol a bucket starts at, then to the end of its chain.
        const uint32_t nbuckets = gnu_hash[0], symoffset = gnu_hash[1], bloom = gnu_hash[2];
        const uint32_t *buckets = gnu_hash + 4 + 2 * bloom;  // 64-bit bloom words
        const uint32_t *chain = buckets + nbuckets;
        for (uint32_t i = 0; i < nbuckets; ++i)
            if (buckets[i] + 1 > count) count = buckets[i] + 1;
        if (count > symoffset)
            while (!(chain[count - 1 - symoffset] & 1)) ++count;
    }
    for (uint32_t i = 0; i < count; ++i) {
        const Elf64_Sym &s = symtab[i];
        if (ELF64_ST_TYPE(s.st_info) != STT_FUNC || s.st_shndx == SHN_UNDEF) continue;
        if (std::strcmp(strtab + s.st_name, "__vdso_clock_gettime") == 0)
            return reinterpret_cast<ClockGettime>(bias + s.st_value);
    }
    return nullptr;
}

// Calibrates the TSC against CLOCK_MONOTONIC (rate from the CPU's stated frequency, or
// measured over half a millisecond; the first refinements correct it), anchors it there, and
// switches to it. Returns false to stay on clock_gettime.
bool start_tsc(uint8_t source)
{
    const uint64_t hz = stated_frequency();
    Sample first = sample(source);
    uint64_t rate;
    if (hz != 0) {
        rate = static_cast<uint64_t>((static_cast<unsigned __int128>(1'000'000'000) << 32) / hz);
    } else {
        while (clock_ns(CLOCK_MONOTONIC) - first.mono < 500'000) {
        }
        const Sample second = sample(source);
        if (second.tsc <= first.tsc || second.mono <= first.mono) return false;
        rate = static_cast<uint64_t>(
            (static_cast<unsigned __int128>(second.mono - first.mono) << 32) /
            (second.tsc - first.tsc));
    }
    // Between 100 MHz and 20 GHz, or something is wrong.
    constexpr uint64_t kMinRate = (uint64_t{1} << 32) / 20, kMaxRate = uint64_t{10} << 32;
    if (rate < kMinRate || rate > kMaxRate) return false;

    const Sample anchor = sample(source);
    g_rate = rate;
    g_base_tsc = first.tsc;
    g_base_mono = first.mono;
    g_boot_offset = boot_offset();
    g_period = cycles_for(62'500'000, rate);  // 1/16 s
    g_lease = 16 * g_period;
    g_step = 2 * (scale(g_period, rate) >> kSlewShift);  // two periods of the largest slew

    Conversion &c = g_conv[0];
    c.start.store(anchor.tsc, std::memory_order_relaxed);
    c.ns.store(anchor.mono, std::memory_order_relaxed);
    c.mult.store(rate, std::memory_order_relaxed);
    c.refine.store(anchor.tsc + g_period, std::memory_order_relaxed);
    c.lo.store(anchor.tsc, std::memory_order_relaxed);
    c.prev_ns.store(anchor.mono, std::memory_order_relaxed);
    c.prev_mult.store(rate, std::memory_order_relaxed);
    c.prev_end.store(anchor.tsc, std::memory_order_relaxed);
    c.expire.store(anchor.tsc + 2 * g_period, std::memory_order_relaxed);
    g_gen.store(0, std::memory_order_release);
    pthread_atfork(nullptr, nullptr, [] { g_refiner.store(0, std::memory_order_relaxed); });
    g_source.store(source, std::memory_order_release);
    return true;
}

uint8_t choose()
{
    g_vdso_clock_gettime.store(find_vdso_clock_gettime(), std::memory_order_relaxed);
    const char *env = secure_getenv("LIVEPROBE_CLOCK");
    if (env && std::strcmp(env, "clock_gettime") == 0) return kClockGettime;
    if (!invariant_tsc() || !kernel_uses_tsc() || !tsc_readable()) return kClockGettime;
    const uint8_t source = has_rdtscp() ? kTscRdtscp : kTscLfence;
    return start_tsc(source) ? source : uint8_t{kClockGettime};
}

[[maybe_unused]] const uint8_t g_chosen = [] {
    const uint8_t s = choose();
    if (s == kClockGettime) g_source.store(kClockGettime, std::memory_order_release);
    return s;
}();

}  // namespace

uint64_t monotonic_ns() noexcept { return clock_ns(CLOCK_MONOTONIC); }

uint64_t slow_ns(uint64_t t) noexcept
{
    const uint8_t source = g_source.load(std::memory_order_relaxed);
    Plain c;
    load_current(&c);
    if (t >= c.refine || t < c.lo) refine(source);
    // Read the TSC again after the record (as the fast path does), and clamp: if no new record
    // came (another thread is refining), this one stops at its ceiling.
    for (;;) {
        const uint32_t gen = load_current(&c);
        const uint64_t now = tsc_ordered(source);
        std::atomic_thread_fence(std::memory_order_acquire);
        if (g_gen.load(std::memory_order_relaxed) == gen) return value_at(c, now);
    }
}

const char *source_name() noexcept
{
    return g_source.load(std::memory_order_relaxed) >= kTscLfence ? "tsc" : "clock_gettime";
}

}  // namespace liveprobe::os::clock

extern "C" {

LIVEPROBE_API uint64_t liveprobe_ktime_ns(void) { return liveprobe::os::clock::ktime_ns(); }

LIVEPROBE_API const char *liveprobe_clock_source(void)
{
    return liveprobe::os::clock::source_name();
}

}  // extern "C"
