// Typed probes (the C++ API, include/liveprobe/liveprobe.hpp) against their C counterparts, in
// TSC cycles per call, measured in one run: the requirement is that a typed probe and a typed
// return probe cost what the C kprobe and kretprobe doing the same work cost (within 10 %).
//
// Five identical noipa functions int f(int, int), each with its own probe registered for the
// whole run (f0 none, f1 a C kprobe with an empty pre_handler, f2 a typed entry probe with an
// empty handler taking (int, int), f3 a C kretprobe whose entry handler stamps a counter into
// ri->data and whose return handler adds regs_return_value - stamp to a total, f4 the same as a
// typed return probe with a slot). Rounds go round-robin over the five (one batch of calls of
// each per round, in the same loop through a function pointer), so a slow minute of this
// shared machine falls on all of them alike; the figure of each is the minimum over the rounds
// of its batch's cycles per call. Built as liveprobe-cxx-cycles:
//   build/bench/liveprobe-cxx-cycles [rounds (2000)] [calls per batch (10000)]
#include <liveprobe/kprobes.h>
#include <liveprobe/liveprobe.hpp>
#include <x86intrin.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

// The functions, identical; noipa: no inlining, cloning or identical-code folding, so each is
// its own code at its own address; aligned: the same alignment for all five. The body
// (lea (%rdi,%rsi),%eax; imul %esi,%eax; ret) is 6 bytes before the ret, room for the jump
// path's 5-byte jmp (a + b alone, lea + ret, is 4 bytes: breakpoint path only). Called with
// b = 1 it returns a + 1.
#define LP_CXX_TARGET(name)                                                              \
    extern "C" __attribute__((noipa, aligned(64))) int name(int a, int b)                \
    {                                                                                    \
        asm volatile("" : "+r"(a));                                                      \
        return (a + b) * b;                                                              \
    }
LP_CXX_TARGET(cc_f0)
LP_CXX_TARGET(cc_f1)
LP_CXX_TARGET(cc_f2)
LP_CXX_TARGET(cc_f3)
LP_CXX_TARGET(cc_f4)

namespace {

#include "../cxx_handlers.hpp"

// One batch of `n` calls of f through a pointer (the same loop for every variant): TSC cycles
// per call.
__attribute__((noipa)) double batch(int (*f)(int, int), int n)
{
    int x = 0;
    std::uint64_t t0 = __rdtsc();
    for (int i = 0; i < n; ++i) x = f(x, 1);
    std::uint64_t t = __rdtsc() - t0;
    if (x != n) {
        std::fprintf(stderr, "liveprobe-cxx-cycles: wrong result %d for %d calls\n", x, n);
        std::exit(1);
    }
    return double(t) / n;
}

void fail(const char *what, const char *why)
{
    std::fprintf(stderr, "liveprobe-cxx-cycles: %s: %s\n", what, why);
    std::exit(1);
}

bool optimized(const kprobe *kp)
{
    liveprobe_info info{};
    return liveprobe_kprobe_info(kp, &info) == 0 && info.optimized;
}
const char *why_not(const kprobe *kp)
{
    liveprobe_info info{};
    if (liveprobe_kprobe_info(kp, &info) != 0) return "not registered";
    return info.why_not_optimized ? info.why_not_optimized : "";
}
unsigned long hits(const kprobe *kp)
{
    liveprobe_info info{};
    liveprobe_kprobe_info(kp, &info);
    return info.hits;
}

}  // namespace

int main(int argc, char **argv)
{
    const int rounds = argc > 1 ? std::atoi(argv[1]) : 2000;
    const int n = argc > 2 ? std::atoi(argv[2]) : 10000;
    if (rounds <= 0 || n <= 0) fail("usage", "liveprobe-cxx-cycles [rounds] [calls per batch]");

    // f1: C kprobe, empty pre_handler.
    kprobe kp{};
    kp.addr = reinterpret_cast<kprobe_opcode_t *>(&cc_f1);
    kp.pre_handler = c_empty_pre;
    if (int err = register_kprobe(&kp); err != 0) fail("register_kprobe", liveprobe_strerror(err));

    // f2: typed entry probe, empty handler taking the arguments by value.
    auto typed_entry = liveprobe::probe(&cc_f2).on_entry([](int, int) {}).attach();
    if (!typed_entry) fail("typed entry probe", typed_entry.error().message().c_str());

    // f3: C kretprobe: the entry stamps, the return adds return value - stamp.
    kretprobe rp{};
    rp.kp.addr = reinterpret_cast<kprobe_opcode_t *>(&cc_f3);
    rp.entry_handler = c_stamp_entry;
    rp.handler = c_sum_return;
    rp.data_size = sizeof(std::uint64_t);
    if (int err = register_kretprobe(&rp); err != 0) fail("register_kretprobe", liveprobe_strerror(err));

    // f4: the same as a typed return probe with a slot.
    auto typed_return = liveprobe::probe(&cc_f4)
                            .with_slot<Stamp>()
                            .on_entry([](auto &, Stamp &s) { s.t0 = g_tick++; })
                            .on_return([](auto &x, Stamp &s) {
                                // value() is for calls that returned: this handler (it takes the Exit)
                                // also gets the unwound ones, with no registers.
                                if (x.returned()) g_total += static_cast<std::uint64_t>(x.value()) - s.t0;
                            })
                            .attach();
    if (!typed_return) fail("typed return probe", typed_return.error().message().c_str());

    struct Variant {
        const char *name;
        int (*f)(int, int);
        const kprobe *kp;  // null: unprobed
        double best = 1e18;
        unsigned long hits0 = 0;
    } v[] = {
        {"unprobed", cc_f0, nullptr},
        {"C kprobe (empty pre_handler)", cc_f1, &kp},
        {"typed entry probe (empty, (int, int))", cc_f2, typed_entry->c_kprobe()},
        {"C kretprobe (stamp, sum)", cc_f3, &rp.kp},
        {"typed return probe (slot: stamp, sum)", cc_f4, typed_return->c_kprobe()},
    };
    constexpr int nv = sizeof v / sizeof v[0];
    for (Variant &x : v)
        if (x.kp) x.hits0 = hits(x.kp);

    // A warm-up round, then the measured ones.
    for (Variant &x : v) batch(x.f, n);
    g_tick = g_total = 0;
    const auto s0 = std::chrono::steady_clock::now();
    const std::uint64_t c0 = __rdtsc();
    for (int r = 0; r < rounds; ++r)
        for (Variant &x : v) {
            g_tick = 0;  // so that each return batch adds exactly n (checked below)
            double c = batch(x.f, n);
            if (c < x.best) x.best = c;
        }
    const std::uint64_t c1 = __rdtsc();
    const auto s1 = std::chrono::steady_clock::now();
    const double ghz = double(c1 - c0) / std::chrono::duration<double, std::nano>(s1 - s0).count();

    // Every call ran its handlers: hits, and the return handlers' total (1 per call of each of
    // the two return probes: call i of a batch returns i + 1 and was stamped i).
    bool ok = true;
    const unsigned long calls = static_cast<unsigned long>(rounds) * n + n;  // with the warm-up
    for (Variant &x : v)
        if (x.kp && hits(x.kp) - x.hits0 != calls) {
            std::fprintf(stderr, "%s: %lu hits for %lu calls\n", x.name, hits(x.kp) - x.hits0, calls);
            ok = false;
        }
    if (rp.nmissed != 0 || typed_return->counters().missed != 0) {
        std::fprintf(stderr, "a return probe missed calls\n");
        ok = false;
    }
    bool all_optimized = true;
    for (Variant &x : v)
        if (x.kp && !optimized(x.kp)) all_optimized = false;

    std::printf("liveprobe-cxx-cycles: %d rounds over %d variants, %d calls per batch; minimum "
                "TSC cycles per call (TSC %.3f GHz)\n", rounds, nv, n, ghz);
    std::printf("%-40s %10s %10s %12s\n", "", "cycles", "ns", "added cyc");
    for (Variant &x : v)
        std::printf("%-40s %10.1f %10.2f %12.1f%s%s\n", x.name, x.best, x.best / ghz, x.best - v[0].best,
                    x.kp && !optimized(x.kp) ? "  NOT optimized: " : "", x.kp ? why_not(x.kp) : "");
    const double entry_ratio = v[2].best / v[1].best, return_ratio = v[4].best / v[3].best;
    const double entry_added = (v[2].best - v[0].best) / (v[1].best - v[0].best);
    const double return_added = (v[4].best - v[0].best) / (v[3].best - v[0].best);
    std::printf("typed / C, entry:  %.3f per call (%.3f of the probe's added cost)%s\n", entry_ratio,
                entry_added, entry_ratio > 1.10 ? "  ** over 10 % **" : "");
    std::printf("typed / C, return: %.3f per call (%.3f of the probe's added cost)%s\n", return_ratio,
                return_added, return_ratio > 1.10 ? "  ** over 10 % **" : "");
    if (!all_optimized) std::printf("some probes are not optimized (jump path)\n");
    if (g_total != 2ul * static_cast<unsigned long>(rounds) * n) {
        std::fprintf(stderr, "return handlers' total %lu, expected %lu\n", (unsigned long)g_total,
                     2ul * static_cast<unsigned long>(rounds) * n);
        ok = false;
    }

    typed_return->reset();
    unregister_kretprobe(&rp);
    typed_entry->reset();
    unregister_kprobe(&kp);
    return ok ? 0 : 1;
}
