// The C++ side of the light dispatcher (jump_light.S): the layout its assembly relies on,
// checked here against the structures, its write set, and its fault path.
#include "arch/x86_64/jump_light.hpp"

#include <cstddef>

#include "arch/x86_64/detour.hpp"
#include "arch/x86_64/light_layout.h"
#include "arch/x86_64/region.hpp"
#include "core/dispatch.hpp"
#include "core/kretprobe.hpp"
#include "os/linux/code_alloc.hpp"

namespace liveprobe::arch {

using core::KprobeState;
using core::ProbePoint;
using core::ThreadRecord;

// jump_light.S finds the probed address by rounding down to a detour block.
static_assert(os::kDetourBlock == 1024);

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winvalid-offsetof"
static_assert(offsetof(ThreadRecord, busy) + offsetof(core::BusySlots<ProbePoint *>, slot) == LP_REC_BUSY_SLOT0);
static_assert(offsetof(ThreadRecord, busy) + offsetof(core::BusySlots<ProbePoint *>, depth) == LP_REC_BUSY_DEPTH);
static_assert(sizeof(core::BusySlots<ProbePoint *>::depth) == 4);
static_assert(offsetof(ThreadRecord, in_handler) == LP_REC_IN_HANDLER);
static_assert(sizeof(ThreadRecord::in_handler) == 4);
static_assert(offsetof(ThreadRecord, jump_ks) == LP_REC_JUMP_KS);
static_assert(offsetof(ThreadRecord, jump_light) == LP_REC_JUMP_LIGHT);
static_assert(offsetof(ThreadRecord, counters) == LP_REC_COUNTERS);
static_assert(offsetof(ProbePoint, light) == LP_PP_LIGHT);
static_assert(offsetof(KprobeState, uncounted) == LP_KS_UNCOUNTED);
static_assert(offsetof(KprobeState, kp) == LP_KS_KP);
static_assert(offsetof(KprobeState, id) == LP_KS_ID);
static_assert(sizeof(KprobeState::id) == 4);
static_assert(offsetof(KprobeState, enabled) == LP_KS_ENABLED);
static_assert(sizeof(KprobeState::enabled) == 1);
static_assert(offsetof(KprobeState, light_fn) == LP_KS_LIGHT_FN);
static_assert(offsetof(ThreadRecord, kret_light_sp) == LP_REC_KRET_LIGHT_SP);
static_assert(offsetof(ThreadRecord, kret_light_h) == LP_REC_KRET_LIGHT_H);
static_assert(offsetof(struct kprobe, pre_handler) == LP_KP_PRE_HANDLER);
#pragma GCC diagnostic pop
static_assert(sizeof(std::atomic<uint64_t>) == 8);
static_assert(kLightFrame == LP_LIGHT_FRAME);

uint32_t light_dispatcher_writes()
{
    return gpr_bit(ZYDIS_REGISTER_RAX) | gpr_bit(ZYDIS_REGISTER_RDX) | gpr_bit(ZYDIS_REGISTER_RDI);
}

bool light_fault_resume(int sig, ucontext_t *uc) noexcept
{
    (void)sig;
    ThreadRecord *rec = core::this_thread_if_any();
    if (!rec || !rec->jump_light || !rec->in_handler) return false;  // jump_light outlives the handler a little
    greg_t *g = uc->uc_mcontext.gregs;
    core::count(rec, rec->jump_ks->fault_id);  // a light kprobe has no fault_handler
    if (uint64_t *sp = rec->kret_light_sp) {
        // A kretprobe's entry handler (called by lp_kret_light_pre, or through
        // lp_kret_call_bare or lp_kret_call_saving): 1 goes back to its caller, which gives the
        // call's instance back and goes on as usual. The callee-saved registers the handler may
        // write come back from the thunk, or (rbx and rbp of one lp_kret_light_pre calls) from
        // the light entry's frame, which saved them; the others are the caller's to lose across
        // a call.
        rec->kret_light_sp = nullptr;
        g[REG_RSP] = reinterpret_cast<greg_t>(sp + 1);
        g[REG_RIP] = static_cast<greg_t>(sp[0]);
        return true;
    }
    uint64_t *frame = rec->jump_light;
    rec->jump_light = nullptr;
    rec->in_handler = 0;
    core::release(rec, 0);  // the light dispatcher runs at the outermost level only
    // As if the handler had returned 0: `frame` is where its return address is. The registers
    // the handler may have changed are all among those the light entry restores; the others
    // still hold what the thread had.
    g[REG_RSP] = reinterpret_cast<greg_t>(frame + 1);
    g[REG_RIP] = static_cast<greg_t>(frame[0]);
    g[REG_RAX] = kLightPlain;
    return true;
}

int32_t light_tls_offset()
{
    uint64_t tp;
    asm("mov %%fs:0, %0" : "=r"(tp));  // the thread pointer (x86-64 TLS: its own first word)
    const int64_t off = reinterpret_cast<int64_t>(&core::tl_rec) - static_cast<int64_t>(tp);
    return off >= INT32_MIN && off <= INT32_MAX ? static_cast<int32_t>(off) : 0;
}

}  // namespace liveprobe::arch
