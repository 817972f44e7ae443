// Probed functions and checks shared by the unwinder tests (kretprobe_unwind_test.cpp with
// glibc's backtrace(), kretprobe_libunwind_test.cpp with libunwind's unw_backtrace()).
#pragma once

#include <liveprobe/kprobes.h>

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
    unsigned long driver_nop = 0;  // a five-byte nop inside st_driver, before its call
};
// The return address st_target read at its last call (the trampoline's while it is probed).
extern unsigned long g_target_saw;
// True if trace holds neither `replaced` (a replaced slot's content) nor the byte before it
// (what an unwinder looks up for a return address).
bool no_replaced_return(const std::vector<unsigned long> &trace, unsigned long replaced);
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

// ---- Return handlers that take a trace: what they saw, per handler ----

struct Seen {
    unsigned long ip = 0, ret_addr = 0, retval = 0;
    std::vector<unsigned long> trace;
    int calls = 0;
};
extern Seen g_inner, g_outer;
extern Tracer g_handler_tracer;  // what inner_return/outer_return take their trace with
int inner_return(kretprobe_instance *ri, pt_regs *regs);  // records into g_inner
int outer_return(kretprobe_instance *ri, pt_regs *regs);  // records into g_outer
int ignore_return(kretprobe_instance *ri, pt_regs *regs);
// A kretprobe on addr with only a return handler.
kretprobe return_probe(void *addr, kretprobe_handler_t h);

// True if trace holds `run` as consecutive entries.
bool has_run(const std::vector<unsigned long> &trace, std::initializer_list<unsigned long> run);
// The trace with symbol names and the addresses looked for, for failure messages.
std::string describe(const std::vector<unsigned long> &trace);

// ---- Traces taken in the other handlers: pre and post handlers of kprobes, entry handlers
// of kretprobes, each with `t`, in one run_st_top() (after calibrate()). ----

struct HandlerTraces {
    bool registered = false;
    bool optimized = false;  // every probe but pre_after's took the jump path
    std::vector<unsigned long> pre_entry;  // kprobe at st_target's entry
    std::vector<unsigned long> post_entry;  // its post handler
    unsigned long post_ip = 0;              // regs->ip its post handler saw
    std::vector<unsigned long> pre_nop;     // kprobe at g_addrs.driver_nop, inside st_driver
    std::vector<unsigned long> pre_after;   // kprobe at g_addrs.in_driver (pop %rbp: one byte,
                                            // the breakpoint path whatever the setting)
    std::vector<unsigned long> entry_top;   // kretprobe on st_top, entry handler
};
HandlerTraces take_handler_traces(Tracer t);
// Whether this run asks for the jump path (ctest's noopt. variants set LIVEPROBE_OPTIMIZE=0).
bool optimization_expected();
// gtest expectations: each trace shows the probed function where it was stopped (the exact
// address: the jump path's detour and the breakpoint path's signal frame both say so), then its
// callers in order.
void expect_handler_traces(Tracer t);

// The kernel's test_stacktrace_on_nested_kretprobe with tracer t: return probes on st_target,
// st_driver and st_top; the inner and outer return handlers' traces show the real return
// addresses in order and never the trampoline's, and the outer frames keep their probes.
void expect_nested_return_traces(Tracer t);
// A trace taken with t in st_target, below two probed frames, shows the real return addresses
// in order; both frames keep their return probes.
void expect_trace_below_probed_frames(Tracer t);

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

// ---- Counting every call's end: a kretprobe and its counts ----

struct Probe {
    kretprobe rp{};  // first: handlers find their Probe from ri->rp
    std::atomic<long> entries{0}, returns{0}, unwinds{0};
};
// Sets p's probe on addr with counting entry, return and unwind handlers.
void arm(Probe &p, void *addr, int maxactive = 0);

// Registers every probe of `ps` (ok tells), unregistering them when it goes.
struct Armed {
    std::vector<kretprobe *> rps;
    bool ok = false;
    explicit Armed(std::initializer_list<Probe *> ps);
    ~Armed();
};

// gtest expectations on p's counts (and nmissed 0); `what` names it in failures.
void expect_counts(const Probe &p, long entries, long returns, long unwinds, const char *what);

// Throw/catch, rethrow and destructors through ex_inner, ex_mid and ex_outer (all probed, and
// ex_top) 1,000 times: the program's counts and every probe's exact counts.
void expect_exceptions_through_three_probed_frames();

}  // namespace lp_unwind_test
