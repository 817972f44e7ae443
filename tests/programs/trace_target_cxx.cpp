// The C++ target of tests/scripts/trace_test.sh: exceptions through traced frames, and a
// library loaded with dlopen, called, then unloaded while it is traced.
//
//   lp_cx::Diver::dive(depth)   throws at depth 3, caught two frames up    600 entries, 0 returns
//   lp_cx_catcher(i)            catches dive(1)'s exception, i = 0..199    200 returns, i each
//   the plugin (argv[1]):       lp_cxx_catch(lp_cxx_throw, 5) 4 times      returns 5 each time;
//                               lp_cxx_throw throws each time              4 entries, 0 returns
//   lp_cx_after(i)              after the plugin is unloaded, i = 1..3      returns i * 2
//
// Usage: trace_target_cxx PLUGIN [GO-FILE]   (GO-FILE: load the plugin, then wait until GO-FILE
// exists before running; for -p)
#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <stdexcept>

#define TRACED __attribute__((noipa, used))

namespace lp_cx {
struct Diver {
    TRACED long dive(int depth)
    {
        if (depth == 3) throw std::runtime_error("deep enough");
        return dive(depth + 1) + 1;
    }
};
}  // namespace lp_cx

extern "C" TRACED long lp_cx_catcher(long i)
{
    lp_cx::Diver d;
    try {
        return d.dive(1);
    } catch (const std::runtime_error &) {
        return i;
    }
}

extern "C" TRACED long lp_cx_after(long i) { return i * 2; }

int main(int argc, char **argv)
{
    if (argc < 2) {
        std::fprintf(stderr, "usage: %s PLUGIN [GO-FILE]\n", argv[0]);
        return 2;
    }
    void *plugin = dlopen(argv[1], RTLD_NOW);
    if (!plugin) {
        std::fprintf(stderr, "%s\n", dlerror());
        return 1;
    }
    if (argc > 2) {
        std::printf("plugin loaded\n");
        std::fflush(stdout);
    }
    for (int i = 0; argc > 2 && access(argv[2], F_OK) != 0 && i < 3000; i++) usleep(10000);
    long sum = 0;
    for (long i = 0; i < 200; i++) sum += lp_cx_catcher(i);
    auto thrower = reinterpret_cast<long (*)(int)>(dlsym(plugin, "lp_cxx_throw"));
    auto catcher = reinterpret_cast<long (*)(long (*)(int), int)>(dlsym(plugin, "lp_cxx_catch"));
    for (int i = 0; i < 4; i++) sum += catcher(thrower, 5);
    dlclose(plugin);
    for (long i = 1; i <= 3; i++) sum += lp_cx_after(i);
    std::printf("trace_target_cxx done: %ld\n", sum);  // 19900 + 20 + 12
    return 0;
}
