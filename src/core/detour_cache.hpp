// The lives of detours (the jump path's code blocks, arch/x86_64/detour.hpp).
//
// A detour is built for one (address, replaced bytes, shape) and cached: the same probe
// registered again gets the same block back, so register/unregister loops build nothing.
// When its point leaves the probe table, the detour is *retired*: a new registration at the
// same address still takes it back; otherwise retired detours are freed when a new detour
// needs a block and no freed one is left, so liveprobe's detour memory follows the most probes
// ever optimized at once, not every address ever probed. Freeing is the hard part: a thread
// may be anywhere inside a detour, in the dispatcher it called, or in a signal handler that
// interrupted either, and nothing on the hit path says when it has left (the hit path pays
// nothing for this). alloc_detour_block() then stops the other threads and frees a retired
// detour only when no thread can come back to it (see docs/DESIGN-NOTES.md "Freeing detours"):
//   - no thread's ip or general register points into it;
//   - no 8-byte word from a thread's sp to the end of the mapping holding sp points into it
//     (a return address pushed by the detour's call to the dispatcher; a signal frame whose
//     saved ip is inside it, or that a trap handler is about to resume in it);
//   - no thread record is still busy with the point it served;
// and it gives up for this time (frees nothing) when a handler runs on some thread (a handler
// may have switched stacks) or a thread runs on a stack other than its own (an alternate
// signal stack, a makecontext stack: the frames it left are on another stack).
//
// Registry mutex held for everything here.
#pragma once

#include <cstdint>
#include <string>
#include <tuple>

#include "arch/x86_64/detour.hpp"

namespace liveprobe::core {

struct ProbePoint;

// (probed address, the bytes the jmp replaces, mid-function shape, the light entry's registers,
// a kretprobe's case 3).
using DetourKey = std::tuple<uint64_t, std::string, bool, uint32_t, bool>;

struct CachedDetour {
    uint64_t block = 0;
    arch::DetourLayout layout;
};

// The detour built for `key`, taking it back if it was retired; null if there is none.
const CachedDetour *find_detour(const DetourKey &key);
void add_detour(const DetourKey &key, uint64_t block, const arch::DetourLayout &layout);

// `block` served `pp`, which has just left the probe table (no thread can acquire it any more;
// one still busy with it keeps the block). Does nothing if it is retired already.
void retire_detour(uint64_t block, const ProbePoint *pp);

// Where the calling thread entered liveprobe: its own frames above sp are scanned too when
// retired detours are freed (the registry notes it each time it takes its mutex).
void note_caller_stack(uint64_t sp);

// A block for a new detour near `near`: a freed one, else one from retired detours freed now
// (when 64 more are retired than at the last attempt), else new memory. 0 when none.
uint64_t alloc_detour_block(uint64_t near);

}  // namespace liveprobe::core
