// The tracer's handlers (src/trace/handlers.cpp, built with -mgeneral-regs-only) are proven free
// of vector instructions by the engine (arch::vector_free), so that a hit does not save and
// restore the thread's vector state: on this AVX-512 machine that save was a third of
// `liveprobe trace --hist '*'`'s cost on jq. A change that makes one of them call something
// the prover cannot follow (the clock's slow path calls the vDSO through a pointer) fails here.
#include <gtest/gtest.h>

#include <cstdint>

#include "arch/x86_64/region.hpp"
#include "skip_if_sanitized.hpp"
#include "trace/handlers.hpp"

namespace {

template <typename Fn>
void expect_proven(Fn *fn, const char *name)
{
    const char *why = nullptr;
    EXPECT_TRUE(liveprobe::arch::vector_free(reinterpret_cast<uint64_t>(fn), 2, &why)) << name << ": " << (why ? why : "");
}

}  // namespace

TEST(TraceHandlers, EveryHandlerIsProvenVectorFree)
{
    LP_SKIP_IF_SANITIZED();
    using namespace liveprobe::trace;
    expect_proven(count_pre, "count_pre");
    expect_proven(entry_cycles, "entry_cycles");
    expect_proven(entry_regs, "entry_regs");
    expect_proven(event_return, "event_return");
    expect_proven(hist_return, "hist_return");
    expect_proven(fetch_pre, "fetch_pre");
    expect_proven(fetch_return, "fetch_return");
}

// --count's handler takes the light entry (arch/x86_64/detour.hpp): it never reads its regs,
// and writes no callee-saved register (handlers.cpp is built with -ffixed for them), so the
// light entry saves only caller-saved registers around it.
TEST(TraceHandlers, CountHandlerTakesTheLightEntryWithCallerSavedRegistersOnly)
{
    LP_SKIP_IF_SANITIZED();
    const auto h = reinterpret_cast<uint64_t>(&liveprobe::trace::count_pre);
    const char *why = nullptr;
    EXPECT_TRUE(liveprobe::arch::ignores_second_arg(h, 2, &why)) << why;
    uint32_t writes = 0;
    ASSERT_TRUE(liveprobe::arch::vector_free(h, 2, &why, &writes)) << why;
    EXPECT_EQ(writes & ~liveprobe::arch::kCallerSavedGprs, 0u) << std::hex << writes;
}
