// --hist's return handler, in a file of its own built to write no general register but rax,
// rdx, rsi and rdi (src/CMakeLists.txt: -ffixed for the others) and calling nothing but
// lp_call_keeping, which keeps the rest: the light return then saves six registers around it,
// not eleven (core/kretprobe.hpp, KretState::return_few). Registered when the clock is the TSC
// (else hist_return_clock); its common case only: this thread has its rows; the rest is
// hist_return_slow's (handlers.cpp). It does not test g_silent: a child that is silent moved
// g_generation, and its rows are never set again (every handler tests g_silent before it
// claims a ring).
#include "arch/x86_64/call_keeping.hpp"
#include "os/linux/clock.hpp"
#include "trace/handlers.hpp"
#include "trace/thread_rows.hpp"

namespace liveprobe::trace {

namespace clk = liveprobe::os::clock;

int hist_return(struct kretprobe_instance *ri, struct pt_regs *) noexcept
{
    if (t_rows.hists == nullptr || t_rows.generation != g_generation.load(std::memory_order_acquire)) [[unlikely]]
        return lp_call_keeping(ri, hist_return_slow);
    // The duration only: both ends unordered TSC reads, turned into nanoseconds here.
    const uint64_t stamp = reinterpret_cast<const EntryData *>(ri->data)->entry_ns;
    const uint64_t end = clk::tsc_unordered();
    hist_add(index_of(ri->rp), tsc_delta_ns(stamp, end));
    return 0;
}

}  // namespace liveprobe::trace
