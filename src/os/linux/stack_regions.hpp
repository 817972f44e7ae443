// Which stack an address is on, as far as the return probes need to know.
//
// A thread runs on its own stack, and sometimes on another: a coroutine stack given to
// makecontext(), or an alternate signal stack given to sigaltstack(). liveprobe interposes both
// and keeps the ranges it was given, newest first; an address inside none of them is on "the
// thread's own stack" (region 0). Two addresses are comparable (one frame deeper than the
// other) only when they are in the same region. Stacks switched by other means (a coroutine
// library's own assembly) are not seen; see core/kretprobe.cpp for what happens then.
//
// Async-signal-safe, lock-free reads.
#pragma once

#include <atomic>
#include <cstdint>

namespace liveprobe::os {

// 0 for the thread's own stack, else an identifier of the known stack holding addr.
uint32_t stack_region_lookup(uint64_t addr) noexcept;
extern std::atomic<uint32_t> g_stack_regions;  // how many were recorded
inline uint32_t stack_region(uint64_t addr) noexcept
{
    if (g_stack_regions.load(std::memory_order_acquire) == 0) return 0;  // none known yet
    return stack_region_lookup(addr);
}

// Records [lo, hi) as a stack (tests and the interposers).
void add_stack_region(uint64_t lo, uint64_t hi) noexcept;

}  // namespace liveprobe::os
