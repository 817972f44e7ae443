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

TEST(KretprobeLibunwind, UnwBacktraceInNestedReturnHandlers) { expect_nested_return_traces(libunwind_backtrace); }

TEST(KretprobeLibunwind, UnwBacktraceInPrePostAndEntryHandlers) { expect_handler_traces(libunwind_backtrace); }

TEST(KretprobeLibunwind, UnwBacktraceBelowProbedFrames) { expect_trace_below_probed_frames(libunwind_backtrace); }

TEST(KretprobeLibunwind, ExceptionsThroughProbedFramesExactCounts) { expect_exceptions_through_three_probed_frames(); }

}  // namespace
