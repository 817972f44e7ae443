// Writing live code. Text is never made writable with mprotect (another thread executing on
// the page would fault, and hardened systems refuse writable+executable pages): it is written
// through /proc/self/mem, as debuggers and the kernel's uprobes do, which relies on FOLL_FORCE.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/error.hpp"

namespace liveprobe::os {

// Checks once per process that /proc/self/mem can write read-only executable memory
// (Linux 6.12+ can forbid it with proc_mem.force_override=never); the result is cached.
Status text_write_check();

// Writes n bytes at addr in this process's memory, whatever the page's protection.
// Not async-signal-safe; callers serialize (registry mutex).
Status poke_text(uint64_t addr, const void *bytes, size_t n);

// Closes the /proc/self/mem descriptor poke_text keeps (the next write opens it again): for
// `liveprobe detach`, which leaves no descriptor of liveprobe's in the program. Callers
// serialize with poke_text (registry mutex).
void close_text_fd();

// Reads n bytes at addr (plain memory read of mapped, readable code).
void peek_text(uint64_t addr, void *out, size_t n);

// Reads n bytes at addr, which may not be mapped: false (and nothing read) when some byte is
// not readable (process_vm_readv on the process itself: an unmapped guess cannot crash it).
bool peek_data(uint64_t addr, void *out, size_t n);

// Makes every thread of the process serialize its instruction stream before it next runs
// user code (membarrier PRIVATE_EXPEDITED_SYNC_CORE), so no core executes stale bytes.
void sync_cores();

// A full memory barrier executed by every running thread of the process before this returns
// (membarrier PRIVATE_EXPEDITED): the writer's half of an asymmetric Dekker protocol, so the
// hit path's half needs only a compiler barrier. False when the kernel lacks it (then the
// hit path must use a real fence: see hit_path_needs_fence()).
bool barrier_all_threads();
extern const bool g_hit_path_needs_fence;  // set at load, before any probe exists
inline bool hit_path_needs_fence() noexcept { return g_hit_path_needs_fence; }

}  // namespace liveprobe::os
