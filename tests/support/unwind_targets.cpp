#include "support/unwind_targets.hpp"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace lp_unwind_test {

Addrs g_addrs;
Tracer g_trace_in_target = nullptr;
std::vector<unsigned long> g_target_trace;
ExCounts g_ex;

namespace {
bool g_calibrating = false;
}

unsigned long g_target_saw = 0;

bool no_replaced_return(const std::vector<unsigned long> &trace, unsigned long replaced)
{
    for (unsigned long a : trace)
        if (a == replaced || a == replaced - 1) return false;
    return true;
}

extern "C" __attribute__((noipa)) unsigned long st_target()
{
    g_target_saw = reinterpret_cast<unsigned long>(__builtin_return_address(0));
    if (g_calibrating) g_addrs.in_driver = reinterpret_cast<unsigned long>(__builtin_return_address(0));
    if (g_trace_in_target) g_target_trace = g_trace_in_target();
    return g_addrs.in_driver;
}

extern "C" __attribute__((noipa)) unsigned long st_driver()
{
    if (g_calibrating) g_addrs.in_top = reinterpret_cast<unsigned long>(__builtin_return_address(0));
    unsigned long nop;
    asm volatile("lea 1f(%%rip), %0\n1:\tnopl 0(%%rax,%%rax,1)" : "=r"(nop));
    if (g_calibrating) g_addrs.driver_nop = nop;
    unsigned long r = st_target();
    asm volatile("" : "+r"(r));
    return r;
}

extern "C" __attribute__((noipa)) unsigned long st_top()
{
    if (g_calibrating) g_addrs.in_test = reinterpret_cast<unsigned long>(__builtin_return_address(0));
    unsigned long r = st_driver();
    asm volatile("" : "+r"(r));
    return r;
}

__attribute__((noipa)) unsigned long run_st_top()
{
    unsigned long r = st_top();
    asm volatile("" : "+r"(r));
    return r;
}

void calibrate()
{
    g_calibrating = true;
    run_st_top();
    g_calibrating = false;
}

Seen g_inner, g_outer;
Tracer g_handler_tracer = nullptr;

namespace {
void record(Seen &s, kretprobe_instance *ri, pt_regs *regs)
{
    s.ip = instruction_pointer(regs);
    s.ret_addr = reinterpret_cast<unsigned long>(ri->ret_addr);
    s.retval = regs_return_value(regs);
    if (g_handler_tracer) s.trace = g_handler_tracer();
    s.calls++;
}
}  // namespace

int inner_return(kretprobe_instance *ri, pt_regs *regs)
{
    record(g_inner, ri, regs);
    return 0;
}

int outer_return(kretprobe_instance *ri, pt_regs *regs)
{
    record(g_outer, ri, regs);
    return 0;
}

int ignore_return(kretprobe_instance *, pt_regs *) { return 0; }

kretprobe return_probe(void *addr, kretprobe_handler_t h)
{
    kretprobe rp{};
    rp.kp.addr = static_cast<kprobe_opcode_t *>(addr);
    rp.handler = h;
    return rp;
}

bool has_run(const std::vector<unsigned long> &trace, std::initializer_list<unsigned long> run)
{
    std::vector<unsigned long> r(run);
    for (size_t i = 0; i + r.size() <= trace.size(); ++i)
        if (std::equal(r.begin(), r.end(), trace.begin() + static_cast<long>(i))) return true;
    return false;
}

std::string describe(const std::vector<unsigned long> &trace)
{
    char line[256];
    snprintf(line, sizeof line, "want in_driver=%#lx in_top=%#lx in_test=%#lx; trace:\n", g_addrs.in_driver,
             g_addrs.in_top, g_addrs.in_test);
    std::string s = line;
    for (unsigned long a : trace) {
        Dl_info info{};
        const char *name = dladdr(reinterpret_cast<void *>(a), &info) && info.dli_sname ? info.dli_sname : "?";
        snprintf(line, sizeof line, "  %#lx %s\n", a, name);
        s += line;
    }
    return s;
}

namespace {
Tracer g_probe_tracer = nullptr;
HandlerTraces *g_traces = nullptr;
}  // namespace

HandlerTraces take_handler_traces(Tracer t)
{
    HandlerTraces out;
    g_probe_tracer = t;
    g_traces = &out;
    kprobe entry{}, nop{}, after{};
    entry.addr = reinterpret_cast<kprobe_opcode_t *>(&st_target);
    entry.pre_handler = [](kprobe *, pt_regs *) {
        g_traces->pre_entry = g_probe_tracer();
        return 0;
    };
    entry.post_handler = [](kprobe *, pt_regs *regs, unsigned long) {
        g_traces->post_ip = instruction_pointer(regs);
        g_traces->post_entry = g_probe_tracer();
    };
    nop.addr = reinterpret_cast<kprobe_opcode_t *>(g_addrs.driver_nop);
    nop.pre_handler = [](kprobe *, pt_regs *) {
        g_traces->pre_nop = g_probe_tracer();
        return 0;
    };
    after.addr = reinterpret_cast<kprobe_opcode_t *>(g_addrs.in_driver);
    after.pre_handler = [](kprobe *, pt_regs *) {
        g_traces->pre_after = g_probe_tracer();
        return 0;
    };
    kretprobe top{};
    top.kp.addr = reinterpret_cast<kprobe_opcode_t *>(&st_top);
    top.entry_handler = [](kretprobe_instance *, pt_regs *) {
        g_traces->entry_top = g_probe_tracer();
        return 0;
    };
    top.handler = ignore_return;
    kprobe *kps[] = {&entry, &nop, &after};
    if (register_kprobes(kps, 3) == 0) {
        if (register_kretprobe(&top) == 0) {
            out.registered = true;
            out.optimized = (entry.flags & KPROBE_FLAG_OPTIMIZED) && (nop.flags & KPROBE_FLAG_OPTIMIZED) &&
                            (top.kp.flags & KPROBE_FLAG_OPTIMIZED);
            run_st_top();
            unregister_kretprobe(&top);
        }
        unregister_kprobes(kps, 3);
    }
    g_traces = nullptr;
    return out;
}

void expect_handler_traces(Tracer t)
{
    calibrate();
    HandlerTraces h = take_handler_traces(t);
    ASSERT_TRUE(h.registered) << liveprobe_strerror(-1);
    EXPECT_EQ(h.optimized, optimization_expected());
    const auto target = reinterpret_cast<unsigned long>(&st_target);
    const auto top = reinterpret_cast<unsigned long>(&st_top);
    EXPECT_TRUE(has_run(h.pre_entry, {target, g_addrs.in_driver, g_addrs.in_top, g_addrs.in_test}))
        << describe(h.pre_entry);
    EXPECT_GT(h.post_ip, target);
    EXPECT_TRUE(has_run(h.post_entry, {h.post_ip, g_addrs.in_driver, g_addrs.in_top, g_addrs.in_test}))
        << describe(h.post_entry);
    EXPECT_TRUE(has_run(h.pre_nop, {g_addrs.driver_nop, g_addrs.in_top, g_addrs.in_test})) << describe(h.pre_nop);
    EXPECT_TRUE(has_run(h.pre_after, {g_addrs.in_driver, g_addrs.in_top, g_addrs.in_test}))
        << describe(h.pre_after);
    EXPECT_TRUE(has_run(h.entry_top, {top, g_addrs.in_test})) << describe(h.entry_top);
}

void expect_nested_return_traces(Tracer t)
{
    calibrate();
    g_handler_tracer = t;
    g_inner = {};
    g_outer = {};
    kretprobe inner = return_probe(reinterpret_cast<void *>(&st_target), inner_return);
    kretprobe driver = return_probe(reinterpret_cast<void *>(&st_driver), outer_return);
    kretprobe top = return_probe(reinterpret_cast<void *>(&st_top), ignore_return);
    kretprobe *rps[] = {&inner, &driver, &top};
    ASSERT_EQ(register_kretprobes(rps, 3), 0) << liveprobe_strerror(-1);
    for (int i = 0; i < 3; ++i) run_st_top();
    unregister_kretprobes(rps, 3);
    // The inner handler's backtrace passes two frames whose return addresses are replaced
    // (st_driver's and st_top's): it shows the real ones.
    ASSERT_EQ(g_inner.calls, 3);
    EXPECT_EQ(g_inner.ip, g_addrs.in_driver);
    EXPECT_TRUE(has_run(g_inner.trace, {g_addrs.in_driver, g_addrs.in_top, g_addrs.in_test}))
        << describe(g_inner.trace);
    // The outer frames kept their return probes through those walks.
    ASSERT_EQ(g_outer.calls, 3);
    EXPECT_EQ(g_outer.ip, g_addrs.in_top);
    EXPECT_EQ(g_outer.ret_addr, g_addrs.in_top);
    EXPECT_TRUE(has_run(g_outer.trace, {g_addrs.in_top, g_addrs.in_test})) << describe(g_outer.trace);
    EXPECT_EQ(inner.nmissed + driver.nmissed + top.nmissed, 0);
    EXPECT_TRUE(no_replaced_return(g_inner.trace, g_target_saw)) << describe(g_inner.trace);
    EXPECT_TRUE(no_replaced_return(g_outer.trace, g_target_saw)) << describe(g_outer.trace);
}

void expect_trace_below_probed_frames(Tracer t)
{
    calibrate();
    g_handler_tracer = t;
    kretprobe driver = return_probe(reinterpret_cast<void *>(&st_driver), outer_return);
    kretprobe top = return_probe(reinterpret_cast<void *>(&st_top), inner_return);
    kretprobe *rps[] = {&driver, &top};
    g_inner = {};
    g_outer = {};
    ASSERT_EQ(register_kretprobes(rps, 2), 0) << liveprobe_strerror(-1);
    g_trace_in_target = t;
    run_st_top();
    g_trace_in_target = nullptr;
    unregister_kretprobes(rps, 2);
    // Taken in st_target, below two probed frames.
    EXPECT_TRUE(has_run(g_target_trace, {g_addrs.in_driver, g_addrs.in_top, g_addrs.in_test}))
        << describe(g_target_trace);
    EXPECT_EQ(g_outer.calls, 1);
    EXPECT_EQ(g_inner.calls, 1);
}

bool optimization_expected()
{
    const char *e = getenv("LIVEPROBE_OPTIMIZE");
    return !(e && std::string(e) == "0");
}

void reset_exception_counts()
{
    g_ex.destructors = 0;
    g_ex.rethrows = 0;
    g_ex.caught = 0;
}

namespace {
struct Dtor {
    ~Dtor() { g_ex.destructors++; }
};
}  // namespace

extern "C" __attribute__((noipa)) long ex_inner(int i)
{
    Dtor d;
    if (i >= 0) throw Err{i};
    asm volatile("" ::: "memory");
    return 0;
}

extern "C" __attribute__((noipa)) long ex_mid(int i)
{
    Dtor d;
    try {
        long r = ex_inner(i);
        asm volatile("" : "+r"(r));
        return r + 1;
    } catch (const Err &) {
        g_ex.rethrows++;
        throw;
    }
}

extern "C" __attribute__((noipa)) long ex_outer(int i)
{
    try {
        long r = ex_mid(i);
        asm volatile("" : "+r"(r));
        return r + 1;
    } catch (const Err &e) {
        g_ex.caught++;
        return e.v;
    }
}

extern "C" __attribute__((noipa)) long ex_top(int n)
{
    long s = 0;
    for (int i = 0; i < n; ++i) s += ex_outer(i);
    asm volatile("" : "+r"(s));
    return s;
}

namespace {
int probe_entry(kretprobe_instance *ri, pt_regs *)
{
    reinterpret_cast<Probe *>(ri->rp)->entries++;
    return 0;
}
int probe_return(kretprobe_instance *ri, pt_regs *)
{
    reinterpret_cast<Probe *>(ri->rp)->returns++;
    return 0;
}
int probe_unwind(kretprobe_instance *ri, pt_regs *)
{
    reinterpret_cast<Probe *>(ri->rp)->unwinds++;
    return 0;
}
}  // namespace

void arm(Probe &p, void *addr, int maxactive)
{
    p.rp.kp.addr = static_cast<kprobe_opcode_t *>(addr);
    p.rp.entry_handler = probe_entry;
    p.rp.handler = probe_return;
    p.rp.unwind_handler = probe_unwind;
    p.rp.maxactive = maxactive;
}

Armed::Armed(std::initializer_list<Probe *> ps)
{
    for (Probe *p : ps) rps.push_back(&p->rp);
    ok = register_kretprobes(rps.data(), static_cast<int>(rps.size())) == 0;
}

Armed::~Armed()
{
    if (ok) unregister_kretprobes(rps.data(), static_cast<int>(rps.size()));
}

void expect_counts(const Probe &p, long entries, long returns, long unwinds, const char *what)
{
    EXPECT_EQ(p.entries.load(), entries) << what;
    EXPECT_EQ(p.returns.load(), returns) << what;
    EXPECT_EQ(p.unwinds.load(), unwinds) << what;
    EXPECT_EQ(p.rp.nmissed, 0) << what;
}

void expect_exceptions_through_three_probed_frames()
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
        // ex_top calls ex_outer(i) for i < 1000: ex_inner throws i, ex_mid catches and
        // rethrows, ex_outer catches and returns i.
        EXPECT_EQ(ex_top(1000), 999L * 1000 / 2);
    }
    EXPECT_EQ(g_ex.destructors.load(), 2000);
    EXPECT_EQ(g_ex.rethrows.load(), 1000);
    EXPECT_EQ(g_ex.caught.load(), 1000);
    // The frames the exceptions left get unwind_handler; those that catch, and the one above,
    // keep their return probes.
    expect_counts(inner, 1000, 0, 1000, "ex_inner");
    expect_counts(mid, 1000, 0, 1000, "ex_mid");
    expect_counts(outer, 1000, 1000, 0, "ex_outer");
    expect_counts(top, 1, 1, 0, "ex_top");
}

}  // namespace lp_unwind_test
