// Memory for liveprobe's own code (out-of-line instruction copies, later detours), placed
// within +-2 GiB of the code it serves so rel32 jumps and RIP-relative operands reach.
// The memory is mapped read+exec and never writable: its bytes are written with poke_text.
#pragma once

#include <cstddef>
#include <cstdint>

namespace liveprobe::os {

// Blocks come in two sizes, each from arenas of its own, aligned to their size: so the block
// holding any address of liveprobe's code is found from the address alone (its header says
// what it is: see core/probe.hpp).
constexpr size_t kSlotBlock = 64;      // out-of-line copies of the breakpoint path
constexpr size_t kDetourBlock = 1024;  // jump-optimization detours

// Allocates one block of `size` (kSlotBlock or kDetourBlock) whose every byte is within reach
// of a rel32 from `near` (0: anywhere). Returns 0 when no such memory can be had.
// Blocks given back with free_code() are handed out again first. Caller serializes.
uint64_t alloc_code(uint64_t near, size_t size);

// Gives a block back for reuse. The caller has made sure no thread can execute it any more
// and has filled it with int3 (core/detour_cache.cpp). The arenas themselves stay mapped: a
// signal handler may still ask code_block() about any address (lock-free). Caller serializes.
void free_code(uint64_t block, size_t size);
size_t free_code_blocks(size_t size);  // blocks of `size` given back and not reused yet

// True if addr lies in memory alloc_code handed out. Lock-free, async-signal-safe.
bool is_liveprobe_code(uint64_t addr) noexcept;

// The block holding addr: its start and size (0 if addr is not liveprobe's code).
// Lock-free, async-signal-safe.
size_t code_block(uint64_t addr, uint64_t *start) noexcept;

}  // namespace liveprobe::os
