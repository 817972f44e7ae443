#include "os/linux/loader_events.hpp"

#include <dlfcn.h>

#include <atomic>

namespace liveprobe::os {
namespace {
std::atomic<UnloadCallback> g_unload{nullptr};
}

void set_unload_callback(UnloadCallback cb) { g_unload.store(cb); }

void notify_unloaded()
{
    if (auto cb = g_unload.load()) cb();
}

}  // namespace liveprobe::os

extern "C" __attribute__((visibility("default"))) int dlclose(void *handle) noexcept
{
    using dlclose_fn = int (*)(void *);
    // A plain atomic, not a function-local static: no initialization guard (see signals.cpp).
    static std::atomic<dlclose_fn> real{nullptr};
    dlclose_fn fn = real.load(std::memory_order_acquire);
    if (!fn) {
        fn = reinterpret_cast<dlclose_fn>(dlsym(RTLD_NEXT, "dlclose"));
        real.store(fn, std::memory_order_release);
    }
    int rc = fn(handle);
    if (auto cb = liveprobe::os::g_unload.load()) cb();
    return rc;
}
