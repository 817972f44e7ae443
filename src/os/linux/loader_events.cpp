#include "os/linux/loader_events.hpp"

#include <dlfcn.h>

#include <atomic>

namespace liveprobe::os {
namespace {
std::atomic<UnloadCallback> g_unload{nullptr};
}

void set_unload_callback(UnloadCallback cb) { g_unload.store(cb); }

}  // namespace liveprobe::os

extern "C" __attribute__((visibility("default"))) int dlclose(void *handle) noexcept
{
    using dlclose_fn = int (*)(void *);
    static dlclose_fn real = reinterpret_cast<dlclose_fn>(dlsym(RTLD_NEXT, "dlclose"));
    int rc = real(handle);
    if (auto cb = liveprobe::os::g_unload.load()) cb();
    return rc;
}
