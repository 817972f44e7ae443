// The C++ API's C handlers, compiled as a user's optimized build compiles them, are proven free
// of vector instructions by liveprobe (arch::vector_free) when the probed function's signature
// and the handler are integer-only: typed probes then take the jump path's fast entry, as a C
// handler doing the same work does. Floating-point signatures are not (and set
// KPROBE_FLAG_FPREGS instead).
#include <liveprobe/liveprobe.hpp>

#include <gtest/gtest.h>

#include <cstdint>

#include "arch/x86_64/region.hpp"
#include "skip_if_sanitized.hpp"

namespace lp = liveprobe;

namespace {

template <typename Fn>
bool proven(Fn *fn, const char **why)
{
    return liveprobe::arch::vector_free(reinterpret_cast<uint64_t>(fn), 2, why);
}

long g_counter = 0;
double g_seen = 0;

}  // namespace

TEST(CxxVectorFree, TypedEntryProbeWithIntegerWork)
{
    LP_SKIP_IF_SANITIZED();
    auto empty = [](int, int) {};
    auto counting = [c = &g_counter](int a, int b) { *c += a * b; };
    auto by_call = [c = &g_counter](auto &call) {
        *c += call.template arg<0>();
        call.template set_arg<1>(7);
        if (*c < 0) call.skip(-1);
    };
    const char *why = nullptr;
    EXPECT_TRUE(proven(&lp::detail::EntryHandlers<int(int, int), decltype(empty)>::pre, &why)) << why;
    EXPECT_TRUE(proven(&lp::detail::EntryHandlers<int(int, int), decltype(counting)>::pre, &why)) << why;
    EXPECT_TRUE(proven(&lp::detail::EntryHandlers<int(int, int), decltype(by_call)>::pre, &why)) << why;
}

TEST(CxxVectorFree, TypedReturnProbeWithASlot)
{
    LP_SKIP_IF_SANITIZED();
    struct Slot {
        long start;
        int arg;
    };
    auto entry = [](auto &call, Slot &s) {
        s.arg = call.template arg<0>();
        s.start = g_counter;
    };
    auto ret = [](auto &exit, Slot &s) {
        g_counter += exit.value() + s.arg - s.start;
        exit.set_value(exit.value() + 1);
    };
    using H = lp::detail::ReturnHandlers<int(int, int), Slot, decltype(entry), decltype(ret)>;
    const char *why = nullptr;
    EXPECT_TRUE(proven(&H::entry, &why)) << why;
    EXPECT_TRUE(proven(&H::ret, &why)) << why;
    EXPECT_TRUE(proven(&H::unwind, &why)) << why;
}

TEST(CxxVectorFree, UntypedHandlers)
{
    LP_SKIP_IF_SANITIZED();
    auto pre = [c = &g_counter](pt_regs &r) { *c += static_cast<long>(r.di); };
    auto post = [c = &g_counter](pt_regs &) { ++*c; };
    using H = lp::detail::KprobeHandlers<decltype(pre), decltype(post), lp::detail::Nothing>;
    const char *why = nullptr;
    EXPECT_TRUE(proven(&H::c_pre, &why)) << why;
    EXPECT_TRUE(proven(&H::c_post, &why)) << why;
}

TEST(CxxVectorFree, FloatingPointSignaturesAreNot)
{
    auto h = [](double x) { g_seen = x; };
    const char *why = nullptr;
    EXPECT_FALSE(proven(&lp::detail::EntryHandlers<double(double), decltype(h)>::pre, &why));
    EXPECT_NE(why, nullptr);
}
