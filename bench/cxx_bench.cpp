// The C++ API's typed probes against their C counterparts (include/liveprobe/liveprobe.hpp):
// ns per call of an int(int, int) function carrying an entry probe or a return probe, built
// with the C API (BM_CxxEntryC, BM_CxxReturnC) and as a typed probe (BM_CxxEntryTyped,
// BM_CxxReturnTyped) doing the same work. The requirement is that a typed probe costs what its
// C counterpart costs (within 10 %); bench/programs/cxx_cycles.cpp measures the four side by
// side in one run, which this noisy machine disturbs far less. See bench/README.md.
#include <liveprobe/kprobes.h>
#include <liveprobe/liveprobe.hpp>

#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>

// The probed function. noipa: a real function (no inlining, no cloning, no identical-code
// folding, callers assume nothing of it); the empty asm keeps its body. The body
// (lea (%rdi,%rsi),%eax; imul %esi,%eax; ret) has 6 bytes before the ret, room for the jump
// path's jmp (a + b alone is 4 bytes with the ret: breakpoint path only). Called with b = 1 it
// returns a + 1.
extern "C" __attribute__((noipa)) int cxx_bench_target(int a, int b)
{
    asm volatile("" : "+r"(a));
    return (a + b) * b;
}

namespace {

// ---- the work the handlers do (the same in both APIs) ------------------------------------------

#include "cxx_handlers.hpp"

// ---- common loop and checks ---------------------------------------------------------------------

// Calls cxx_bench_target in a loop; the result must be the sum of the calls.
void call_loop(benchmark::State &state)
{
    int x = 0;
    for (auto _ : state) {
        x = cxx_bench_target(x, 1);
        benchmark::DoNotOptimize(x);
    }
    if (x != static_cast<int>(state.iterations())) state.SkipWithError("wrong results");
    state.SetItemsProcessed(state.iterations());
}

// Before / after the loop: the probe's hits must have grown by one per call; reports
// `optimized`.
struct HitCheck {
    const kprobe *kp;
    unsigned long before = 0;
    explicit HitCheck(benchmark::State &state, const kprobe *p) : kp(p)
    {
        liveprobe_info info{};
        liveprobe_kprobe_info(kp, &info);
        before = info.hits;
        state.counters["optimized"] = info.optimized ? 1 : 0;
        if (!info.optimized)
            state.SetLabel(std::string("not optimized: ") +
                           (info.why_not_optimized ? info.why_not_optimized : "(no reason)"));
    }
    void check(benchmark::State &state) const
    {
        liveprobe_info info{};
        liveprobe_kprobe_info(kp, &info);
        if (info.hits - before != static_cast<unsigned long>(state.iterations()))
            state.SkipWithError("the handler did not run once per call");
    }
};

void BM_CxxUnprobed(benchmark::State &state) { call_loop(state); }

// ---- entry probe: C kprobe, empty pre_handler / typed, empty handler taking (int, int) -----------

void BM_CxxEntryC(benchmark::State &state)
{
    kprobe p{};
    p.addr = reinterpret_cast<kprobe_opcode_t *>(&cxx_bench_target);
    p.pre_handler = c_empty_pre;
    if (int err = register_kprobe(&p); err != 0) {
        state.SkipWithError(liveprobe_strerror(err));
        return;
    }
    HitCheck hits(state, &p);
    call_loop(state);
    hits.check(state);
    unregister_kprobe(&p);
}

void BM_CxxEntryTyped(benchmark::State &state)
{
    auto p = liveprobe::probe(&cxx_bench_target).on_entry([](int, int) {}).attach();
    if (!p) {
        static std::string msg;
        msg = p.error().message();
        state.SkipWithError(msg.c_str());
        return;
    }
    HitCheck hits(state, p->c_kprobe());
    call_loop(state);
    hits.check(state);
}

// ---- return probe: entry stamps a slot, return adds return value - stamp -------------------------

void check_total(benchmark::State &state)
{
    // Sum over calls i (0-based) of (return value i + 1) - stamp (g_tick at the call): with
    // g_tick starting at 0 that is 1 per call.
    if (g_total != static_cast<std::uint64_t>(state.iterations()))
        state.SkipWithError("the return handlers did not see every call");
}

void BM_CxxReturnC(benchmark::State &state)
{
    kretprobe rp{};
    rp.kp.addr = reinterpret_cast<kprobe_opcode_t *>(&cxx_bench_target);
    rp.entry_handler = c_stamp_entry;
    rp.handler = c_sum_return;
    rp.data_size = sizeof(std::uint64_t);
    if (int err = register_kretprobe(&rp); err != 0) {
        state.SkipWithError(liveprobe_strerror(err));
        return;
    }
    g_tick = g_total = 0;
    HitCheck hits(state, &rp.kp);
    call_loop(state);
    hits.check(state);
    unregister_kretprobe(&rp);
    if (rp.nmissed != 0) state.SkipWithError("nmissed");
    check_total(state);
}

void BM_CxxReturnTyped(benchmark::State &state)
{
    auto p = liveprobe::probe(&cxx_bench_target)
                 .with_slot<Stamp>()
                 .on_entry([](auto &, Stamp &s) { s.t0 = g_tick++; })
                 .on_return([](auto &x, Stamp &s) {
                     // value() is for calls that returned: this handler (it takes the Exit)
                     // also gets the unwound ones, with no registers.
                     if (x.returned()) g_total += static_cast<std::uint64_t>(x.value()) - s.t0;
                 })
                 .attach();
    if (!p) {
        static std::string msg;
        msg = p.error().message();
        state.SkipWithError(msg.c_str());
        return;
    }
    g_tick = g_total = 0;
    HitCheck hits(state, p->c_kprobe());
    call_loop(state);
    hits.check(state);
    if (p->counters().missed != 0) state.SkipWithError("missed");
    p->reset();
    check_total(state);
}

}  // namespace

BENCHMARK(BM_CxxUnprobed);
BENCHMARK(BM_CxxEntryC);
BENCHMARK(BM_CxxEntryTyped);
BENCHMARK(BM_CxxReturnC);
BENCHMARK(BM_CxxReturnTyped);
