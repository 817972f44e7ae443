// The light dispatcher: what a detour's light entry calls (detour.hpp, "The light entry").
//
// The light entry saves only the registers this code and the handler write, so this file is
// built so as to write as few as it can: with -ffixed for every callee-saved register (it
// never touches rbx, rbp, r12-r15: nothing is kept in them across the handler's call, which
// is also what lets a fault in the handler resume here without restoring them) and with
// general registers only (src/CMakeLists.txt). The optimizer decodes lp_jump_light to learn
// what it writes (arch::function_writes) rather than trusting these flags.
#include "arch/x86_64/jump_light.hpp"

#include "core/dispatch.hpp"
#include "os/linux/code_alloc.hpp"

namespace liveprobe::arch {

// detour_call.S's light stubs find the probed address by rounding down to a detour block.
static_assert(os::kDetourBlock == 1024);

using core::KprobeState;
using core::ProbePoint;
using core::ThreadRecord;

extern "C" int lp_jump_light(uint64_t site, uint64_t *frame) noexcept
{
    ThreadRecord *rec = core::tl_rec;
    // A thread liveprobe has not seen yet, or a hit inside a handler: the full path.
    if (!rec || rec->in_handler) [[unlikely]]
        return kLightFull;
    core::BusyMark prev;
    ProbePoint *pp = core::acquire_site_saving(rec, reinterpret_cast<const void *>(site), &prev);
    if (!pp) return kLightPlain;  // the probe is going away: run the original instructions
    KprobeState *ks = pp->light.load(std::memory_order_relaxed);
    int action = kLightFull;  // the point no longer has a kprobe the light path can run
    if (ks) {
        action = kLightPlain;
        if (ks->enabled.load(std::memory_order_relaxed)) {
            core::count(rec, ks->id);
            struct kprobe *kp = ks->kp;
            rec->jump_ks = ks;
            rec->jump_prev = prev;
            rec->jump_light = frame;
            rec->in_handler = 1;
            std::atomic_signal_fence(std::memory_order_seq_cst);
            // The handler was proven never to read its regs.
            if (kp->pre_handler(kp, nullptr) != 0) action = kLightFull;
            std::atomic_signal_fence(std::memory_order_seq_cst);
            rec = core::tl_rec;  // nothing lives across the call but on the stack
            rec->in_handler = 0;
            rec->jump_light = nullptr;
            prev = rec->jump_prev;
        }
    }
    core::release(rec, prev);
    return action;
}

bool light_fault_resume(int sig, ucontext_t *uc) noexcept
{
    (void)sig;
    ThreadRecord *rec = core::this_thread_if_any();
    if (!rec || !rec->jump_light) return false;
    uint64_t *frame = rec->jump_light;
    rec->jump_light = nullptr;
    core::count(rec, rec->jump_ks->fault_id);  // a light kprobe has no fault_handler
    rec->in_handler = 0;
    core::release(rec, rec->jump_prev);
    // Back in the stub as if lp_jump_light had returned kLightPlain: its call left the return
    // address at frame - 16 and the stub's own stack pointer is frame - 8. The registers the
    // handler may have changed are all among those the light entry restores; the others
    // still hold what the thread had.
    greg_t *g = uc->uc_mcontext.gregs;
    g[REG_RSP] = reinterpret_cast<greg_t>(frame - 1);
    g[REG_RIP] = static_cast<greg_t>(frame[-2]);
    g[REG_RAX] = kLightPlain;
    return true;
}

uint64_t light_dispatcher() { return reinterpret_cast<uint64_t>(&lp_jump_light); }

}  // namespace liveprobe::arch
