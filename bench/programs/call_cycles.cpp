// A program for `liveprobe trace` to trace: calls one function, cc_target, 3000 batches of 10,000
// times and prints the fewest TSC cycles per call of a batch (the minimum: a shared, noisy
// machine disturbs it far less than a mean). Run untraced, then traced, and subtract:
//   build/bench/liveprobe-call-cycles
//   build/tools/liveprobe/liveprobe trace --hist cc_target -- build/bench/liveprobe-call-cycles
//   build/tools/liveprobe/liveprobe trace --count cc_target -- build/bench/liveprobe-call-cycles
// To compare two builds of liveprobe, run each one's tool alternately a few times.
//
// With an argument N (2 to 10,000), each call goes to the next of N different functions in turn
// (bench/gen_functions.cmake's lp_gen_f<i>, through their table): the tracer's per-probe data
// then no longer fits in the first-level caches, as when a real program calls hundreds of
// functions (jq under `trace '*'`). Trace them with 'lp_gen_f*':
//   build/tools/liveprobe/liveprobe trace --hist 'lp_gen_f*' -- build/bench/liveprobe-call-cycles 512
//
// With LP_CC_WAIT=1 in its environment it says "waiting" and starts only at SIGUSR1: time to
// attach traces to it with -p first (bench/sessions_cost.sh: a trace in a session after the first).
#include <signal.h>
#include <x86intrin.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

extern "C" long (*const lp_gen_table[])(long);  // bench/gen_functions.cmake

extern "C" __attribute__((noipa)) unsigned long cc_target()
{
    asm volatile("");
    return 1;
}

int main(int argc, char **argv)
{
    const long n = argc > 1 ? std::strtol(argv[1], nullptr, 10) : 1;
    if (argc > 2 || n < 1 || n > 10000) {
        std::fprintf(stderr, "usage: %s [N]   (N: 1 to 10000 functions called in turn; 1: cc_target)\n", argv[0]);
        return 2;
    }
    if (std::getenv("LP_CC_WAIT")) {
        sigset_t usr1;
        sigemptyset(&usr1);
        sigaddset(&usr1, SIGUSR1);
        sigprocmask(SIG_BLOCK, &usr1, nullptr);
        std::printf("waiting\n");
        std::fflush(stdout);
        int sig = 0;
        sigwait(&usr1, &sig);
    }
    double best = 1e18;
    long x = 1;
    for (int r = 0; r < 3000; ++r) {
        uint64_t t0 = __rdtsc();
        if (n == 1) {
            for (int i = 0; i < 10000; ++i) cc_target();
        } else {
            for (int i = 0, f = 0; i < 10000; ++i, f = f + 1 == n ? 0 : f + 1) x = lp_gen_table[f](x);
        }
        double c = double(__rdtsc() - t0) / 10000;
        if (c < best) best = c;
    }
    if (n == 1) printf("TSC cycles per call of cc_target: %.1f\n", best);
    else printf("TSC cycles per call of %ld functions in turn: %.1f\n", n, best);
    asm volatile("" : : "r"(x));  // the calls' results are used
    return 0;
}
