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
// Memory is never freed (see docs/DESIGN-NOTES.md "immortal code"). Caller serializes.
uint64_t alloc_code(uint64_t near, size_t size);

// True if addr lies in memory alloc_code handed out. Lock-free, async-signal-safe.
bool is_liveprobe_code(uint64_t addr) noexcept;

// The block holding addr: its start and size (0 if addr is not liveprobe's code).
// Lock-free, async-signal-safe.
size_t code_block(uint64_t addr, uint64_t *start) noexcept;

}  // namespace liveprobe::os
