// The light dispatcher (jump_light.S): the jump path for a point whose one kprobe has a pre
// handler proven never to read its regs, to touch no vector state, and whose written
// registers are known (detour.hpp, "The light entry").
#pragma once

#include <ucontext.h>

#include <cstdint>

#include <liveprobe/kprobes.h>

namespace liveprobe::arch {

// What the light dispatcher hands back to the light entry, in eax.
enum LightAction : int {
    kLightPlain = 0,  // restore, run the relocated region
    kLightFull = 1,   // restore, take the full path (also when the handler returned non-zero:
                      // it asks to resume at regs->ip, the probed address, a hit again)
    kLightKret = 3,   // a kretprobe replaced the return slot (lp_kret_light_c): restore, run
                      // the relocated region through lp_kret_rsb_call (detour.hpp case 3)
};

// What light entries call (jump_light.S), rdi = site: entry and mid-function shapes, and their
// twins for a kernel without membarrier (a real fence in the busy protocol).
extern "C" void lp_light_entry();
extern "C" void lp_light_mid();
extern "C" void lp_light_entry_fenced();
extern "C" void lp_light_mid_fenced();
// What light entries built for a kretprobe call instead of lp_light_entry (no fence): the same,
// running on into lp_kret_light_pre when the point's light kprobe is still a kretprobe.
extern "C" void lp_kret_light_entry();
// A kretprobe's light handler (KprobeState::light_fn): lp_kret_light_c(kp, return slot).
extern "C" void lp_kret_light_pre();


// The general registers the light dispatcher itself writes (rax rdx rdi): a light entry saves
// these and the handler's.
uint32_t light_dispatcher_writes();

// core::tl_rec's offset from the thread pointer (initial-exec TLS: the same in every thread),
// which light entries read it at; 0 if it does not fit a displacement (then no light entry).
int32_t light_tls_offset();

// A synchronous fault of the handler the light dispatcher runs on this thread: counted, and
// the context sent to where the handler would have returned (the light entry's finish), as if
// it had returned 0. False when no such handler runs. Async-signal-safe.
bool light_fault_resume(int sig, ucontext_t *uc) noexcept;

}  // namespace liveprobe::arch
