// The thread pointer: on x86-64 (TLS variant II) %fs:0 holds the address of the thread's own
// control block, which glibc's struct pthread begins with (what pthread_self() returns). A
// hook of its own: AArch64 reads TPIDR_EL0, past which the block lies (variant I).
#pragma once

#include <cstdint>

namespace liveprobe::arch {

[[gnu::always_inline]] inline uintptr_t thread_pointer() noexcept
{
    uintptr_t p;
    asm("mov %%fs:0, %0" : "=r"(p));
    return p;
}

}  // namespace liveprobe::arch
