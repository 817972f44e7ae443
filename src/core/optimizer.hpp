// Jump optimization of probe points (the kernel's optprobes, done before register_kprobe
// returns). Called with the registry mutex held.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "core/probe.hpp"

namespace liveprobe::core {

// Optimizes every armed point of `batch` that can be, in one stop of the other threads (points
// already prepared, kOptPending, and others armed on the breakpoint path). A point that cannot
// be keeps its int3 and gets pp->why_not. `points` is every probe point (for the
// original bytes under other probes and the "no other probe in the region" rule).
void optimize_points(const std::vector<ProbePoint *> &batch,
                     const std::map<uint64_t, ProbePoint *> &points);

// Takes the jmp out again: the int3 back at the address (keep_int3) or the original byte.
// Needs no stop of the other threads: no thread can be inside a jmp's bytes, and a detour is
// freed only once no thread can be inside it (core/detour_cache.hpp), so a thread still inside
// one finishes there.
void unoptimize_point(ProbePoint *pp, bool keep_int3);

// Recomputes pp->vec from its enabled kprobes: false only when every handler is declared
// (KPROBE_FLAG_NOVEC) or proven free of vector instructions.
void refresh_vector_need(ProbePoint *pp);

// Forgets which handlers were proven vector-free (objects were unloaded). Registry mutex.
void forget_vector_proofs();

// Recomputes pp->light: pp's only kprobe when the light entry of its detour can run it (a pre
// handler and nothing else, proven vector-free and never reading its regs, writing only
// registers that entry saves), else null. Registry mutex; after pp->solo or pp->layout change.
void refresh_light(ProbePoint *pp);

// The code in [start, end) with the original bytes under liveprobe's own int3s and jmps.
std::vector<uint8_t> original_code(uint64_t start, uint64_t end,
                                   const std::map<uint64_t, ProbePoint *> &points);

// Plans pp's region and builds (or reuses) its detour; on success pp->opt becomes kOptPending
// (a trap at its address goes to the detour from then on) and "" is returned, else the reason.
// Done before the int3 is written, so the slot is never used by a point being optimized.
std::string prepare_point(ProbePoint *pp, const std::map<uint64_t, ProbePoint *> &points);

// Why optimization is off as a whole, or nullptr.
const char *optimization_off_reason();

}  // namespace liveprobe::core
