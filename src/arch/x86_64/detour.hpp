// Jump-optimization detours on x86-64: the code a probe address jumps to instead of trapping.
//
// A detour, step by step (the bytes are written by build_detour, see detour.cpp):
//   1. Entry (from the `jmp rel32` at the probe address, every register as the program had
//      it): mid-function shape only, step over the 128-byte red zone; build a struct pt_regs
//      on the stack (flags saved first, before any instruction that changes them; ip = the
//      probe address; sp = the stack pointer at the probe address).
//   2. Call pre_fn(site, regs) (site: the probe address's immortal slot holding its probe
//      point). pre_fn is lp_detour_call_pre (detour_call.S), which aligns the stack, calls the
//      dispatcher and, by its call frame information, makes the frame above the dispatcher the
//      probed function at regs->ip for unwinders started in a handler. It returns what to do
//      next:
//        0: restore every register from regs (sp and flags included) and run the relocated
//           region ("plain path"), which ends by jumping back after the region;
//        1: the same, but only the first relocated instruction, then build pt_regs again
//           (ip = address of the second original instruction) and call post_fn(addr, regs),
//           which returns 0 (restore, run the rest of the region) or 2;
//        2: resume wherever regs now says (a handler changed ip): the detour executes an
//           int3 with rsp pointing at regs; the SIGTRAP handler loads the whole context from
//           regs (the kernel's sigreturn restores ip, sp and flags atomically).
// Vector state is not touched here: the dispatcher (built without vector instructions) saves
// it around handlers that may use it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "arch/x86_64/region.hpp"

namespace liveprobe::arch {

// Offsets inside a detour block, from its start.
struct DetourLayout {
    uint32_t entry = 0;
    uint32_t resume_trap = 0;       // the int3 of step 2 case 2 (after pre_fn)
    uint32_t post_resume_trap = 0;  // the same after post_fn (0: no post path)
    RelocMap plain;                 // relocated region, plain path
    bool has_post_path = false;     // false when the first instruction is a control transfer
    uint32_t post_insn1 = 0;        // relocated first instruction on the post path
    uint32_t post_after1 = 0;       // the post path's save sequence, after that instruction
    RelocMap post_rest;             // the other relocated instructions on the post path
    uint32_t end = 0;               // bytes used
};

// Writes the detour for `region` into out[code_offset..cap), to run at block address `at`
// (out[0] is the block's first byte). `mid` selects the mid-function shape (red zone). pre_fn
// and post_fn are the dispatcher's entry points, called with `arg` (the probe's site):
//   int pre_fn(uint64_t arg, struct pt_regs *regs);
//   int post_fn(uint64_t arg, struct pt_regs *regs);
// Returns 0, or -ERANGE (a relocated operand or the jump back out of reach), -ENOSPC.
int build_detour(const Region &region, uint64_t at, bool mid, uint64_t pre_fn, uint64_t post_fn,
                 uint64_t arg, uint8_t *out, size_t code_offset, size_t cap, DetourLayout *layout);

// The register save area the detour builds on its stack is a struct pt_regs; these offsets
// are the kernel's field order (checked against the struct in detour.cpp).
constexpr uint32_t kPtRegsSize = 168;

}  // namespace liveprobe::arch
