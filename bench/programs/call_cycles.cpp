// A program for `liveprobe trace` to trace: calls one function, cc_target, 3000 batches of 10,000
// times and prints the fewest TSC cycles per call of a batch (the minimum: a shared, noisy
// machine disturbs it far less than a mean). Run untraced, then traced, and subtract:
//   build/bench/liveprobe-call-cycles
//   build/tools/liveprobe/liveprobe trace --hist cc_target -- build/bench/liveprobe-call-cycles
//   build/tools/liveprobe/liveprobe trace --count cc_target -- build/bench/liveprobe-call-cycles
// To compare two builds of liveprobe, run each one's tool alternately a few times.
#include <x86intrin.h>

#include <cstdint>
#include <cstdio>

extern "C" __attribute__((noipa)) unsigned long cc_target()
{
    asm volatile("");
    return 1;
}

int main()
{
    double best = 1e18;
    for (int r = 0; r < 3000; ++r) {
        uint64_t t0 = __rdtsc();
        for (int i = 0; i < 10000; ++i) cc_target();
        double c = double(__rdtsc() - t0) / 10000;
        if (c < best) best = c;
    }
    printf("TSC cycles per call of cc_target: %.1f\n", best);
    return 0;
}
