// Cost of a probe hit (jump-optimized and breakpoint paths), of registering probes one at a time
// and in batches, and of hits from two threads at once.
//
// Each hit benchmark calls one noinline function per iteration and reports items/s (calls per
// second); the time per iteration is the cost of one call, probe included. Every probe benchmark
// also reports `optimized` (1: hits take the jump path, 0: the breakpoint path). See
// bench/README.md.
#include <liveprobe/kprobes.h>

#include <benchmark/benchmark.h>

#include <dlfcn.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

// The generated functions (bench/gen_functions.cmake, compiled as C).
extern "C" {
extern long (*const lp_gen_table[])(long);
extern const int lp_gen_count;
}

// The mid-function target, written in assembly so the probed instruction is exact:
//   long lp_bench_mid(long a, long b) { return ((a + 1 + b) * 3) ^ a; }
// lp_bench_mid_insn is the second instruction; from there, 10 bytes of plain instructions
// (add, imul, xor) come before the ret, so a jmp rel32 (5 bytes) fits.
asm(R"(
    .text
    .p2align 4
    .globl lp_bench_mid
    .type lp_bench_mid, @function
lp_bench_mid:
    leaq 1(%rdi), %rax
    .globl lp_bench_mid_insn
lp_bench_mid_insn:
    addq %rsi, %rax
    imulq $3, %rax, %rax
    xorq %rdi, %rax
    ret
    .size lp_bench_mid, .-lp_bench_mid
)");
extern "C" long lp_bench_mid(long a, long b);
extern "C" char lp_bench_mid_insn[];

namespace {

// The probed function. The empty asm keeps the compiler from proving anything about its body
// (or dropping the call); noinline keeps it a real function with a real first instruction.
extern "C" __attribute__((noinline)) long bench_target(long x)
{
    asm volatile("" : "+r"(x));
    return x + 1;
}

// The same, probed once for the whole run by the two-thread benchmark (BM_Threads*).
extern "C" __attribute__((noinline)) long bench_target_mt(long x)
{
    asm volatile("" : "+r"(x));
    return x + 1;
}

int empty_pre(kprobe *, pt_regs *) { return 0; }
void empty_post(kprobe *, pt_regs *, unsigned long) {}

// A handler that really calls memcpy (through a volatile pointer: no inlining, no builtin), so
// liveprobe cannot prove it vector-free and saves the whole vector state around it.
alignas(64) char g_src[64] = "liveprobe memcpy handler source buffer";
alignas(64) char g_dst[64];
void *(*volatile g_memcpy)(void *, const void *, size_t) = std::memcpy;
int memcpy_pre(kprobe *, pt_regs *)
{
    g_memcpy(g_dst, g_src, sizeof g_src);
    return 0;
}

liveprobe_info info_of(const kprobe *p)
{
    liveprobe_info info{};
    if (liveprobe_kprobe_info(p, &info) != 0) info.why_not_optimized = "not registered";
    return info;
}

// Registers p or aborts the benchmark with liveprobe's reason.
bool arm(benchmark::State &state, kprobe *p)
{
    int err = register_kprobe(p);
    if (err != 0) {
        state.SkipWithError(liveprobe_strerror(err));
        return false;
    }
    state.counters["optimized"] = info_of(p).optimized ? 1 : 0;
    return true;
}

// After arm(): the probe must (want = true) or must not be optimized; otherwise unregisters it,
// prints why and aborts the benchmark.
bool expect_optimized(benchmark::State &state, kprobe *p, bool want)
{
    liveprobe_info info = info_of(p);
    if (static_cast<bool>(info.optimized) == want) return true;
    static thread_local std::string msg;
    msg = want ? std::string("not optimized: ") +
                     (info.why_not_optimized ? info.why_not_optimized : "(no reason given)")
               : std::string("optimized, but the breakpoint path was asked for");
    std::fprintf(stderr, "%s\n", msg.c_str());
    unregister_kprobe(p);
    state.SkipWithError(msg.c_str());
    return false;
}

// After the loop: every call must have run the handler once.
void check_hits(benchmark::State &state, const kprobe *p, unsigned long before)
{
    unsigned long hits = info_of(p).hits - before;
    if (hits < static_cast<unsigned long>(state.iterations())) {
        static thread_local std::string msg;
        msg = "the handler ran " + std::to_string(hits) + " times for " +
              std::to_string(state.iterations()) + " calls";
        state.SkipWithError(msg.c_str());
    }
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

// A probe on bench_target's first instruction with these handlers, called in a loop.
void probed_loop(benchmark::State &state, kprobe_pre_handler_t pre, kprobe_post_handler_t post,
                 int want_optimized /* -1: either */)
{
    kprobe p{};
    p.addr = reinterpret_cast<kprobe_opcode_t *>(&bench_target);
    p.pre_handler = pre;
    p.post_handler = post;
    // Optimization stays off until the probe is gone: liveprobe_set_optimization(1) optimizes
    // every registered probe that can be (as the kernel's debug.kprobes-optimization sysctl).
    if (want_optimized == 0) liveprobe_set_optimization(0);
    struct Restore {
        bool on;
        ~Restore() { if (on) liveprobe_set_optimization(1); }
    } restore{want_optimized == 0};
    if (!arm(state, &p)) return;
    if (want_optimized >= 0 && !expect_optimized(state, &p, want_optimized == 1)) return;
    unsigned long before = info_of(&p).hits;
    call_loop(state);
    check_hits(state, &p, before);
    unregister_kprobe(&p);
}

// ---- 1. unprobed ------------------------------------------------------------------------------

void BM_Unprobed(benchmark::State &state) { call_loop(state); }

// ---- existing: default registration (optimized when possible) --------------------------------

void BM_ProbePre(benchmark::State &state) { probed_loop(state, empty_pre, nullptr, -1); }
void BM_ProbePrePost(benchmark::State &state) { probed_loop(state, empty_pre, empty_post, -1); }

// ---- 2. optimized entry probe, empty pre_handler ---------------------------------------------

void BM_OptEntryEmpty(benchmark::State &state) { probed_loop(state, empty_pre, nullptr, 1); }

// ---- 3. optimized entry probe, handler calling memcpy (full vector protection) ---------------

void BM_OptEntryMemcpy(benchmark::State &state) { probed_loop(state, memcpy_pre, nullptr, 1); }

// The memcpy handler's own cost, unprobed: BM_OptEntryMemcpy - BM_OptEntryEmpty - this is what
// the vector-state save/restore adds.
void BM_MemcpyHandlerAlone(benchmark::State &state)
{
    for (auto _ : state) {
        benchmark::DoNotOptimize(memcpy_pre(nullptr, nullptr));
        benchmark::ClobberMemory();
    }
    state.SetItemsProcessed(state.iterations());
}

// ---- 4. optimized mid-function probe ---------------------------------------------------------

void BM_MidUnprobed(benchmark::State &state)
{
    long x = 0;
    for (auto _ : state) {
        x = lp_bench_mid(x, 1);
        benchmark::DoNotOptimize(x);
    }
    state.SetItemsProcessed(state.iterations());
}

void BM_OptMidEmpty(benchmark::State &state)
{
    // By name + offset, as a kernel module would write it; the offset is the label's.
    const unsigned long fn = kallsyms_lookup_name("lp_bench_mid");
    if (fn != reinterpret_cast<unsigned long>(&lp_bench_mid)) {
        state.SkipWithError("kallsyms_lookup_name(\"lp_bench_mid\") is wrong");
        return;
    }
    kprobe p{};
    p.symbol_name = "lp_bench_mid";
    p.offset = static_cast<unsigned int>(reinterpret_cast<unsigned long>(lp_bench_mid_insn) - fn);
    p.pre_handler = empty_pre;
    if (!arm(state, &p)) return;
    if (reinterpret_cast<char *>(p.addr) != lp_bench_mid_insn) {
        unregister_kprobe(&p);
        state.SkipWithError("register_kprobe resolved another address");
        return;
    }
    if (!expect_optimized(state, &p, true)) return;
    unsigned long before = info_of(&p).hits;
    long x = 0;
    for (auto _ : state) {
        x = lp_bench_mid(x, 1);
        benchmark::DoNotOptimize(x);
    }
    state.SetItemsProcessed(state.iterations());
    check_hits(state, &p, before);
    unregister_kprobe(&p);
}

// ---- 5. breakpoint probe (optimization off while it is registered) ---------------------------

void BM_BreakpointEmpty(benchmark::State &state) { probed_loop(state, empty_pre, nullptr, 0); }

// The floor of the breakpoint path (issue 31, part 7): an int3 and the kernel's SIGTRAP round
// trip alone, in this process, through a handler that does nothing (the kernel reports the trap
// after the int3: returning steps past it), installed SA_SIGINFO | SA_NODEFER with libc's own
// sigaction (liveprobe's interposer would chain it behind its own handler). liveprobe's
// handler is put back after. BM_BreakpointEmpty / BM_RawInt3 is the trap path's overhead.
void raw_trap(int, siginfo_t *, void *) {}

void BM_RawInt3(benchmark::State &state)
{
    using SigactionFn = int (*)(int, const struct sigaction *, struct sigaction *);
    void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    auto libc_sigaction = libc ? reinterpret_cast<SigactionFn>(dlsym(libc, "sigaction")) : nullptr;
    if (!libc_sigaction) {
        state.SkipWithError("libc's sigaction not found");
        return;
    }
    struct sigaction raw {}, saved {};
    raw.sa_sigaction = raw_trap;
    raw.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&raw.sa_mask);
    libc_sigaction(SIGTRAP, &raw, &saved);
    for (auto _ : state) asm volatile("int3" ::: "memory");
    libc_sigaction(SIGTRAP, &saved, nullptr);
    dlclose(libc);
    state.SetItemsProcessed(state.iterations());
}

// ---- existing: libc ----------------------------------------------------------------------------

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

// ---- existing: one register_kprobe + unregister_kprobe pair per iteration ---------------------

// By address: no symbol lookup. Registration optimizes the probe (stopping the other threads).
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

// The same with optimization off: the breakpoint path's registration alone.
void BM_RegisterUnregisterBreakpoint(benchmark::State &state)
{
    liveprobe_set_optimization(0);
    for (auto _ : state) {
        kprobe p{};
        p.addr = reinterpret_cast<kprobe_opcode_t *>(&bench_target);
        p.pre_handler = empty_pre;
        if (!arm(state, &p)) break;
        unregister_kprobe(&p);
    }
    liveprobe_set_optimization(1);
    state.SetItemsProcessed(state.iterations());
}

// ---- 6. register_kprobes() of 1, 100, 10,000 probes on distinct generated functions ----------
//
// Time = one register_kprobes() call (ms). unregister_kprobes() runs outside the timed region;
// its own time is the counter unregister_ms. `optimized` is how many of the batch ended up
// optimized (average over iterations); items/s is probes registered per second. Later
// iterations reuse the detours the first one built (unregistering retires them; registering the
// same probes takes them back): `first_ms` is the first call alone, which builds them.

void BM_RegisterBatch(benchmark::State &state)
{
    const int n = static_cast<int>(state.range(0));
    const bool optimize = state.range(1) != 0;
    if (n > lp_gen_count) {
        state.SkipWithError("not enough generated functions");
        return;
    }
    std::vector<kprobe> probes(static_cast<size_t>(n));
    std::vector<kprobe *> ptrs(static_cast<size_t>(n));
    double optimized = 0, unregister_s = 0, first_s = -1;
    if (!optimize) liveprobe_set_optimization(0);
    for (auto _ : state) {
        state.PauseTiming();
        for (int i = 0; i < n; i++) {
            probes[i] = kprobe{};
            probes[i].addr = reinterpret_cast<kprobe_opcode_t *>(lp_gen_table[i]);
            probes[i].pre_handler = empty_pre;
            ptrs[i] = &probes[i];
        }
        state.ResumeTiming();

        auto r0 = std::chrono::steady_clock::now();
        int err = register_kprobes(ptrs.data(), n);

        state.PauseTiming();
        if (first_s < 0) first_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - r0).count();
        if (err != 0) {
            state.SkipWithError(liveprobe_strerror(err));
            state.ResumeTiming();
            break;
        }
        for (int i = 0; i < n; i++) optimized += (probes[i].flags & KPROBE_FLAG_OPTIMIZED) ? 1 : 0;
        // A call of each probed function must reach its handler: sample a few.
        for (int i = 0; i < n; i += n / 4 + 1) benchmark::DoNotOptimize(lp_gen_table[i](i));
        auto t0 = std::chrono::steady_clock::now();
        unregister_kprobes(ptrs.data(), n);
        unregister_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        state.ResumeTiming();
    }
    if (!optimize) liveprobe_set_optimization(1);
    state.SetItemsProcessed(state.iterations() * n);
    state.counters["optimized"] = benchmark::Counter(optimized, benchmark::Counter::kAvgIterations);
    state.counters["unregister_ms"] =
        benchmark::Counter(unregister_s * 1e3, benchmark::Counter::kAvgIterations);
    state.counters["first_ms"] = first_s * 1e3;
}

// ---- 7. one and two threads hitting one optimized probe ---------------------------------------
//
// The probe on bench_target_mt is registered once, before any benchmark thread starts its loop
// (std::call_once from whichever thread gets there first; the others wait), and unregistered at
// exit. items/s is the total over threads per wall-clock second (UseRealTime).

kprobe g_mt_probe{};
std::once_flag g_mt_once;
std::string g_mt_error;  // empty: registered and optimized

void mt_unregister() { unregister_kprobe(&g_mt_probe); }

void mt_register()
{
    g_mt_probe.addr = reinterpret_cast<kprobe_opcode_t *>(&bench_target_mt);
    g_mt_probe.pre_handler = empty_pre;
    if (int err = register_kprobe(&g_mt_probe); err != 0) {
        g_mt_error = liveprobe_strerror(err);
        return;
    }
    std::atexit(mt_unregister);
    liveprobe_info info = info_of(&g_mt_probe);
    if (!info.optimized)
        g_mt_error = std::string("not optimized: ") +
                     (info.why_not_optimized ? info.why_not_optimized : "(no reason given)");
}

void BM_ThreadsOptEmpty(benchmark::State &state)
{
    std::call_once(g_mt_once, mt_register);
    if (!g_mt_error.empty()) {
        state.SkipWithError(g_mt_error.c_str());
        return;
    }
    unsigned long before = info_of(&g_mt_probe).hits;
    long x = 0;
    for (auto _ : state) {
        x = bench_target_mt(x);
        benchmark::DoNotOptimize(x);
    }
    state.SetItemsProcessed(state.iterations());
    // Hits are summed over threads; this thread's share is at least its own calls.
    if (info_of(&g_mt_probe).hits - before < static_cast<unsigned long>(state.iterations()))
        state.SkipWithError("the handler ran fewer times than the probed function");
}

void BM_ThreadsUnprobed(benchmark::State &state) { call_loop(state); }

BENCHMARK(BM_Unprobed);
BENCHMARK(BM_ProbePre);
BENCHMARK(BM_ProbePrePost);
BENCHMARK(BM_OptEntryEmpty);
BENCHMARK(BM_OptEntryMemcpy);
BENCHMARK(BM_MemcpyHandlerAlone);
BENCHMARK(BM_MidUnprobed);
BENCHMARK(BM_OptMidEmpty);
BENCHMARK(BM_BreakpointEmpty);
BENCHMARK(BM_RawInt3);
BENCHMARK(BM_LibcUnprobed);
BENCHMARK(BM_LibcProbePre);
BENCHMARK(BM_RegisterUnregister);
BENCHMARK(BM_RegisterUnregisterByName);
BENCHMARK(BM_RegisterUnregisterBreakpoint);
BENCHMARK(BM_RegisterBatch)
    ->ArgNames({"n", "opt"})
    ->Args({1, 1})
    ->Args({100, 1})
    ->Args({10000, 1})
    ->Args({1, 0})
    ->Args({100, 0})
    ->Args({10000, 0})
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ThreadsUnprobed)->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK(BM_ThreadsOptEmpty)->Threads(1)->Threads(2)->UseRealTime();

}  // namespace

// The time source behind ktime_get() (include/liveprobe/ktime.h), against what it replaces.
#include <liveprobe/ktime.h>

#include <time.h>

namespace {

void BM_KtimeNs(benchmark::State &state)
{
    for (auto _ : state) benchmark::DoNotOptimize(liveprobe_ktime_ns());
    state.SetItemsProcessed(state.iterations());
    state.SetLabel(liveprobe_clock_source());
}

void BM_ClockGettimeMonotonic(benchmark::State &state)
{
    timespec ts;
    for (auto _ : state) {
        clock_gettime(CLOCK_MONOTONIC, &ts);
        benchmark::DoNotOptimize(ts);
    }
    state.SetItemsProcessed(state.iterations());
}

// The TSC read alone, the three ways: unordered (`rdtsc`, what `liveprobe trace` stamps
// calls with), and ordered, as liveprobe_ktime_ns() and the kernel's ktime_get() read it
// (`lfence; rdtsc`, or `rdtscp`): what a clock read costs at least, before any conversion.
void BM_TscRead(benchmark::State &state)
{
    const int how = static_cast<int>(state.range(0));
    uint64_t sum = 0;
    for (auto _ : state) {
        uint32_t lo, hi;
        if (how == 0)
            asm volatile("rdtsc" : "=a"(lo), "=d"(hi));
        else if (how == 1)
            asm volatile("lfence; rdtsc" : "=a"(lo), "=d"(hi) : : "memory");
        else
            asm volatile("rdtscp" : "=a"(lo), "=d"(hi) : : "rcx", "memory");
        sum += (uint64_t{hi} << 32) | lo;
    }
    benchmark::DoNotOptimize(sum);
    state.SetItemsProcessed(state.iterations());
    state.SetLabel(how == 0 ? "rdtsc" : how == 1 ? "lfence; rdtsc" : "rdtscp");
}

BENCHMARK(BM_KtimeNs);
BENCHMARK(BM_ClockGettimeMonotonic);
BENCHMARK(BM_TscRead)->ArgName("ordered")->Arg(0)->Arg(1)->Arg(2);

}  // namespace
