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

struct Seen {
    unsigned long ip = 0;
    std::vector<unsigned long> trace;
    int calls = 0;
};
Seen g_inner, g_outer;

int inner_return(kretprobe_instance *, pt_regs *regs)
{
    g_inner.ip = instruction_pointer(regs);
    g_inner.trace = libunwind_backtrace();
    g_inner.calls++;
    return 0;
}
int outer_return(kretprobe_instance *, pt_regs *regs)
{
    g_outer.ip = instruction_pointer(regs);
    g_outer.trace = libunwind_backtrace();
    g_outer.calls++;
    return 0;
}

kretprobe return_probe(void *addr, kretprobe_handler_t h)
{
    kretprobe rp{};
    rp.kp.addr = static_cast<kprobe_opcode_t *>(addr);
    rp.handler = h;
    return rp;
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
    g_inner = {};
    g_outer = {};
    kretprobe inner = return_probe(reinterpret_cast<void *>(&st_target), inner_return);
    kretprobe driver = return_probe(reinterpret_cast<void *>(&st_driver), outer_return);
    kretprobe top = return_probe(reinterpret_cast<void *>(&st_top), [](kretprobe_instance *, pt_regs *) { return 0; });
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

TEST(KretprobeLibunwind, UnwBacktraceBelowProbedFrames)
{
    calibrate();
    g_outer = {};
    kretprobe driver = return_probe(reinterpret_cast<void *>(&st_driver), outer_return);
    kretprobe top = return_probe(reinterpret_cast<void *>(&st_top), [](kretprobe_instance *, pt_regs *) { return 0; });
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

struct Probe {
    kretprobe rp{};  // first: handlers find their Probe from ri->rp
    std::atomic<long> returns{0}, unwinds{0};
};

TEST(KretprobeLibunwind, ExceptionsThroughProbedFramesExactCounts)
{
    Probe ps[4];
    void *fns[4] = {reinterpret_cast<void *>(&ex_inner), reinterpret_cast<void *>(&ex_mid),
                    reinterpret_cast<void *>(&ex_outer), reinterpret_cast<void *>(&ex_top)};
    kretprobe *rps[4];
    for (int i = 0; i < 4; ++i) {
        ps[i].rp.kp.addr = static_cast<kprobe_opcode_t *>(fns[i]);
        ps[i].rp.handler = [](kretprobe_instance *ri, pt_regs *) {
            reinterpret_cast<Probe *>(ri->rp)->returns++;
            return 0;
        };
        ps[i].rp.unwind_handler = [](kretprobe_instance *ri, pt_regs *) {
            reinterpret_cast<Probe *>(ri->rp)->unwinds++;
            return 0;
        };
        rps[i] = &ps[i].rp;
    }
    reset_exception_counts();
    ASSERT_EQ(register_kretprobes(rps, 4), 0) << liveprobe_strerror(-1);
    EXPECT_EQ(ex_top(1000), 999L * 1000 / 2);
    unregister_kretprobes(rps, 4);
    EXPECT_EQ(g_ex.destructors.load(), 2000);
    EXPECT_EQ(g_ex.caught.load(), 1000);
    long want_returns[4] = {0, 0, 1000, 1}, want_unwinds[4] = {1000, 1000, 0, 0};
    for (int i = 0; i < 4; ++i) {
        EXPECT_EQ(ps[i].returns.load(), want_returns[i]) << "probe " << i;
        EXPECT_EQ(ps[i].unwinds.load(), want_unwinds[i]) << "probe " << i;
    }
}

}  // namespace
