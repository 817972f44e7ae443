// The hit path of jprobes (see jprobe.cpp). Built with -mgeneral-regs-only: on the jump path
// without a saved vector state, the entry's vector arguments are the live registers.
#include "core/dispatch.hpp"
#include "core/jprobe.hpp"

extern "C" void lp_jprobe_call(void *entry, const uint64_t *gprs, const uint8_t *xmm, uint64_t stride,
                               const void *stack_args, uint64_t nbytes, uint64_t *frame_slot) noexcept;

namespace liveprobe::core {
namespace {
constexpr size_t kStackArgBytes = 128;  // API.md: at least 64

// Copies the caller's stack above the return address. It reads past the real arguments into
// the caller's frame (liveprobe cannot know how many there are), which AddressSanitizer would
// report as an underflow into the caller's redzones: not instrumented.
__attribute__((no_sanitize("address", "thread"))) void copy_words(uint64_t *dst, const uint64_t *src, size_t n) noexcept
{
    for (size_t i = 0; i < n; ++i) dst[i] = reinterpret_cast<const volatile uint64_t *>(src)[i];
}
}  // namespace

int jprobe_pre(struct kprobe *kp, struct pt_regs *regs) noexcept
{
    auto *jp = reinterpret_cast<struct jprobe *>(kp);  // kp is jp's first member
    ThreadRecord *rec = this_thread();
    if (!rec || !jp->entry) return 0;
    const uint64_t gprs[6] = {regs->di, regs->si, regs->dx, regs->cx, regs->r8, regs->r9};
    // The stack arguments above the return address; a copy, read under a guard (the stack may
    // end closer than kStackArgBytes above).
    uint64_t args[kStackArgBytes / 8] = {};
    const auto *src = reinterpret_cast<const uint64_t *>(regs->sp + 8);
    size_t n = kStackArgBytes / 8;
    while (n > 0 && !run_guarded(rec, [&] { copy_words(args, src, n); })) --n;
    lp_jprobe_call(jp->entry, gprs, rec->saved_xmm, rec->saved_xmm_stride, args, kStackArgBytes,
                   &rec->jprobe_frame);
    return 0;
}

}  // namespace liveprobe::core

extern "C" {

// jprobe_return's way back (arch/x86_64/jprobe_call.S): the calling thread's innermost
// lp_jprobe_call frame, 0 outside a jprobe entry.
uint64_t lp_jprobe_frame(void) noexcept
{
    liveprobe::core::ThreadRecord *rec = liveprobe::core::this_thread_if_any();
    return rec ? rec->jprobe_frame : 0;
}

}  // extern "C"
