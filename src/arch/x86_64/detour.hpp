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
//           regs (the kernel's sigreturn restores ip, sp and flags atomically);
//        3: a kretprobe replaced the return slot (function-entry detours built for one, `kret`;
//           the others take it as 0): the relocated region's address into regs->orig_ax, then
//           lp_kret_full_tail restores as for 0, with that address left in the flags slot, and
//           jumps to lp_kret_rsb_call (kretprobe_trampoline.S), whose call, as it goes on
//           there, writes the trampoline's address into the return slot and onto the return
//           stack buffer: the function's return into the trampoline is predicted.
//
// The light entry (when built with a register mask): for a point whose one kprobe has only a
// pre handler proven not to read its regs and to touch no vector state. The jmp goes there:
//   1. Step over the red zone (mid-function shape); save the flags (any of DF TF NT AC ID set:
//      on to the full entry), then only the general registers of the mask (those the light
//      dispatcher and the handler write; rax rdx rdi always) into a frame of kLightFrame
//      bytes: flags at 0, register r at 8 + 8r. The other registers are never written on this
//      path.
//   2. Call the light dispatcher (jump_light.S) with rdi = site: it runs the busy protocol,
//      counts the hit and calls the handler.
//   3. 0: restore, run the relocated region (the light entry's own copy when the block has
//      room for it, else the full path's). 3 (kLightKret, detours built for a kretprobe: its
//      light handler lp_kret_light_pre replaced the return slot): restore, and on to
//      lp_kret_rsb_call by lp_kret_light_tail. Else (the point changed, or this hit needs more, or
//      the handler asked to resume at regs->ip, which it could not change: the probed address,
//      where the hit would start again): restore, go into the full entry.
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
    uint32_t full_entry = 0;        // the full path's step 1 (== entry without a light entry)
    uint32_t light_mask = 0;        // the light entry's saved registers (0: no light entry)
    // The light entry's own copy of the relocated region, when it has one: where each
    // instruction of `plain` is in it (same instructions, same order); all 0 otherwise.
    uint16_t light_plain[kMaxRegionInsns] = {};
    uint32_t kret_path = 0;         // step 2 case 3's restore (0: case 3 runs the plain path)
    bool light_kret = false;        // the light entry takes kLightKret (built for a kretprobe)
};

// The dispatcher's entry points a detour calls.
struct DetourFns {
    uint64_t pre = 0, post = 0;               // lp_detour_call_pre, lp_detour_call_post
    uint64_t light_entry = 0, light_mid = 0;  // lp_light_entry, lp_light_mid
    uint64_t kret_light_entry = 0;            // lp_kret_light_entry (lp_light_entry when fenced)
    int32_t light_tls = 0;                    // core::tl_rec's offset from the thread pointer
    // The shared tails on to lp_kret_rsb_call: of case 3 (rsp = the pt_regs, the relocated
    // region's address in orig_ax), and of a light entry's kLightKret (rsp = its frame, the
    // address at sp - 24); see kretprobe_trampoline.S.
    uint64_t kret_full_tail = 0, kret_light_tail = 0;
};

// The light entry's frame (step 1 above).
constexpr uint32_t kLightFrame = 136;

// Writes the detour for `region` into out[code_offset..cap), to run at block address `at`
// (out[0] is the block's first byte). `mid` selects the mid-function shape (red zone). pre_fn
// and post_fn are the dispatcher's entry points, called with `arg` (the probe's site):
//   int pre_fn(uint64_t arg, struct pt_regs *regs);
//   int post_fn(uint64_t arg, struct pt_regs *regs);
// Returns 0, or -ERANGE (a relocated operand or the jump back out of reach), -ENOSPC.
// With a non-zero light_mask (gpr_bit masks), a light entry too, which becomes `entry`; with
// `kret` (and not `mid`), step 2 case 3's own restore.
int build_detour(const Region &region, uint64_t at, bool mid, const DetourFns &fns, uint64_t arg,
                 uint32_t light_mask, bool kret, uint8_t *out, size_t code_offset, size_t cap,
                 DetourLayout *layout);

// The register save area the detour builds on its stack is a struct pt_regs; these offsets
// are the kernel's field order (checked against the struct in detour.cpp).
constexpr uint32_t kPtRegsSize = 168;

}  // namespace liveprobe::arch
