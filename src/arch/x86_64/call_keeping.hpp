// A call that keeps more registers than the ABI does, for a handler's rare path: a return
// handler that writes no general register but rax, rdx, rsi and rdi (and reads no field of its
// regs but theirs and ip) lets the light return save fewer registers (core/kretprobe.hpp,
// KretState::return_few); a call of anything else from it would write them all.
#pragma once

#include <cstdint>

// fn(arg), with rcx and r8 to r11 kept: what it writes is rax, rdx, rsi and rdi (fn's own
// callee-saved registers come back by the ABI). The prover (vector_use.cpp) does not follow
// fn, which is called through a pointer: it takes lp_call_keeping as declared, vector-free
// and writing those four, so fn must be vector-free itself (built with -mgeneral-regs-only,
// calling only what is; its callers' tests prove it).
extern "C" int lp_call_keeping(void *arg, int (*fn)(void *) noexcept) noexcept;

namespace liveprobe::arch {
// What lp_call_keeping writes (gpr_bit masks): rax, rdx, rsi, rdi.
constexpr uint32_t kCallKeepingWrites = 1u << 0 | 1u << 2 | 1u << 6 | 1u << 7;
}  // namespace liveprobe::arch
