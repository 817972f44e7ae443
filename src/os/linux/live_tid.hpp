// The calling thread's id in one load, without a system call: glibc keeps it in its thread
// descriptor, where the kernel writes a forked child's own id before the child runs a single
// instruction (CLONE_CHILD_SETTID). So a call that returns in a forked child, before fork()'s
// atfork handlers have told liveprobe of the fork (glibc's _Fork returns there first), is
// filed under the child's thread and not its parent's.
//
// Where glibc keeps it comes from the descriptor glibc exports for libthread_db
// (_thread_db_pthread_tid: size in bits, count, offset), checked once against gettid(); any
// doubt (another C library, an unexpected layout) and live_tid() answers its fallback.
#pragma once

#include <atomic>
#include <cstdint>

#include "arch/x86_64/thread_pointer.hpp"

namespace liveprobe::os {

// Offset of the thread id in glibc's thread descriptor, 0 when unknown: written once by
// init_live_tid (either value is right to read meanwhile: relaxed).
extern std::atomic<uint32_t> g_live_tid_offset;

// Finds and checks the offset, once (at a trace session's start, before its probes).
void init_live_tid() noexcept;

// The calling thread's id, or `fallback` when the C library's layout is not known.
[[gnu::always_inline]] inline uint32_t live_tid(uint32_t fallback) noexcept
{
    const uint32_t off = g_live_tid_offset.load(std::memory_order_relaxed);
    return off ? *reinterpret_cast<const uint32_t *>(arch::thread_pointer() + off) : fallback;
}

}  // namespace liveprobe::os
