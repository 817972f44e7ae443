#include "os/linux/stack_regions.hpp"

#include <signal.h>
#include <ucontext.h>

#include <atomic>
#include <cstdarg>

#include "os/linux/interpose.hpp"

#define LP_EXPORT extern "C" __attribute__((visibility("default")))

namespace liveprobe::os {
namespace {

// Append-only; when full, the oldest entries are overwritten (a stack that old is most likely
// gone). Each entry is written with a sequence so a reader never pairs a lo with another hi.
constexpr uint32_t kMax = 4096;
struct Range {
    std::atomic<uint32_t> seq{0};
    std::atomic<uint64_t> lo{0}, hi{0};
};
Range g_ranges[kMax];

bool read_range(Range &r, uint64_t *lo, uint64_t *hi) noexcept
{
    for (int tries = 0; tries < 100; ++tries) {
        uint32_t s1 = r.seq.load(std::memory_order_acquire);
        if (s1 & 1) continue;
        *lo = r.lo.load(std::memory_order_relaxed);
        *hi = r.hi.load(std::memory_order_relaxed);
        std::atomic_thread_fence(std::memory_order_acquire);
        if (r.seq.load(std::memory_order_relaxed) == s1) return true;
    }
    return false;
}

}  // namespace

std::atomic<uint32_t> g_stack_regions{0};

void add_stack_region(uint64_t lo, uint64_t hi) noexcept
{
    if (hi <= lo) return;
    uint32_t n = g_stack_regions.load(std::memory_order_relaxed);
    // The same range again (a coroutine stack reused by makecontext): nothing to add.
    for (uint32_t i = 0; i < n && i < kMax; ++i) {
        uint64_t l, h;
        Range &r = g_ranges[(n - 1 - i) % kMax];
        if (read_range(r, &l, &h) && l == lo && h == hi) return;
        if (i >= 64) break;
    }
    uint32_t idx = g_stack_regions.fetch_add(1, std::memory_order_acq_rel);
    Range &r = g_ranges[idx % kMax];
    r.seq.fetch_add(1, std::memory_order_acq_rel);  // odd: writing
    r.lo.store(lo, std::memory_order_relaxed);
    r.hi.store(hi, std::memory_order_relaxed);
    r.seq.fetch_add(1, std::memory_order_release);
}

uint32_t stack_region_lookup(uint64_t addr) noexcept
{
    uint32_t n = g_stack_regions.load(std::memory_order_acquire);
    uint32_t seen = n < kMax ? n : kMax;
    for (uint32_t i = 0; i < seen; ++i) {
        uint32_t idx = n - 1 - i;
        uint64_t lo, hi;
        if (read_range(g_ranges[idx % kMax], &lo, &hi) && addr >= lo && addr < hi) return idx + 1;
    }
    return 0;
}

namespace {
using makecontext_fn = void (*)(ucontext_t *, void (*)(), int, ...);
using sigaltstack_fn = int (*)(const stack_t *, stack_t *);
std::atomic<makecontext_fn> g_real_makecontext{nullptr};
std::atomic<sigaltstack_fn> g_real_sigaltstack{nullptr};

// At load too: sigaltstack may first be called from a signal handler (dlsym is not
// async-signal-safe).
[[gnu::constructor]] void resolve_at_load()
{
    next_symbol(g_real_makecontext, "makecontext");
    next_symbol(g_real_sigaltstack, "sigaltstack");
}
}  // namespace

}  // namespace liveprobe::os

using namespace liveprobe;

// makecontext's arguments are forwarded as they were passed: up to 16 (x86-64's glibc takes
// each as a 64-bit value).
LP_EXPORT void makecontext(ucontext_t *ucp, void (*func)(), int argc, ...) noexcept
{
    long a[16] = {};
    va_list ap;
    va_start(ap, argc);
    for (int i = 0; i < argc && i < 16; ++i) a[i] = va_arg(ap, long);
    va_end(ap);
    if (ucp) {
        auto lo = reinterpret_cast<uint64_t>(ucp->uc_stack.ss_sp);
        os::add_stack_region(lo, lo + ucp->uc_stack.ss_size);
    }
    auto real = os::next_symbol(os::g_real_makecontext, "makecontext");
    real(ucp, func, argc, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11],
         a[12], a[13], a[14], a[15]);
}

LP_EXPORT int sigaltstack(const stack_t *ss, stack_t *old) noexcept
{
    auto real = os::next_symbol(os::g_real_sigaltstack, "sigaltstack");
    int r = real(ss, old);
    if (r == 0 && ss && !(ss->ss_flags & SS_DISABLE)) {
        auto lo = reinterpret_cast<uint64_t>(ss->ss_sp);
        os::add_stack_region(lo, lo + ss->ss_size);
    }
    return r;
}
