// README.md's C++ example: time a function and print its typed arguments.
#include <liveprobe/ktime.h>
#include <liveprobe/liveprobe.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>

// The function to probe: any function of the process or of a library it has loaded.
__attribute__((noinline)) double integrate(double (*f)(double), double a, double b, int steps)
{
    double h = (b - a) / steps, sum = 0;
    for (int i = 0; i < steps; ++i) sum += f(a + (i + 0.5) * h);
    return sum * h;
}

static double square(double x) { return x * x; }

struct Timing {  // one per call in flight: made at the entry, gone after the return
    std::uint64_t start_ns;
};

int main()
{
    auto probe = liveprobe::probe(&integrate)
                     .with_slot<Timing>()
                     .on_entry([](auto &call, Timing &t) {
                         auto [f, a, b, steps] = call.values();  // double(*)(double), double, double, int
                         std::printf("integrate(%s, %g, %g, %d)\n", f == &square ? "square" : "sin", a, b, steps);
                         t.start_ns = liveprobe_ktime_ns();
                     })
                     .on_return([](auto &exit, Timing &t) {
                         std::printf("  returned %.6f and took %llu ns\n", exit.value(),
                                     (unsigned long long)(liveprobe_ktime_ns() - t.start_ns));
                     })
                     .attach();
    if (!probe) {
        std::fprintf(stderr, "liveprobe: %s\n", probe.error().message().c_str());
        return 1;
    }
    integrate(square, 0, 3, 1000);
    integrate([](double x) { return std::sin(x); }, 0, M_PI, 100000);
    std::printf("%lu calls timed\n", probe->counters().hits);
    return probe->counters().hits == 2 ? 0 : 1;
}  // probe unregisters here
