// Behaviour of the kprobe part of API.md section 1, tested as a user's program would: this
// binary links libliveprobe.so and probes its own functions and libc's.
#include <liveprobe/kprobes.h>

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>
#include <thread>

#include "support/asm_targets.hpp"

namespace {

// ---- C targets (the test binary is built with -O1 -fno-inline) ----

extern "C" __attribute__((noinline)) int lp_c_add(int a, int b)
{
    asm volatile("");
    return a + b;
}

extern "C" __attribute__((noinline)) int lp_c_compute(int x)
{
    asm volatile("");
    return x * 3 + 1;
}

std::string g_trace;  // handler order, as a string (frida's "ac|bd" style)

int kp_of(struct kprobe *p) { return p->symbol_name ? p->symbol_name[0] : '?'; }

kprobe make_probe(void *addr, kprobe_pre_handler_t pre = nullptr,
                  kprobe_post_handler_t post = nullptr)
{
    kprobe kp{};
    kp.addr = static_cast<kprobe_opcode_t *>(addr);
    kp.pre_handler = pre;
    kp.post_handler = post;
    return kp;
}

std::string reason(int err) { return liveprobe_strerror(err); }

// ---- Basic hits and registers ----

struct SeenRegs {
    pt_regs pre{};
    pt_regs post{};
    unsigned long post_top_of_stack = 0;
    int pre_calls = 0;
    int post_calls = 0;
} g_seen;

int record_pre(kprobe *, pt_regs *r)
{
    g_seen.pre = *r;
    g_seen.pre_calls++;
    return 0;
}
void record_post(kprobe *, pt_regs *r, unsigned long)
{
    g_seen.post = *r;
    g_seen.post_top_of_stack = *reinterpret_cast<unsigned long *>(r->sp);
    g_seen.post_calls++;
}

TEST(Kprobe, PreHandlerSeesProbedAddressAndArguments)
{
    g_seen = {};
    kprobe kp{};
    kp.symbol_name = "lp_c_add";
    kp.pre_handler = record_pre;
    ASSERT_EQ(register_kprobe(&kp), 0) << reason(-1);
    EXPECT_EQ(reinterpret_cast<void *>(kp.addr), reinterpret_cast<void *>(&lp_c_add));
    EXPECT_EQ(lp_c_add(20, 22), 42);
    EXPECT_EQ(g_seen.pre_calls, 1);
    EXPECT_EQ(g_seen.pre.ip, reinterpret_cast<unsigned long>(&lp_c_add));
    EXPECT_EQ(regs_get_kernel_argument(&g_seen.pre, 0), 20u);
    EXPECT_EQ(regs_get_kernel_argument(&g_seen.pre, 1), 22u);
    EXPECT_EQ(g_seen.pre.orig_ax, ~0ul);
    unregister_kprobe(&kp);
    EXPECT_EQ(lp_c_add(1, 2), 3);
    EXPECT_EQ(g_seen.pre_calls, 1) << "no hit after unregister";
}

TEST(Kprobe, PostHandlerSeesRegistersAfterTheInstruction)
{
    g_seen = {};
    kprobe kp = make_probe(lp_t_ret42_mov, record_pre, record_post);
    ASSERT_EQ(register_kprobe(&kp), 0) << reason(-1);
    EXPECT_EQ(lp_t_ret42(), 42);
    ASSERT_EQ(g_seen.post_calls, 1);
    EXPECT_EQ(g_seen.pre.ip, reinterpret_cast<unsigned long>(lp_t_ret42_mov));
    EXPECT_NE(g_seen.pre.ax & 0xffffffff, 42u);  // before: not yet loaded (caller's rax)
    EXPECT_EQ(g_seen.post.ax, 42u);
    EXPECT_EQ(g_seen.post.ip, reinterpret_cast<unsigned long>(lp_t_ret42_ret));
    EXPECT_EQ(g_seen.post.sp, g_seen.pre.sp);
    unregister_kprobe(&kp);
}

TEST(Kprobe, RegisterClearsFlagsButDisabledAndFillsAddr)
{
    kprobe kp{};
    kp.symbol_name = "lp_c_add";
    kp.flags = KPROBE_FLAG_GONE | KPROBE_FLAG_OPTIMIZED | KPROBE_FLAG_DISABLED;
    kp.nmissed = 99;
    ASSERT_EQ(register_kprobe(&kp), 0);
    EXPECT_EQ(kp.flags, unsigned(KPROBE_FLAG_DISABLED));
    EXPECT_EQ(kp.nmissed, 0u);
    EXPECT_EQ(reinterpret_cast<void *>(kp.addr), reinterpret_cast<void *>(&lp_c_add));
    unregister_kprobe(&kp);
}

// ---- Handler order on aggregate probes ----

int order_pre(kprobe *p, pt_regs *)
{
    g_trace += static_cast<char>(kp_of(p));
    return 0;
}
void order_post(kprobe *p, pt_regs *, unsigned long)
{
    g_trace += static_cast<char>(toupper(kp_of(p)));
}
int order_pre_stop(kprobe *p, pt_regs *r)
{
    g_trace += static_cast<char>(kp_of(p));
    // Return from lp_t_ret42 with 7: the instruction and the later handlers are skipped.
    r->ax = 7;
    r->ip = *reinterpret_cast<unsigned long *>(r->sp);
    r->sp += 8;
    return 1;
}

TEST(Kprobe, AggregateHandlersRunInRegistrationOrder)
{
    // symbol_name is only used as the handler's tag here; addr is what registers.
    kprobe a = make_probe(lp_t_ret42_mov, order_pre, order_post);
    kprobe b = make_probe(lp_t_ret42_mov, order_pre, order_post);
    kprobe c = make_probe(lp_t_ret42_mov, order_pre, nullptr);
    ASSERT_EQ(register_kprobe(&a), 0);
    ASSERT_EQ(register_kprobe(&b), 0);
    ASSERT_EQ(register_kprobe(&c), 0);
    // Tag through a side table: the struct is what the handler gets.
    static kprobe *tags[3] = {&a, &b, &c};
    (void)tags;
    a.symbol_name = "a";
    b.symbol_name = "b";
    c.symbol_name = "c";
    g_trace.clear();
    EXPECT_EQ(lp_t_ret42(), 42);
    lp_t_ret42();
    EXPECT_EQ(g_trace, "abcAB" "abcAB");
    g_trace.clear();
    unregister_kprobe(&b);
    lp_t_ret42();
    EXPECT_EQ(g_trace, "acA");
    unregister_kprobe(&a);
    unregister_kprobe(&c);
    g_trace.clear();
    lp_t_ret42();
    EXPECT_EQ(g_trace, "");
}

TEST(Kprobe, NonZeroPreReturnSkipsInstructionAndLaterHandlers)
{
    kprobe a = make_probe(lp_t_ret42_mov, order_pre_stop, order_post);
    kprobe b = make_probe(lp_t_ret42_mov, order_pre, order_post);
    ASSERT_EQ(register_kprobe(&a), 0);
    ASSERT_EQ(register_kprobe(&b), 0);
    a.symbol_name = "a";
    b.symbol_name = "b";
    g_trace.clear();
    EXPECT_EQ(lp_t_ret42(), 7);
    EXPECT_EQ(g_trace, "a");
    unregister_kprobe(&a);
    unregister_kprobe(&b);
}

int return_early_777(kprobe *, pt_regs *r)
{
    // At the entry of lp_c_compute: pop the return address and return 777 to the caller.
    r->ax = 777;
    r->ip = *reinterpret_cast<unsigned long *>(r->sp);
    r->sp += 8;
    return 1;
}

TEST(Kprobe, PreHandlerReturnsFromFunctionEarly)
{
    kprobe kp{};
    kp.symbol_name = "lp_c_compute";
    kp.pre_handler = return_early_777;
    ASSERT_EQ(register_kprobe(&kp), 0);
    EXPECT_EQ(lp_c_compute(5), 777);
    unregister_kprobe(&kp);
    EXPECT_EQ(lp_c_compute(5), 16);
}

int change_arg(kprobe *, pt_regs *r)
{
    r->di = 100;
    return 0;
}

TEST(Kprobe, RegisterChangesInPreHandlerTakeEffect)
{
    kprobe kp{};
    kp.symbol_name = "lp_c_compute";
    kp.pre_handler = change_arg;
    ASSERT_EQ(register_kprobe(&kp), 0);
    EXPECT_EQ(lp_c_compute(5), 301);
    unregister_kprobe(&kp);
}

int set_carry(kprobe *, pt_regs *r)
{
    r->flags |= 1;  // CF
    return 0;
}

TEST(Kprobe, FlagsChangedByPreHandlerTakeEffect)
{
    EXPECT_EQ(lp_t_carry(), 0);
    kprobe kp = make_probe(lp_t_carry_jc, set_carry);
    ASSERT_EQ(register_kprobe(&kp), 0);
    EXPECT_EQ(lp_t_carry(), 1);
    unregister_kprobe(&kp);
    EXPECT_EQ(lp_t_carry(), 0);
}

// ---- Out-of-line execution of each instruction class ----

TEST(Kprobe, CallIsEmulatedAndPostSeesTarget)
{
    g_seen = {};
    kprobe kp = make_probe(lp_t_call_site, record_pre, record_post);
    ASSERT_EQ(register_kprobe(&kp), 0);
    EXPECT_EQ(lp_t_call(), 42);
    ASSERT_EQ(g_seen.post_calls, 1);
    EXPECT_EQ(g_seen.post.ip, reinterpret_cast<unsigned long>(&lp_t_ret42));
    EXPECT_EQ(g_seen.post.sp, g_seen.pre.sp - 8);
    EXPECT_EQ(g_seen.post_top_of_stack, reinterpret_cast<unsigned long>(lp_t_call_site) + 5);
    unregister_kprobe(&kp);
}

TEST(Kprobe, IndirectCallRetJmpLoop)
{
    g_seen = {};
    kprobe icall = make_probe(lp_t_icall_site, record_pre, record_post);
    ASSERT_EQ(register_kprobe(&icall), 0);
    EXPECT_EQ(lp_t_icall(lp_t_ret42), 42);
    EXPECT_EQ(g_seen.post.ip, reinterpret_cast<unsigned long>(&lp_t_ret42));
    unregister_kprobe(&icall);

    g_seen = {};
    kprobe ret = make_probe(lp_t_ret42_ret, record_pre, record_post);
    ASSERT_EQ(register_kprobe(&ret), 0);
    EXPECT_EQ(lp_t_call(), 42);
    EXPECT_EQ(g_seen.post.ip, reinterpret_cast<unsigned long>(lp_t_call_site) + 5);
    EXPECT_EQ(g_seen.post.sp, g_seen.pre.sp + 8);
    unregister_kprobe(&ret);

    g_seen = {};
    kprobe jmp = make_probe(lp_t_jmp_insn, record_pre, record_post);
    ASSERT_EQ(register_kprobe(&jmp), 0);
    EXPECT_EQ(lp_t_jmp(), 7);
    EXPECT_EQ(g_seen.post.ip, reinterpret_cast<unsigned long>(lp_t_jmp_insn) + 2 + 2);
    unregister_kprobe(&jmp);

    g_seen = {};
    kprobe loop = make_probe(lp_t_loop_insn, record_pre, nullptr);
    ASSERT_EQ(register_kprobe(&loop), 0);
    EXPECT_EQ(lp_t_loop(5), 5);
    EXPECT_EQ(g_seen.pre_calls, 5);
    unregister_kprobe(&loop);
}

TEST(Kprobe, RipRelativeLoadAndPushRunOutOfLine)
{
    g_seen = {};
    kprobe rip = make_probe(lp_t_riprel_load, record_pre, record_post);
    ASSERT_EQ(register_kprobe(&rip), 0);
    EXPECT_EQ(lp_t_riprel(), 0x1122334455667788);
    EXPECT_EQ(g_seen.post.ax, 0x1122334455667788u);
    unregister_kprobe(&rip);

    g_seen = {};
    kprobe push = make_probe(lp_t_push_insn, record_pre, record_post);
    ASSERT_EQ(register_kprobe(&push), 0);
    EXPECT_EQ(lp_t_push(1234), 1234);
    EXPECT_EQ(g_seen.post.sp, g_seen.pre.sp - 8);
    unregister_kprobe(&push);
}

// ---- nmissed: the kernel's test_kprobe_missed ----

std::atomic<int> g_missed_calls{0};
int missed_pre(kprobe *, pt_regs *)
{
    g_missed_calls++;
    lp_c_compute(1);  // hits the probe on lp_c_compute again: a miss
    return 0;
}
void missed_post(kprobe *, pt_regs *, unsigned long)
{
    g_missed_calls++;
    lp_c_compute(2);
}

TEST(Kprobe, HandlersCallingTheProbedFunctionCountTwoMisses)
{
    kprobe kp{};
    kp.symbol_name = "lp_c_compute";
    kp.pre_handler = missed_pre;
    kp.post_handler = missed_post;
    ASSERT_EQ(register_kprobe(&kp), 0);
    g_missed_calls = 0;
    EXPECT_EQ(lp_c_compute(3), 10);
    EXPECT_EQ(g_missed_calls.load(), 2);
    EXPECT_EQ(kp.nmissed, 2u);
    liveprobe_info info{};
    ASSERT_EQ(liveprobe_kprobe_info(&kp, &info), 0);
    EXPECT_EQ(info.hits, 1u);
    EXPECT_EQ(info.nmissed, 2u);
    // Optimized or not, the state is consistent: a reason exactly when not optimized.
    EXPECT_EQ(info.optimized != 0, (kp.flags & KPROBE_FLAG_OPTIMIZED) != 0);
    EXPECT_EQ(info.why_not_optimized == nullptr, info.optimized != 0);
    unregister_kprobe(&kp);
}

// ---- Disable / enable ----

TEST(Kprobe, DisableAndEnable)
{
    g_seen = {};
    kprobe kp{};
    kp.symbol_name = "lp_c_add";
    kp.pre_handler = record_pre;
    ASSERT_EQ(register_kprobe(&kp), 0);
    lp_c_add(1, 1);
    EXPECT_EQ(disable_kprobe(&kp), 0);
    EXPECT_TRUE(kp.flags & KPROBE_FLAG_DISABLED);
    EXPECT_EQ(*reinterpret_cast<unsigned char *>(&lp_c_add), *reinterpret_cast<unsigned char *>(kp.addr));
    EXPECT_NE(*reinterpret_cast<volatile unsigned char *>(kp.addr), 0xcc) << "disarmed";
    lp_c_add(1, 1);
    EXPECT_EQ(g_seen.pre_calls, 1);
    EXPECT_EQ(enable_kprobe(&kp), 0);
    EXPECT_FALSE(kp.flags & KPROBE_FLAG_DISABLED);
    lp_c_add(1, 1);
    EXPECT_EQ(g_seen.pre_calls, 2);
    unregister_kprobe(&kp);
    EXPECT_EQ(disable_kprobe(&kp), -EINVAL);
    EXPECT_EQ(enable_kprobe(&kp), -EINVAL);
}

TEST(Kprobe, RegisteredDisabledIsNotArmed)
{
    g_seen = {};
    kprobe kp{};
    kp.symbol_name = "lp_c_add";
    kp.pre_handler = record_pre;
    kp.flags = KPROBE_FLAG_DISABLED;
    ASSERT_EQ(register_kprobe(&kp), 0);
    lp_c_add(1, 1);
    EXPECT_EQ(g_seen.pre_calls, 0);
    ASSERT_EQ(enable_kprobe(&kp), 0);
    lp_c_add(1, 1);
    EXPECT_EQ(g_seen.pre_calls, 1);
    unregister_kprobe(&kp);
}

// ---- Batches ----

TEST(Kprobe, RegisterEachRegistersWhatItCanAndSaysWhyNotForTheRest)
{
    g_seen = {};
    kprobe add{}, missing{}, twice{}, compute{};
    add.symbol_name = "lp_c_add";
    add.pre_handler = record_pre;
    missing.symbol_name = "lp_no_such_function_anywhere";
    compute.symbol_name = "lp_c_compute";
    compute.pre_handler = record_pre;
    static int not_code = 0;
    twice.addr = reinterpret_cast<kprobe_opcode_t *>(&not_code);
    kprobe *batch[] = {&add, &missing, nullptr, &twice, &compute};
    int results[5] = {1, 1, 1, 1, 1};
    EXPECT_EQ(liveprobe_register_kprobes_each(batch, 5, results), 2);
    EXPECT_EQ(results[0], 0);
    EXPECT_EQ(results[1], -ENOENT);
    EXPECT_EQ(results[2], -EINVAL);
    EXPECT_EQ(results[3], -EINVAL);
    EXPECT_EQ(results[4], 0);
    EXPECT_NE(reason(-EINVAL).find("not"), std::string::npos) << reason(-EINVAL);
    lp_c_add(1, 1);
    lp_c_compute(1);
    EXPECT_EQ(g_seen.pre_calls, 2) << "both registered probes fire";
    liveprobe_info info;
    EXPECT_EQ(liveprobe_kprobe_info(&missing, &info), -EINVAL) << "the failed one is not registered";
    EXPECT_EQ(liveprobe_register_kprobes_each(batch, 0, results), -EINVAL);
    unregister_kprobe(&add);
    unregister_kprobe(&compute);
    lp_c_add(1, 1);
    EXPECT_EQ(g_seen.pre_calls, 2);
}

TEST(Kprobe, RegisterKprobesIsAllOrNothing)
{
    g_seen = {};
    kprobe good{};
    good.symbol_name = "lp_c_add";
    good.pre_handler = record_pre;
    kprobe bad{};
    bad.symbol_name = "lp_no_such_function_anywhere";
    kprobe *both[] = {&good, &bad};
    int rc = register_kprobes(both, 2);
    EXPECT_EQ(rc, -ENOENT);
    EXPECT_NE(reason(rc).find("lp_no_such_function_anywhere"), std::string::npos) << reason(rc);
    lp_c_add(1, 1);
    EXPECT_EQ(g_seen.pre_calls, 0) << "the first probe was rolled back";
    liveprobe_info info;
    EXPECT_EQ(liveprobe_kprobe_info(&good, &info), -EINVAL);

    kprobe two{};
    two.symbol_name = "lp_c_compute";
    two.pre_handler = record_pre;
    good.addr = nullptr;
    kprobe *ok[] = {&good, &two};
    ASSERT_EQ(register_kprobes(ok, 2), 0);
    lp_c_add(1, 1);
    lp_c_compute(1);
    EXPECT_EQ(g_seen.pre_calls, 2);
    unregister_kprobes(ok, 2);
    lp_c_add(1, 1);
    EXPECT_EQ(g_seen.pre_calls, 2);
}

// ---- Every error code from a real bad input ----

long g_not_code = 5;

TEST(KprobeErrors, EachErrorCodeWithAPreciseReason)
{
    kprobe kp{};
    EXPECT_EQ(register_kprobe(&kp), -EINVAL);  // neither
    EXPECT_NE(reason(-EINVAL).find("neither"), std::string::npos) << reason(-EINVAL);

    kp.addr = reinterpret_cast<kprobe_opcode_t *>(&lp_c_add);
    kp.symbol_name = "lp_c_add";
    EXPECT_EQ(register_kprobe(&kp), -EINVAL);  // both
    EXPECT_NE(reason(-EINVAL).find("both"), std::string::npos);

    kprobe twice{};
    twice.symbol_name = "lp_c_add";
    ASSERT_EQ(register_kprobe(&twice), 0);
    twice.symbol_name = nullptr;
    EXPECT_EQ(register_kprobe(&twice), -EINVAL);
    EXPECT_NE(reason(-EINVAL).find("already registered"), std::string::npos);
    unregister_kprobe(&twice);

    kprobe data = make_probe(&g_not_code);
    EXPECT_EQ(register_kprobe(&data), -EINVAL);
    EXPECT_NE(reason(-EINVAL).find("not in executable code"), std::string::npos) << reason(-EINVAL);

    kprobe self = make_probe(reinterpret_cast<void *>(&register_kprobe));
    EXPECT_EQ(register_kprobe(&self), -EINVAL);
    EXPECT_NE(reason(-EINVAL).find("inside liveprobe"), std::string::npos) << reason(-EINVAL);

    // The blacklist: glibc's signal-return trampoline (every handler's sa_restorer), as the
    // kernel holds it (sanitizer runtimes hide it from sigaction()).
    struct sigaction act{};
    act.sa_handler = [](int) {};
    sigaction(SIGUSR2, &act, nullptr);
    struct {
        void *handler;
        unsigned long flags;
        void *restorer;
        unsigned long mask;
    } kact{};
    ASSERT_EQ(syscall(SYS_rt_sigaction, SIGUSR2, nullptr, &kact, 8), 0);
    ASSERT_NE(kact.restorer, nullptr);
    kprobe restorer = make_probe(kact.restorer);
    EXPECT_EQ(register_kprobe(&restorer), -EINVAL);
    EXPECT_NE(reason(-EINVAL).find("blacklist"), std::string::npos) << reason(-EINVAL);

    kprobe unknown{};
    unknown.symbol_name = "lp_no_such_symbol";
    EXPECT_EQ(register_kprobe(&unknown), -ENOENT);
    EXPECT_NE(reason(-ENOENT).find("lp_no_such_symbol"), std::string::npos) << reason(-ENOENT);

    kprobe inside = make_probe(lp_t_ret42_mov + 1);  // inside the 5-byte movl $42,%eax
    EXPECT_EQ(register_kprobe(&inside), -EILSEQ);
    EXPECT_NE(reason(-EILSEQ).find("instruction boundary"), std::string::npos) << reason(-EILSEQ);

    kprobe offset{};
    offset.symbol_name = "lp_t_ret42";
    offset.offset = 2;
    EXPECT_EQ(register_kprobe(&offset), -EILSEQ);
    offset.addr = nullptr;
    offset.offset = 5;  // the ret
    EXPECT_EQ(register_kprobe(&offset), 0);
    EXPECT_EQ(reinterpret_cast<char *>(offset.addr), lp_t_ret42_ret);
    unregister_kprobe(&offset);

    kprobe sys = make_probe(lp_t_sys_syscall);
    EXPECT_EQ(register_kprobe(&sys), -EOPNOTSUPP);
    EXPECT_NE(reason(-EOPNOTSUPP).find("syscall"), std::string::npos) << reason(-EOPNOTSUPP);

    // Nothing above changed the code.
    EXPECT_EQ(lp_t_ret42(), 42);
    EXPECT_EQ(lp_c_add(2, 2), 4);
}

TEST(KprobeErrors, ProbeOnAnInstructionUnderAnotherProbeStillChecksBoundaries)
{
    // The boundary walk reads the original bytes under liveprobe's own int3s.
    kprobe first = make_probe(lp_t_ret42_mov);
    ASSERT_EQ(register_kprobe(&first), 0);
    kprobe second = make_probe(lp_t_ret42_ret);
    EXPECT_EQ(register_kprobe(&second), 0) << reason(-EILSEQ);
    kprobe inside = make_probe(lp_t_ret42_mov + 2);
    EXPECT_EQ(register_kprobe(&inside), -EILSEQ);
    EXPECT_EQ(lp_t_ret42(), 42);
    unregister_kprobe(&second);
    unregister_kprobe(&first);
}

// ---- Symbols through the API ----

TEST(KprobeSymbols, KallsymsLookupName)
{
    EXPECT_EQ(kallsyms_lookup_name("lp_c_add"), reinterpret_cast<unsigned long>(&lp_c_add));
    EXPECT_EQ(kallsyms_lookup_name("lp_no_such_symbol"), 0u);
    EXPECT_EQ(kallsyms_lookup_name("libc.so.6:getpid"), reinterpret_cast<unsigned long>(dlsym(RTLD_DEFAULT, "getpid")));
    EXPECT_EQ(kallsyms_lookup_name("getpid"), reinterpret_cast<unsigned long>(dlsym(RTLD_DEFAULT, "getpid")));
}

std::atomic<int> g_libc_hits{0};
int count_pre(kprobe *, pt_regs *)
{
    g_libc_hits++;
    return 0;
}

TEST(KprobeSymbols, LibcFunction)
{
    kprobe kp{};
    kp.symbol_name = "libc:getppid";
    kp.pre_handler = count_pre;
    ASSERT_EQ(register_kprobe(&kp), 0) << reason(-1);
    g_libc_hits = 0;
    pid_t expect = static_cast<pid_t>(syscall(SYS_getppid));
    EXPECT_EQ(getppid(), expect);
    EXPECT_EQ(getppid(), expect);
    EXPECT_EQ(g_libc_hits.load(), 2);
    unregister_kprobe(&kp);
}

size_t g_memcpy_len;
int memcpy_pre(kprobe *, pt_regs *r)
{
    if (r->dx == 4321) g_memcpy_len = r->dx;
    return 0;
}

TEST(KprobeSymbols, IfuncMemcpyProbesTheSelectedImplementation)
{
    kprobe kp{};
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    kp.symbol_name = "libc:memcpy";  // sanitizer runtimes define memcpy too: "memcpy" is ambiguous
#else
    kp.symbol_name = "memcpy";
#endif
    kp.pre_handler = memcpy_pre;
    kp.post_handler = [](kprobe *, pt_regs *, unsigned long) {};
    ASSERT_EQ(register_kprobe(&kp), 0) << reason(-1);
    // The implementation the resolver selected, not the resolver: what calls reach.
    void *(*volatile fn)(void *, const void *, size_t) = memcpy;
    static char src[8192], dst[8192];
    for (int i = 0; i < 8192; ++i) src[i] = char(i * 7);
    g_memcpy_len = 0;
    fn(dst, src, 4321);
    EXPECT_EQ(g_memcpy_len, 4321u);
    EXPECT_EQ(std::memcmp(dst, src, 4321), 0);
    unregister_kprobe(&kp);
}

}  // namespace

namespace lpt {
struct Widget {
    int base = 10;
    __attribute__((noinline)) int spin(int turns);
};
int Widget::spin(int turns)
{
    asm volatile("");
    return base + turns;
}
}  // namespace lpt

namespace {

long g_this_seen;
int widget_pre(kprobe *, pt_regs *r)
{
    g_this_seen = static_cast<long>(r->si);  // turns; di is `this`
    return 0;
}

TEST(KprobeSymbols, CppMethodByDemangledName)
{
    lpt::Widget w;
    for (const char *name : {"lpt::Widget::spin(int)", "lpt::Widget::spin", "_ZN3lpt6Widget4spinEi"}) {
        kprobe kp{};
        kp.symbol_name = name;
        kp.pre_handler = widget_pre;
        ASSERT_EQ(register_kprobe(&kp), 0) << name << ": " << reason(-1);
        g_this_seen = 0;
        EXPECT_EQ(w.spin(5), 15);
        EXPECT_EQ(g_this_seen, 5) << name;
        unregister_kprobe(&kp);
    }
}

}  // namespace

// ---- An object unloaded under its probes ----

namespace {

std::atomic<int> g_plugin_hits{0};
int plugin_pre(kprobe *, pt_regs *)
{
    g_plugin_hits++;
    return 0;
}

// libc's own dlclose, as libc's internal unloads (NSS, iconv) and a library loaded by dlopen
// (the agent, attached) reach it: the interposed dlclose never sees this unload.
int libc_dlclose(void *h)
{
    void *libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
    auto real = reinterpret_cast<int (*)(void *)>(dlsym(libc, "dlclose"));
    dlclose(libc);
    return real ? real(h) : -1;
}

TEST(KprobeGone, UnloadUnseenByTheInterposerIsCaughtBeforeTheNextChange)
{
    void *h = dlopen(LP_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(h, nullptr) << dlerror();
    kprobe kp{};
    kp.symbol_name = "lp_plugin:lp_plugin_twice";
    kp.pre_handler = plugin_pre;
    ASSERT_EQ(register_kprobe(&kp), 0) << liveprobe_strerror(-1);
    ASSERT_EQ(libc_dlclose(h), 0);
    EXPECT_FALSE(kp.flags & KPROBE_FLAG_GONE);  // nothing told liveprobe yet
    // Loaded again: the first registry change sees that the object left, and the gone probe's
    // bytes are never written over the new copy.
    void *h2 = dlopen(LP_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(h2, nullptr);
    auto twice2 = reinterpret_cast<int (*)(int)>(dlsym(h2, "lp_plugin_twice"));
    int before = g_plugin_hits.load();
    kprobe again{};
    again.symbol_name = "lp_plugin:lp_plugin_twice";
    again.pre_handler = plugin_pre;
    ASSERT_EQ(register_kprobe(&again), 0) << liveprobe_strerror(-1);
    EXPECT_TRUE(kp.flags & KPROBE_FLAG_GONE);
    EXPECT_EQ(twice2(6), 12);
    EXPECT_EQ(g_plugin_hits.load(), before + 1);
    unregister_kprobe(&kp);  // gone: restores nothing
    EXPECT_EQ(twice2(7), 14);
    EXPECT_EQ(g_plugin_hits.load(), before + 2);
    unregister_kprobe(&again);
    EXPECT_EQ(twice2(8), 16);
    EXPECT_EQ(g_plugin_hits.load(), before + 2);
    dlclose(h2);
    g_plugin_hits = 0;  // the next test counts from 0
}

TEST(KprobeGone, UnloadedObjectMarksProbesGone)
{
    void *h = dlopen(LP_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(h, nullptr) << dlerror();
    auto twice = reinterpret_cast<int (*)(int)>(dlsym(h, "lp_plugin_twice"));
    ASSERT_NE(twice, nullptr);
    kprobe kp{};
    kp.symbol_name = "lp_plugin:lp_plugin_twice";
    kp.pre_handler = plugin_pre;
    ASSERT_EQ(register_kprobe(&kp), 0) << liveprobe_strerror(-1);
    EXPECT_EQ(twice(21), 42);
    EXPECT_EQ(g_plugin_hits.load(), 1);
    ASSERT_EQ(dlclose(h), 0);
    EXPECT_TRUE(kp.flags & KPROBE_FLAG_GONE);
    EXPECT_EQ(enable_kprobe(&kp), -EINVAL);
    EXPECT_NE(std::string(liveprobe_strerror(-EINVAL)).find("unloaded"), std::string::npos);
    // Loaded again (maybe at the same address): the old probe does not touch it.
    void *h2 = dlopen(LP_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(h2, nullptr);
    auto twice2 = reinterpret_cast<int (*)(int)>(dlsym(h2, "lp_plugin_twice"));
    EXPECT_EQ(twice2(5), 10);
    EXPECT_EQ(g_plugin_hits.load(), 1);
    kprobe again{};
    again.symbol_name = "lp_plugin:lp_plugin_twice";
    again.pre_handler = plugin_pre;
    ASSERT_EQ(register_kprobe(&again), 0) << liveprobe_strerror(-1);
    unregister_kprobe(&kp);  // the gone probe: must not restore bytes over the new object
    EXPECT_EQ(twice2(6), 12);
    EXPECT_EQ(g_plugin_hits.load(), 2);
    unregister_kprobe(&again);
    EXPECT_EQ(twice2(7), 14);
    EXPECT_EQ(g_plugin_hits.load(), 2);
    dlclose(h2);
}

}  // namespace
