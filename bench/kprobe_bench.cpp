// Cost of a probe hit on the breakpoint path, and of registering a probe.
//
// Each benchmark calls one noinline function per iteration and reports items/s (calls per second);
// the time per iteration is the cost of one call, probe included. See bench/README.md.
#include <liveprobe/kprobes.h>

#include <benchmark/benchmark.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace {

// The probed function. The empty asm keeps the compiler from proving anything about its body
// (or dropping the call); noinline keeps it a real function with a real first instruction.
extern "C" __attribute__((noinline)) long bench_target(long x)
{
    asm volatile("" : "+r"(x));
    return x + 1;
}

int empty_pre(kprobe *, pt_regs *) { return 0; }
void empty_post(kprobe *, pt_regs *, unsigned long) {}

// Registers p or aborts the benchmark with liveprobe's reason.
bool arm(benchmark::State &state, kprobe *p)
{
    int err = register_kprobe(p);
    if (err != 0) {
        state.SkipWithError(liveprobe_strerror(err));
        return false;
    }
    return true;
}

void call_loop(benchmark::State &state)
{
    long x = 0;
    for (auto _ : state) {
        x = bench_target(x);
        benchmark::DoNotOptimize(x);
    }
    state.SetItemsProcessed(state.iterations());
}

void BM_Unprobed(benchmark::State &state) { call_loop(state); }

void BM_ProbePre(benchmark::State &state)
{
    kprobe p{};
    p.addr = reinterpret_cast<kprobe_opcode_t *>(&bench_target);
    p.pre_handler = empty_pre;
    if (!arm(state, &p)) return;
    call_loop(state);
    unregister_kprobe(&p);
}

void BM_ProbePrePost(benchmark::State &state)
{
    kprobe p{};
    p.addr = reinterpret_cast<kprobe_opcode_t *>(&bench_target);
    p.pre_handler = empty_pre;
    p.post_handler = empty_post;
    if (!arm(state, &p)) return;
    call_loop(state);
    unregister_kprobe(&p);
}

void BM_LibcUnprobed(benchmark::State &state)
{
    for (auto _ : state) benchmark::DoNotOptimize(getppid());
    state.SetItemsProcessed(state.iterations());
}

void BM_LibcProbePre(benchmark::State &state)
{
    kprobe p{};
    p.symbol_name = "getppid";
    p.pre_handler = empty_pre;
    if (!arm(state, &p)) return;
    for (auto _ : state) benchmark::DoNotOptimize(getppid());
    state.SetItemsProcessed(state.iterations());
    unregister_kprobe(&p);
}

// One register_kprobe + unregister_kprobe pair per iteration (by address: no symbol lookup).
void BM_RegisterUnregister(benchmark::State &state)
{
    for (auto _ : state) {
        kprobe p{};
        p.addr = reinterpret_cast<kprobe_opcode_t *>(&bench_target);
        p.pre_handler = empty_pre;
        if (!arm(state, &p)) return;
        unregister_kprobe(&p);
    }
    state.SetItemsProcessed(state.iterations());
}

// The same by symbol name, which adds the lookup.
void BM_RegisterUnregisterByName(benchmark::State &state)
{
    for (auto _ : state) {
        kprobe p{};
        p.symbol_name = "bench_target";
        p.pre_handler = empty_pre;
        if (!arm(state, &p)) return;
        unregister_kprobe(&p);
    }
    state.SetItemsProcessed(state.iterations());
}

BENCHMARK(BM_Unprobed);
BENCHMARK(BM_ProbePre);
BENCHMARK(BM_ProbePrePost);
BENCHMARK(BM_LibcUnprobed);
BENCHMARK(BM_LibcProbePre);
BENCHMARK(BM_RegisterUnregister);
BENCHMARK(BM_RegisterUnregisterByName);

}  // namespace
