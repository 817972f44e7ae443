// Return probes: ns per call of a function carrying a kretprobe (see bench/README.md).
#include <liveprobe/kprobes.h>
#include <liveprobe/ktime.h>

#include <benchmark/benchmark.h>

#include <atomic>

extern "C" __attribute__((noinline)) long kret_bench_target(long x)
{
    asm volatile("" : "+r"(x));
    return x + 1;
}

namespace {

std::atomic<long> g_returns{0};

int empty_entry(kretprobe_instance *, pt_regs *) { return 0; }
int empty_return(kretprobe_instance *, pt_regs *) { return 0; }

// Calls kret_bench_target in a loop with a kretprobe on it; checks every call got its return
// handler (counted by a counting handler run once after the loop).
void kret_loop(benchmark::State &state, kretprobe_handler_t entry, kretprobe_handler_t ret, size_t data)
{
    kretprobe rp{};
    rp.kp.addr = reinterpret_cast<kprobe_opcode_t *>(&kret_bench_target);
    rp.entry_handler = entry;
    rp.handler = ret;
    rp.data_size = data;
    if (register_kretprobe(&rp) != 0) {
        state.SkipWithError(liveprobe_strerror(-1));
        return;
    }
    liveprobe_info info{};
    liveprobe_kprobe_info(&rp.kp, &info);
    long x = 0;
    for (auto _ : state) {
        x = kret_bench_target(x);
        benchmark::DoNotOptimize(x);
    }
    liveprobe_info after{};
    liveprobe_kprobe_info(&rp.kp, &after);
    unregister_kretprobe(&rp);
    if (x != static_cast<long>(state.iterations())) state.SkipWithError("wrong results");
    if (after.hits != info.hits + state.iterations()) state.SkipWithError("an entry was missed");
    if (rp.nmissed != 0) state.SkipWithError("nmissed");
    state.counters["optimized"] = info.optimized;
    state.SetItemsProcessed(state.iterations());
}

void BM_KretUnprobed(benchmark::State &state)
{
    long x = 0;
    for (auto _ : state) {
        x = kret_bench_target(x);
        benchmark::DoNotOptimize(x);
    }
    state.SetItemsProcessed(state.iterations());
}

void BM_KretEmpty(benchmark::State &state) { kret_loop(state, empty_entry, empty_return, 0); }

// The seeds' use: the entry handler stamps the time into ri->data, the return handler computes
// the call's duration (here added up, and checked to be non-zero after the loop).
uint64_t g_total_ns;
int stamp_entry(kretprobe_instance *ri, pt_regs *)
{
    *reinterpret_cast<uint64_t *>(ri->data) = liveprobe_ktime_ns();
    return 0;
}
int duration_return(kretprobe_instance *ri, pt_regs *)
{
    g_total_ns += liveprobe_ktime_ns() - *reinterpret_cast<uint64_t *>(ri->data);
    return 0;
}

void BM_KretTimingTheCall(benchmark::State &state)
{
    g_total_ns = 0;
    kret_loop(state, stamp_entry, duration_return, sizeof(uint64_t));
    if (state.iterations() > 0 && g_total_ns == 0) state.SkipWithError("no duration measured");
}

// The same two clock reads and the same sum around the same call, with no probe: what the
// seeds' use costs before the probe costs anything (the floor under BM_KretTimingTheCall).
void BM_KretTimingWithoutProbe(benchmark::State &state)
{
    g_total_ns = 0;
    long x = 0;
    for (auto _ : state) {
        const uint64_t start = liveprobe_ktime_ns();
        x = kret_bench_target(x);
        g_total_ns += liveprobe_ktime_ns() - start;
        benchmark::DoNotOptimize(x);
    }
    if (state.iterations() > 0 && g_total_ns == 0) state.SkipWithError("no duration measured");
    state.SetItemsProcessed(state.iterations());
}

}  // namespace

BENCHMARK(BM_KretUnprobed);
BENCHMARK(BM_KretEmpty);
BENCHMARK(BM_KretTimingTheCall);
BENCHMARK(BM_KretTimingWithoutProbe);
