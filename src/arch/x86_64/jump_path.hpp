// The jump path: what detours call, and how signal handlers treat addresses inside detours.
#pragma once

#include <ucontext.h>

#include <cstdint>

#include <liveprobe/kprobes.h>

#include "arch/x86_64/detour.hpp"

namespace liveprobe::arch {

// What a detour does after calling the dispatcher (detour.hpp step 2).
enum JumpAction : int {
    kJumpPlain = 0,   // restore registers, run the relocated region
    kJumpPost = 1,    // run the first relocated instruction, then the post handlers
    kJumpResume = 2,  // resume at the registers as the handlers left them (int3 in the detour)
    kJumpKret = 3,    // a kretprobe replaced the return slot: as kJumpPlain, through lp_kret_rsb_call
};
// kretprobe_trampoline.S: a call whose return address is the trampoline (detour.hpp case 3).
extern "C" void lp_kret_rsb_call();
// The shared tails of the two ways a detour reaches it (kretprobe_trampoline.S).
extern "C" void lp_kret_full_tail();
extern "C" void lp_kret_light_tail();

// `site` is the probe address's ProbeTable::Site.
extern "C" int lp_jump_pre(uint64_t site, struct pt_regs *regs) noexcept;
extern "C" int lp_jump_post(uint64_t site, struct pt_regs *regs) noexcept;
// What detours call (detour_call.S): lp_jump_pre and lp_jump_post behind call frame
// information that leads unwinders from a handler into the probed function.
extern "C" void lp_detour_call_pre();
extern "C" void lp_detour_call_post();

// A synchronous fault (sig) of a handler running with no setjmp guard on this thread (the
// fast path of lp_jump_pre or the light dispatcher, or a return handler: core/kretprobe.hpp
// kret_fault_resume): points the context at the recovery (the fault is counted and the probe's
// fault_handler called, then the detour or the trampoline goes on) and returns true; false
// when no such handler runs. Async-signal-safe.
bool jump_fault_resume(int sig, ucontext_t *uc) noexcept;

// The dispatcher's entry points detours call (DetourFns, detour.hpp).
DetourFns detour_fns();

// A trap at `at` (the int3's address) that is a detour's "resume from regs": loads the whole
// context from the pt_regs at the context's rsp and returns true. Async-signal-safe.
bool detour_resume_trap(uint64_t at, ucontext_t *uc) noexcept;

// If ip lies in a detour, the original instruction it stands for (a fault there is the
// program's, at that address). Async-signal-safe.
bool detour_original_ip(uint64_t ip, uint64_t *orig) noexcept;

}  // namespace liveprobe::arch
