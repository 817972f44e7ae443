// Memory for liveprobe's own code (out-of-line instruction copies, later detours), placed
// within +-2 GiB of the code it serves so rel32 jumps and RIP-relative operands reach.
// The memory is mapped read+exec and never writable: its bytes are written with poke_text.
#pragma once

#include <cstddef>
#include <cstdint>

namespace liveprobe::os {

constexpr size_t kCodeChunk = 64;  // allocation granule and alignment

// Allocates `size` bytes (rounded up to kCodeChunk) whose every byte is within reach of a
// rel32 from `near` (0: anywhere). Returns 0 when no such memory can be had.
// Memory is never freed (see DESIGN-NOTES "Slots are immortal"). Caller serializes.
uint64_t alloc_code(uint64_t near, size_t size);

// True if addr lies in memory alloc_code handed out. Lock-free, async-signal-safe.
bool is_liveprobe_code(uint64_t addr) noexcept;

}  // namespace liveprobe::os
