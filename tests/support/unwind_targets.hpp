// Probed functions and checks shared by the unwinder tests (kretprobe_unwind_test.cpp with
// glibc's backtrace(), kretprobe_libunwind_test.cpp with libunwind's unw_backtrace()).
#pragma once

#include <atomic>
#include <initializer_list>
#include <string>
#include <vector>

namespace lp_unwind_test {

// ---- Stack traces: run_st_top() -> st_top() -> st_driver() -> st_target() ----

// Return addresses: in st_driver (after its call of st_target), in st_top, in run_st_top.
// Recorded by calibrate(), a call made before any probe exists: a probed function reading its
// own return address would read the trampoline's.
struct Addrs {
    unsigned long in_driver = 0, in_top = 0, in_test = 0;
};
extern Addrs g_addrs;
void calibrate();

using Tracer = std::vector<unsigned long> (*)();
// Set: st_target takes a trace with it into g_target_trace (below every probed frame).
extern Tracer g_trace_in_target;
extern std::vector<unsigned long> g_target_trace;

extern "C" unsigned long st_target();
extern "C" unsigned long st_driver();
extern "C" unsigned long st_top();
unsigned long run_st_top();  // every test calls st_top from here: one return address

// True if trace holds `run` as consecutive entries.
bool has_run(const std::vector<unsigned long> &trace, std::initializer_list<unsigned long> run);
// The trace with symbol names and the addresses looked for, for failure messages.
std::string describe(const std::vector<unsigned long> &trace);

// ---- Exceptions: ex_top(n) calls ex_outer(i) for i < n; ex_inner(i) throws Err{i} (i >= 0),
// ex_mid catches and rethrows, ex_outer catches and returns i. ex_inner and ex_mid hold a
// Dtor each. With i < 0 nothing is thrown and ex_outer returns 2. ----

struct Err {
    int v;
};
struct ExCounts {
    std::atomic<long> destructors{0}, rethrows{0}, caught{0};
};
extern ExCounts g_ex;
void reset_exception_counts();

extern "C" long ex_inner(int i);
extern "C" long ex_mid(int i);
extern "C" long ex_outer(int i);
extern "C" long ex_top(int n);

}  // namespace lp_unwind_test
