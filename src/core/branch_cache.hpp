// The direct branch targets of an executable mapping, cached on disk between processes.
//
// Placing a jump over a probe needs to know that no direct branch anywhere in the object lands
// inside the bytes it replaces (core/optimizer.cpp), which takes a linear decode of the whole
// mapping: some 50 ms for libc, paid by every process, and so by every program a traced tree
// executes (`trace -- make check` runs hundreds). The targets depend on the mapping's bytes
// only: they are kept in the runtime directory (os/linux/runtime_dir.hpp, the user's only),
// under a hash of those bytes and their length, as 32-bit offsets from the mapping's start (its
// address differs in each process). A file that is not one is ignored; nothing is cached when
// the runtime directory is missing or not private.
#pragma once

#include <cstdint>
#include <vector>

namespace liveprobe::core {

// The targets inside [start, start + code.size()) of the direct branches in `code`, the
// mapping's original bytes (its probes' own bytes put back), sorted and unique.
std::vector<uint64_t> cached_branch_targets(uint64_t start, const std::vector<uint8_t> &code);

}  // namespace liveprobe::core
