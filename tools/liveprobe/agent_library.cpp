#include "agent_library.hpp"

#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdlib>

#include <fmt/format.h>

#ifndef LIVEPROBE_BUILD_LIBRARY
#define LIVEPROBE_BUILD_LIBRARY ""
#endif

namespace liveprobe::tool {

namespace {
std::string real(const std::string &p)
{
    char buf[PATH_MAX];
    return realpath(p.c_str(), buf) ? std::string(buf) : std::string();
}
}  // namespace

std::string agent_library(std::string *why)
{
    if (const char *e = secure_getenv("LIVEPROBE_LIBRARY"); e && *e) {
        std::string p = real(e);
        if (p.empty()) *why = fmt::format("LIVEPROBE_LIBRARY={} does not exist", e);
        return p;
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        std::string dir(exe, static_cast<size_t>(n));
        dir = dir.substr(0, dir.rfind('/'));
        for (const char *rel : {"/../lib/libliveprobe.so.0", "/../lib/x86_64-linux-gnu/libliveprobe.so.0",
                                "/../lib64/libliveprobe.so.0"}) {
            std::string p = real(dir + rel);
            if (!p.empty()) return p;
        }
    }
    std::string p = real(LIVEPROBE_BUILD_LIBRARY);
    if (p.empty()) *why = "cannot find libliveprobe.so (set LIVEPROBE_LIBRARY to its path)";
    return p;
}

}  // namespace liveprobe::tool
