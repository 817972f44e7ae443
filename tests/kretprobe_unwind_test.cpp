// Unwinders see through return probes: glibc's backtrace() and libgcc's _Unwind_Backtrace()
// inside return handlers and below probed frames (the kernel's test_stacktrace_on_kretprobe
// and test_stacktrace_on_nested_kretprobe transposed), C++ exceptions through probed frames
// (throw, rethrow, destructors, exception_ptr, another shared library, several threads,
// noexcept) with exact handler and unwind_handler counts. Both entry paths (ctest's "noopt.").
#include <liveprobe/kprobes.h>

#include <execinfo.h>
#include <gtest/gtest.h>
#include <unwind.h>
#include <unistd.h>

#include <atomic>
#include <exception>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "support/unwind_targets.hpp"

// The C++ library the exceptions cross (tests/plugin/lp_cxx_plugin.cpp).
extern "C" long lp_cxx_throw(int i);
extern "C" long lp_cxx_catch(long (*fn)(int), int i);

namespace lp_unwind_test {

std::vector<unsigned long> glibc_backtrace()
{
    void *buf[128];
    int n = backtrace(buf, 128);
    std::vector<unsigned long> out;
    for (int i = 0; i < n; ++i) out.push_back(reinterpret_cast<unsigned long>(buf[i]));
    return out;
}

// libgcc's walker, called directly.
std::vector<unsigned long> gcc_unwind_backtrace()
{
    std::vector<unsigned long> out;
    _Unwind_Backtrace(
        [](struct _Unwind_Context *ctx, void *arg) {
            static_cast<std::vector<unsigned long> *>(arg)->push_back(_Unwind_GetIP(ctx));
            return _URC_NO_REASON;
        },
        &out);
    return out;
}

extern "C" __attribute__((noipa)) long ex_noexcept(int i) noexcept
{
    long r = ex_inner(i);
    asm volatile("" : "+r"(r));
    return r;
}

__attribute__((noipa)) std::exception_ptr ep_capture(int i)
{
    try {
        throw Err{i};
    } catch (...) {
        return std::current_exception();
    }
}

__attribute__((noipa)) long ep_rethrow(std::exception_ptr e)
{
    asm volatile("" ::: "memory");
    std::rethrow_exception(e);
}

__attribute__((noipa)) long ep_catch(std::exception_ptr e)
{
    try {
        long r = ep_rethrow(e);
        asm volatile("" : "+r"(r));
        return r;
    } catch (const Err &x) {
        return x.v;
    }
}

extern "C" __attribute__((noipa)) long ex_catch_from_library(int i)
{
    try {
        long r = lp_cxx_throw(i);
        asm volatile("" : "+r"(r));
        return r;
    } catch (const std::exception &e) {
        return std::stol(e.what());
    }
}

extern "C" __attribute__((noipa)) long ex_throw_for_library(int i)
{
    if (i >= 0) throw std::runtime_error(std::to_string(i));
    asm volatile("" ::: "memory");
    return -1;
}

}  // namespace lp_unwind_test

using namespace lp_unwind_test;

namespace {

// ---- backtrace() inside return handlers ----

TEST(KretprobeUnwind, StacktraceOnKretprobe)
{
    calibrate();
    g_handler_tracer = glibc_backtrace;
    g_inner = {};
    kretprobe rp = return_probe(reinterpret_cast<void *>(&st_target), inner_return);
    ASSERT_EQ(register_kretprobe(&rp), 0) << liveprobe_strerror(-1);
    run_st_top();
    unregister_kretprobe(&rp);
    ASSERT_EQ(g_inner.calls, 1);
    // The real return address, in regs->ip, in ri->ret_addr, and as the function returns it.
    EXPECT_EQ(g_inner.ip, g_addrs.in_driver);
    EXPECT_EQ(g_inner.ret_addr, g_addrs.in_driver);
    EXPECT_EQ(g_inner.retval, g_addrs.in_driver);
    // And in a backtrace taken in the handler: then the callers, in order; the address the
    // replaced slot held (the trampoline's) shows nowhere.
    EXPECT_TRUE(has_run(g_inner.trace, {g_addrs.in_driver, g_addrs.in_top, g_addrs.in_test}))
        << describe(g_inner.trace);
    ASSERT_NE(g_target_saw, g_addrs.in_driver);
    EXPECT_TRUE(no_replaced_return(g_inner.trace, g_target_saw)) << describe(g_inner.trace);
}

TEST(KretprobeUnwind, StacktraceOnNestedKretprobes) { expect_nested_return_traces(glibc_backtrace); }

TEST(KretprobeUnwind, BacktraceBelowProbedFrames) { expect_trace_below_probed_frames(glibc_backtrace); }

TEST(KretprobeUnwind, UnwindBacktraceCalledDirectly)
{
    calibrate();
    g_inner = {};
    g_outer = {};
    kretprobe inner = return_probe(reinterpret_cast<void *>(&st_target), inner_return);
    kretprobe driver = return_probe(reinterpret_cast<void *>(&st_driver), outer_return);
    kretprobe *rps[] = {&inner, &driver};
    ASSERT_EQ(register_kretprobes(rps, 2), 0) << liveprobe_strerror(-1);
    g_handler_tracer = gcc_unwind_backtrace;
    g_trace_in_target = gcc_unwind_backtrace;
    run_st_top();
    g_trace_in_target = nullptr;
    unregister_kretprobes(rps, 2);
    ASSERT_EQ(g_inner.calls, 1);
    ASSERT_EQ(g_outer.calls, 1);
    EXPECT_TRUE(has_run(g_inner.trace, {g_addrs.in_driver, g_addrs.in_top, g_addrs.in_test}))
        << describe(g_inner.trace);
    EXPECT_TRUE(has_run(g_outer.trace, {g_addrs.in_top, g_addrs.in_test})) << describe(g_outer.trace);
    EXPECT_TRUE(has_run(g_target_trace, {g_addrs.in_driver, g_addrs.in_top, g_addrs.in_test}))
        << describe(g_target_trace);
}

// ---- Traces inside the other handlers: kprobes' pre and post, kretprobes' entry ----

TEST(KretprobeUnwind, StacktraceInPrePostAndEntryHandlers) { expect_handler_traces(glibc_backtrace); }

TEST(KretprobeUnwind, UnwindBacktraceInPrePostAndEntryHandlers) { expect_handler_traces(gcc_unwind_backtrace); }

// ---- C++ exceptions ----

TEST(KretprobeUnwind, ThrowRethrowAndDestructorsThroughThreeProbedFramesThousandTimes)
{
    expect_exceptions_through_three_probed_frames();
}

TEST(KretprobeUnwind, ExceptionWithoutThrowingStillReturns)
{
    Probe inner, mid, outer;
    arm(inner, reinterpret_cast<void *>(&ex_inner));
    arm(mid, reinterpret_cast<void *>(&ex_mid));
    arm(outer, reinterpret_cast<void *>(&ex_outer));
    reset_exception_counts();
    {
        Armed a{&inner, &mid, &outer};
        ASSERT_TRUE(a.ok) << liveprobe_strerror(-1);
        // -1: nothing thrown (the destructors run on the normal path).
        for (int i = 0; i < 10; ++i) EXPECT_EQ(ex_outer(-1), 2);
    }
    EXPECT_EQ(g_ex.destructors.load(), 20);
    expect_counts(inner, 10, 10, 0, "ex_inner");
    expect_counts(mid, 10, 10, 0, "ex_mid");
    expect_counts(outer, 10, 10, 0, "ex_outer");
}

TEST(KretprobeUnwind, ExceptionPtrRethrownLater)
{
    Probe keep, again, catcher;
    arm(keep, reinterpret_cast<void *>(&ep_capture));
    arm(again, reinterpret_cast<void *>(&ep_rethrow));
    arm(catcher, reinterpret_cast<void *>(&ep_catch));
    {
        Armed a{&keep, &again, &catcher};
        ASSERT_TRUE(a.ok) << liveprobe_strerror(-1);
        for (int i = 0; i < 100; ++i) {
            std::exception_ptr e = ep_capture(i);  // thrown and caught inside, kept
            ASSERT_TRUE(e);
            EXPECT_EQ(ep_catch(e), i);  // ep_catch -> ep_rethrow rethrows it, ep_catch catches it
        }
    }
    expect_counts(keep, 100, 100, 0, "ep_capture");
    expect_counts(again, 100, 0, 100, "ep_rethrow");
    expect_counts(catcher, 100, 100, 0, "ep_catch");
}

TEST(KretprobeUnwind, ExceptionsCrossASharedLibrary)
{
    Probe lib_thrower, lib_catcher, exe_catcher, exe_thrower;
    arm(lib_thrower, reinterpret_cast<void *>(&lp_cxx_throw));
    arm(lib_catcher, reinterpret_cast<void *>(&lp_cxx_catch));
    arm(exe_catcher, reinterpret_cast<void *>(&ex_catch_from_library));
    arm(exe_thrower, reinterpret_cast<void *>(&ex_throw_for_library));
    {
        Armed a{&lib_thrower, &lib_catcher, &exe_catcher, &exe_thrower};
        ASSERT_TRUE(a.ok) << liveprobe_strerror(-1);
        for (int i = 0; i < 100; ++i) {
            // Thrown in the library, caught in the program.
            EXPECT_EQ(ex_catch_from_library(i), i);
            // Thrown in the program, caught in the library.
            EXPECT_EQ(lp_cxx_catch(&ex_throw_for_library, i), i);
        }
    }
    expect_counts(lib_thrower, 100, 0, 100, "lp_cxx_throw");
    expect_counts(exe_catcher, 100, 100, 0, "ex_catch_from_library");
    expect_counts(exe_thrower, 100, 0, 100, "ex_throw_for_library");
    expect_counts(lib_catcher, 100, 100, 0, "lp_cxx_catch");
}

TEST(KretprobeUnwind, ExceptionsOnFourThreadsAtOnce)
{
    Probe inner, mid, outer, top;
    // 4 threads x 4 frames in flight at most per probe
    arm(inner, reinterpret_cast<void *>(&ex_inner), 16);
    arm(mid, reinterpret_cast<void *>(&ex_mid), 16);
    arm(outer, reinterpret_cast<void *>(&ex_outer), 16);
    arm(top, reinterpret_cast<void *>(&ex_top), 16);
    reset_exception_counts();
    {
        Armed a{&inner, &mid, &outer, &top};
        ASSERT_TRUE(a.ok) << liveprobe_strerror(-1);
        std::vector<std::thread> ts;
        std::atomic<int> wrong{0};
        for (int t = 0; t < 4; ++t)
            ts.emplace_back([&] {
                if (ex_top(500) != 499L * 500 / 2) wrong++;
            });
        for (auto &t : ts) t.join();
        EXPECT_EQ(wrong.load(), 0);
    }
    EXPECT_EQ(g_ex.caught.load(), 2000);
    expect_counts(inner, 2000, 0, 2000, "ex_inner");
    expect_counts(mid, 2000, 0, 2000, "ex_mid");
    expect_counts(outer, 2000, 2000, 0, "ex_outer");
    expect_counts(top, 4, 4, 0, "ex_top");
}

// In the death test's child: a noexcept probed function whose probed callee throws.
void throw_through_noexcept()
{
    Probe guard, inner;
    arm(guard, reinterpret_cast<void *>(&ex_noexcept));
    arm(inner, reinterpret_cast<void *>(&ex_inner));
    Armed a{&guard, &inner};
    if (!a.ok) _exit(3);
    ex_noexcept(1);
    _exit(0);  // not reached: std::terminate
}

TEST(KretprobeUnwindDeathTest, NoexceptViolationStillTerminates)
{
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_DEATH(throw_through_noexcept(), "terminate called after throwing an instance of 'lp_unwind_test::Err'");
}

}  // namespace
