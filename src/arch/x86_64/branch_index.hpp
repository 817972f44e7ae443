// Every direct branch target of a whole stretch of code (an object's executable mapping).
// A jump-optimized region must not contain one (past its first byte): within its own function
// plan_region sees them, but hand-written code also jumps into other functions (glibc's
// __mempcpy jumps to memmove's second instruction).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace liveprobe::arch {

// Decodes [start, start + len) linearly (an undecodable byte is skipped) and returns the
// targets of every relative jmp, jcc, call, loop and jrcxz, sorted and unique. Data or padding
// decoded as code can only add targets: the index errs on the side of refusing.
std::vector<uint64_t> direct_branch_targets(uint64_t start, const uint8_t *code, size_t len);

}  // namespace liveprobe::arch
