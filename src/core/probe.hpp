// The probe table's objects: one ProbePoint per probed address (the kernel's aggregate
// probe: every kprobe at that address hangs off it) and one KprobeState per registered
// struct kprobe.
//
// Concurrency contract:
//   - Every field not marked otherwise is written only with the registry mutex held, before
//     the object is published in the probe table, and is immutable afterwards.
//   - ProbePoint::members is an immutable snapshot, replaced (copy on write) with the registry
//     mutex held; a snapshot is freed only after wait_quiescent(pp), since the hit path
//     iterates it while its thread's busy == pp.
//   - KprobeState::enabled is written with the registry mutex held and read by the hit path.
//   - A ProbePoint is freed only after it left the table and wait_quiescent(pp) returned.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include <liveprobe/kprobes.h>

#include "arch/x86_64/detour.hpp"
#include "arch/x86_64/insn.hpp"
#include "arch/x86_64/region.hpp"

namespace liveprobe::core {

struct ProbePoint;

struct KprobeState {
    struct kprobe *kp = nullptr;
    ProbePoint *pp = nullptr;
    uint32_t id = 0;         // index of this probe's per-thread counters
    uint32_t fault_id = 0;   // index of its fault counters
    uint64_t hits_base = 0;  // counter sums when the ids were handed out (ids are recycled)
    uint64_t faults_base = 0;
    std::atomic<bool> enabled{true};
    // liveprobe's own probe (core/unwinder_hooks.cpp): its pre handler runs even while a
    // handler runs on the thread, where other probes' hits are missed.
    bool internal = false;
    // Its hits are not counted (no per-thread counter written per hit): a probe of
    // `liveprobe trace`, which counts calls itself (registry.hpp UncountedRegistrations).
    bool uncounted = false;
    // What the light dispatcher jumps to (rdi = kp), read from this line with the fields above
    // rather than from kp's: kp->pre_handler as registered, or for a kretprobe its light entry
    // (lp_kret_light_pre). A pre handler changed after registration is not seen there.
    const void *light_fn = nullptr;
    std::string symbol;  // kp->symbol_name at registration, copied (for listings)
};

struct Members {
    uint32_t n = 0;
    bool any_post = false;  // some member has a post_handler
    KprobeState *items[];   // registration order
};

// Out-of-line copy of one probed instruction, 64 bytes, 64-aligned, immortal (see
// docs/DESIGN-NOTES.md): a thread may still be executing it after its probe is gone.
struct SlotHeader {
    uint64_t orig;  // the probed address
    // Where execution continues after the instruction: orig + its length, or, while the
    // probe is jump-optimized (those bytes are inside the jmp), the matching place in the
    // detour. The jump variant ends with `jmp *next(%rip)`; written with one aligned store.
    uint64_t next;
};
constexpr size_t kSlotSize = 64;
constexpr size_t kSlotJumpOffset = 16;  // relocated instruction + jmp *next(%rip)
constexpr size_t kSlotTrapOffset = 45;  // relocated instruction + int3 (post handlers)

// A jump-optimization detour (arch/x86_64/detour.hpp), 1024 bytes, 1024-aligned, freed only
// once no thread can return to it (core/detour_cache.hpp); its header lets signal handlers map
// an address inside it back to the probe.
struct DetourHeader {
    uint64_t addr;  // the probed address
    uint64_t len;   // bytes replaced by the jmp
    arch::DetourLayout layout;
};
constexpr size_t kDetourCodeOffset = 208;
static_assert(sizeof(DetourHeader) <= kDetourCodeOffset);

enum OptState : int {
    kOptNone = 0,     // breakpoint path
    kOptPending = 1,  // being optimized: a trap at addr goes to the detour, not the slot
    kOptDone = 2,     // the jmp is in place
    kOptRetired = 3,  // taken out (original bytes back), slot maybe never written: a trap
                      // left pending from before still goes to the detour (kept while pp is)
};

struct ProbePoint {
    // Read on every hit: first, in one cache line.
    std::atomic<Members *> members{nullptr};
    std::atomic<bool> vec{true};  // some handler may touch vector state: save it around them
    // The point's only kprobe when it has a pre handler and no post handler (the jump path's
    // fast path runs it directly; its enabled flag is still read each hit), else null.
    // Written with the registry mutex held, after members.
    std::atomic<KprobeState *> solo{nullptr};
    // solo, when the light entry of the point's detour can run it (its handler writes only
    // registers that entry saves, see optimizer.hpp refresh_light), else null.
    std::atomic<KprobeState *> light{nullptr};
    uint64_t addr = 0;
    arch::Insn insn;
    uint8_t orig_byte = 0;  // the byte under the int3
    uint64_t slot = 0;      // 0 for emulated instructions
    uint8_t slot_bytes[kSlotSize] = {};  // the slot's content until written (core/slot.cpp)
    // Jump optimization. detour/region/layout: registry mutex, set before opt leaves kOptNone.
    uint64_t detour = 0;
    arch::Region region;
    arch::DetourLayout layout;
    std::atomic<int> opt{kOptNone};
    std::string why_not;          // why it is not optimized; registry mutex
    bool armed = false;     // int3 written; registry mutex
    bool gone = false;      // its object was unloaded (KPROBE_FLAG_GONE); registry mutex
    std::string object;     // path of the mapping holding addr at registration
};

}  // namespace liveprobe::core
