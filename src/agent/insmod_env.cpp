// liveprobe_insmod_from_environment(): the module LIVEPROBE_INSMOD names loaded before the
// program's main (called by libliveprobe-start.so, src/preload/start_main.cpp; the trace that
// LIVEPROBE_TRACE describes is started by trace_env.cpp).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "agent/agent.hpp"
#include "os/linux/environ.hpp"
#include "agent/channel.hpp"
#include "agent/modules.hpp"
#include "trace/session.hpp"

using namespace liveprobe::agent;

extern "C" int liveprobe_insmod_from_environment(void)
{
    const char *spec = secure_getenv("LIVEPROBE_INSMOD");
    if (spec == nullptr) return 0;
    std::vector<std::string> words;
    std::istringstream in(spec);
    for (std::string w; in >> w;) words.push_back(decode_arg(w));
    liveprobe::os::erase_env("LIVEPROBE_INSMOD");  // not again in the programs it runs
    if (words.empty()) {
        std::fprintf(stderr, "liveprobe: LIVEPROBE_INSMOD names no module\n");
        std::exit(1);
    }
    std::string name, why;
    auto t0 = std::chrono::steady_clock::now();
    int r = load_module(words[0], {words.begin() + 1, words.end()}, &name, &why);
    std::string file = words[0].substr(words[0].rfind('/') + 1);
    if (r < 0) {
        std::fprintf(stderr, "liveprobe: insmod %s into process %d: %s\n", file.c_str(), getpid(), why.c_str());
        std::exit(1);
    }
    std::fprintf(stderr, "liveprobe: process %d: loaded %s in %.2f ms, before main\n", getpid(), name.c_str(),
                 std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    return 0;
}
