// Interposing a libc function: liveprobe's definition of `name` is found before libc's, and
// calls libc's through `next_symbol`.
#pragma once

#include <dlfcn.h>

#include <atomic>

namespace liveprobe::os {

// The next definition of `name` after liveprobe's (dlsym RTLD_NEXT), looked up on first use
// and kept in `slot`. A plain atomic rather than a function-local static: the sanitizer
// runtimes call interposed functions while they initialize, before a static-initialization
// guard may be used. Interposers also look theirs up at load (a first lookup from a signal
// handler would call dlsym, which is not async-signal-safe).
template <typename Fn>
Fn next_symbol(std::atomic<Fn> &slot, const char *name)
{
    Fn fn = slot.load(std::memory_order_acquire);
    if (!fn) {
        fn = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
        slot.store(fn, std::memory_order_release);
    }
    return fn;
}

}  // namespace liveprobe::os
