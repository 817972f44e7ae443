#include "os/linux/live_tid.hpp"

#include <dlfcn.h>

#include <mutex>

#include "os/linux/raw_syscall.hpp"

namespace liveprobe::os {

std::atomic<uint32_t> g_live_tid_offset{0};

void init_live_tid() noexcept
{
    static std::once_flag once;
    std::call_once(once, [] {
        // glibc's db_desc_t: { uint32_t size (bits); uint32_t count; uint32_t offset; }.
        const auto *desc = static_cast<const uint32_t *>(dlsym(RTLD_DEFAULT, "_thread_db_pthread_tid"));
        if (!desc || desc[0] != 32 || desc[2] == 0 || desc[2] > 4096) return;
        const uint32_t off = desc[2];
        const uint32_t here = *reinterpret_cast<const uint32_t *>(arch::thread_pointer() + off);
        if (here == static_cast<uint32_t>(raw_gettid())) g_live_tid_offset.store(off, std::memory_order_relaxed);
    });
}

}  // namespace liveprobe::os
