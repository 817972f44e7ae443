// The light dispatcher (jump_light.cpp): the jump path for a point whose one kprobe has a pre
// handler proven never to read its regs, to touch no vector state, and whose written
// registers are known (detour.hpp, "The light entry").
#pragma once

#include <ucontext.h>

#include <cstdint>

#include <liveprobe/kprobes.h>

namespace liveprobe::arch {

// What the light entry does after the call.
enum LightAction : int {
    kLightPlain = 0,  // restore, run the relocated region
    kLightFull = 1,   // restore, take the full path (also when the handler returned non-zero:
                      // it asks to resume at regs->ip, the probed address, a hit again)
};

// site: the probe address's ProbeTable::Site; frame: the light entry's frame (detour.hpp).
extern "C" int lp_jump_light(uint64_t site, uint64_t *frame) noexcept;
// What light entries call (detour_call.S): lp_jump_light behind call frame information that
// leads unwinders from a handler into the probed function (entry and mid-function shapes).
extern "C" void lp_light_call_entry();
extern "C" void lp_light_call_mid();

// A synchronous fault of the handler lp_jump_light runs on this thread: counted, and the
// context sent back to the light entry as after a plain hit. False when no such handler runs.
// Async-signal-safe.
bool light_fault_resume(int sig, ucontext_t *uc) noexcept;

uint64_t light_dispatcher();

}  // namespace liveprobe::arch
