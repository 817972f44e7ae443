// Unwinders see through return probes, in a program linked with libunwind (-lunwind), as
// profilers and crash reporters are: unw_backtrace() inside return handlers and below probed
// frames shows the real return addresses in order; and C++ exceptions, which in such a program
// go through libunwind's own _Unwind_RaiseException, keep exact counts. Both entry paths.
#include <liveprobe/kprobes.h>

#include <dlfcn.h>
#include <link.h>
#include <gtest/gtest.h>
#include <libunwind.h>

#include <atomic>
#include <string>
#include <vector>

#include "support/unwind_targets.hpp"

using namespace lp_unwind_test;

namespace {

std::vector<unsigned long> libunwind_backtrace()
{
    void *buf[128];
    int n = unw_backtrace(buf, 128);
    std::vector<unsigned long> out;
    for (int i = 0; i < n; ++i) out.push_back(reinterpret_cast<unsigned long>(buf[i]));
    return out;
}

TEST(KretprobeLibunwind, ProgramThrowsThroughLibunwind)
{
    // What the exception tests below rely on: this program's _Unwind_* are libunwind's, which
    // comes before libgcc_s in the lookup order (a sanitizer's interceptor, when there is one,
    // comes first and forwards to the next definition in that order).
    struct Order {
        int unwind = -1, gcc = -1, n = 0;
    } order;
    dl_iterate_phdr(
        [](struct dl_phdr_info *info, size_t, void *data) {
            auto *o = static_cast<Order *>(data);
            std::string name = info->dlpi_name ? info->dlpi_name : "";
            if (o->unwind < 0 && name.find("/libunwind.so") != std::string::npos) o->unwind = o->n;
            if (o->gcc < 0 && name.find("/libgcc_s.so") != std::string::npos) o->gcc = o->n;
            o->n++;
            return 0;
        },
        &order);
    ASSERT_GE(order.unwind, 0) << "libunwind is not loaded";
    ASSERT_GE(order.gcc, 0) << "libgcc_s is not loaded";
    EXPECT_LT(order.unwind, order.gcc);
}

TEST(KretprobeLibunwind, UnwBacktraceInNestedReturnHandlers)
{
    calibrate();
    g_handler_tracer = libunwind_backtrace;
    g_inner = {};
    g_outer = {};
    kretprobe inner = return_probe(reinterpret_cast<void *>(&st_target), inner_return);
    kretprobe driver = return_probe(reinterpret_cast<void *>(&st_driver), outer_return);
    kretprobe top = return_probe(reinterpret_cast<void *>(&st_top), ignore_return);
    kretprobe *rps[] = {&inner, &driver, &top};
    ASSERT_EQ(register_kretprobes(rps, 3), 0) << liveprobe_strerror(-1);
    for (int i = 0; i < 3; ++i) run_st_top();
    unregister_kretprobes(rps, 3);
    ASSERT_EQ(g_inner.calls, 3);
    EXPECT_EQ(g_inner.ip, g_addrs.in_driver);
    EXPECT_TRUE(has_run(g_inner.trace, {g_addrs.in_driver, g_addrs.in_top, g_addrs.in_test}))
        << describe(g_inner.trace);
    ASSERT_EQ(g_outer.calls, 3);
    EXPECT_EQ(g_outer.ip, g_addrs.in_top);
    EXPECT_TRUE(has_run(g_outer.trace, {g_addrs.in_top, g_addrs.in_test})) << describe(g_outer.trace);
}

TEST(KretprobeLibunwind, UnwBacktraceInPrePostAndEntryHandlers) { expect_handler_traces(libunwind_backtrace); }

TEST(KretprobeLibunwind, UnwBacktraceBelowProbedFrames)
{
    calibrate();
    g_handler_tracer = libunwind_backtrace;
    g_outer = {};
    kretprobe driver = return_probe(reinterpret_cast<void *>(&st_driver), outer_return);
    kretprobe top = return_probe(reinterpret_cast<void *>(&st_top), ignore_return);
    kretprobe *rps[] = {&driver, &top};
    ASSERT_EQ(register_kretprobes(rps, 2), 0) << liveprobe_strerror(-1);
    g_trace_in_target = libunwind_backtrace;
    run_st_top();
    g_trace_in_target = nullptr;
    unregister_kretprobes(rps, 2);
    EXPECT_TRUE(has_run(g_target_trace, {g_addrs.in_driver, g_addrs.in_top, g_addrs.in_test}))
        << describe(g_target_trace);
    EXPECT_EQ(g_outer.calls, 1) << "st_driver kept its return probe";
}

TEST(KretprobeLibunwind, ExceptionsThroughProbedFramesExactCounts)
{
    Probe inner, mid, outer, top;
    arm(inner, reinterpret_cast<void *>(&ex_inner));
    arm(mid, reinterpret_cast<void *>(&ex_mid));
    arm(outer, reinterpret_cast<void *>(&ex_outer));
    arm(top, reinterpret_cast<void *>(&ex_top));
    reset_exception_counts();
    {
        Armed a{&inner, &mid, &outer, &top};
        ASSERT_TRUE(a.ok) << liveprobe_strerror(-1);
        EXPECT_EQ(ex_top(1000), 999L * 1000 / 2);
    }
    EXPECT_EQ(g_ex.destructors.load(), 2000);
    EXPECT_EQ(g_ex.caught.load(), 1000);
    expect_counts(inner, 1000, 0, 1000, "ex_inner");
    expect_counts(mid, 1000, 0, 1000, "ex_mid");
    expect_counts(outer, 1000, 1000, 0, "ex_outer");
    expect_counts(top, 1, 1, 0, "ex_top");
}

}  // namespace
