#include "ptrace_thread.hpp"

#include <elf.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

namespace liveprobe::tool {

void test_kill_point(const char *name)
{
    const char *at = secure_getenv("LIVEPROBE_TEST_KILL_AT");
    if (at && std::strcmp(at, name) == 0) kill(getpid(), SIGKILL);
}

namespace {

// The kernel's internal restart codes, as a stopped system call reports them in rax.
constexpr long kErestartSys = 512, kErestartNoIntr = 513, kErestartNoHand = 514, kErestartRestartBlock = 516;

// System calls that fail with EINTR after a stop even with no signal handler (signal(7), "Linux
// ... stopped ... and then resumed"): the stop was ours, so they are started again.
bool eintr_after_stop(long nr)
{
    switch (nr) {
    case SYS_epoll_wait:
    case SYS_epoll_pwait:
#ifdef SYS_epoll_pwait2
    case SYS_epoll_pwait2:
#endif
    case SYS_rt_sigtimedwait:
    case SYS_semop:
    case SYS_semtimedop:
    case SYS_io_getevents:
        return true;
    default:
        return false;
    }
}

uint64_t blocked_signals(pid_t tid)
{
    std::ifstream in(fmt::format("/proc/{}/status", tid));
    for (std::string line; std::getline(in, line);)
        if (line.rfind("SigBlk:", 0) == 0) return std::strtoull(line.c_str() + 7, nullptr, 16);
    return 0;
}

bool write_mem(pid_t pid, uint64_t addr, const void *data, size_t len)
{
    struct iovec local = {const_cast<void *>(data), len};
    struct iovec remote = {reinterpret_cast<void *>(addr), len};
    ssize_t n = process_vm_writev(pid, &local, 1, &remote, 1, 0);
    if (n == static_cast<ssize_t>(len)) return true;
    // Fall back to word-sized pokes (process_vm_writev needs the pages writable, as a stack is).
    const auto *p = static_cast<const uint8_t *>(data);
    for (size_t off = 0; off < len; off += 8) {
        uint64_t word = 0;
        size_t n8 = std::min<size_t>(8, len - off);
        if (n8 < 8) {
            errno = 0;
            long old = ptrace(PTRACE_PEEKDATA, pid, addr + off, nullptr);
            if (errno) return false;
            std::memcpy(&word, &old, 8);
        }
        std::memcpy(&word, p + off, n8);
        if (ptrace(PTRACE_POKEDATA, pid, addr + off, word) != 0) return false;
    }
    return true;
}


}  // namespace

PtraceThread::~PtraceThread() { detach(); }

int PtraceThread::wait_stop(int *status, int timeout_ms, std::string *why)
{
    for (int waited = 0;; ++waited) {
        pid_t r = waitpid(tid_, status, __WALL | WNOHANG);
        if (r == tid_) return 0;
        if (r < 0 && errno != EINTR) {
            int e = errno;
            *why = fmt::format("waitpid({}): {}", tid_, std::strerror(e));
            return -e;
        }
        if (waited >= timeout_ms * 10) {
            *why = fmt::format("thread {} did not stop within {} ms", tid_, timeout_ms);
            return -ETIMEDOUT;
        }
        usleep(100);
    }
}

int PtraceThread::seize_and_stop(std::string *why, int timeout_ms)
{
    if (ptrace(PTRACE_SEIZE, tid_, nullptr, nullptr) != 0) {
        int e = errno;
        *why = e == ESRCH ? fmt::format("thread {} is gone", tid_)
             : e == EPERM ? fmt::format("not allowed to trace thread {} (another user's process, a process "
                                        "already traced, or ptrace restricted by kernel.yama.ptrace_scope)",
                                        tid_)
                          : fmt::format("PTRACE_SEIZE {}: {}", tid_, std::strerror(e));
        return -e;
    }
    attached_ = true;
    test_kill_point("seized");
    if (ptrace(PTRACE_INTERRUPT, tid_, nullptr, nullptr) != 0) {
        int e = errno;
        *why = fmt::format("PTRACE_INTERRUPT {}: {}", tid_, std::strerror(e));
        attached_ = e != ESRCH;
        return -e;
    }
    int st = 0;
    if (int r = wait_stop(&st, timeout_ms, why); r < 0) return r;
    if (WIFEXITED(st) || WIFSIGNALED(st)) {
        attached_ = false;
        *why = fmt::format("thread {} exited", tid_);
        return -ESRCH;
    }
    if (WIFSTOPPED(st) && (st >> 16) != PTRACE_EVENT_STOP) {
        // A signal-delivery-stop: the signal was on its way; it goes on when the thread is let go.
        pending_.push_back(WSTOPSIG(st));
    }
    test_kill_point("stopped");
    return get_state(why);
}

int PtraceThread::get_state(std::string *why)
{
    if (ptrace(PTRACE_GETREGS, tid_, nullptr, &regs_) != 0) {
        int e = errno;
        *why = fmt::format("PTRACE_GETREGS {}: {}", tid_, std::strerror(e));
        return -e;
    }
    xstate_.assign(16384, 0);
    struct iovec iov = {xstate_.data(), xstate_.size()};
    if (ptrace(PTRACE_GETREGSET, tid_, NT_X86_XSTATE, &iov) != 0) {
        int e = errno;
        *why = fmt::format("PTRACE_GETREGSET NT_X86_XSTATE {}: {}", tid_, std::strerror(e));
        return -e;
    }
    xstate_.resize(iov.iov_len);
    sigmask_ = blocked_signals(tid_);
    return 0;
}

bool PtraceThread::read(uint64_t addr, void *out, size_t len) const
{
    struct iovec local = {out, len};
    struct iovec remote = {reinterpret_cast<void *>(addr), len};
    return process_vm_readv(tid_, &local, 1, &remote, 1, 0) == static_cast<ssize_t>(len);
}

bool PtraceThread::write(uint64_t addr, const void *data, size_t len) const { return write_mem(tid_, addr, data, len); }

std::string PtraceThread::read_string(uint64_t addr, size_t max) const
{
    std::string out;
    char buf[256];
    while (out.size() < max) {
        if (!read(addr + out.size(), buf, sizeof buf)) {
            // The string may end near the end of a mapping: byte by byte.
            char c;
            if (!read(addr + out.size(), &c, 1) || c == 0) break;
            out += c;
            continue;
        }
        size_t n = strnlen(buf, sizeof buf);
        out.append(buf, n);
        if (n < sizeof buf) break;
    }
    return out;
}

namespace {
// Where the stub keeps its data, from the ucontext at X (the stack pointer when the call
// returns): fields rt_sigreturn does not read.
constexpr uint64_t kResultAt = offsetof(ucontext_t, uc_link);
constexpr uint64_t kDoneAt = offsetof(ucontext_t, uc_mcontext) + REG_ERR * sizeof(greg_t);
constexpr uint64_t kWaitAt = offsetof(ucontext_t, uc_mcontext.__reserved1);
static_assert(kResultAt == 8 && kDoneAt == 0xc0 && kWaitAt == 0xe8, "the stub's code has these offsets built in");
static_assert(sizeof(ucontext_t::uc_mcontext.__reserved1) >= 4 * 8, "the timeval, the pid and the rounds");

// This process's pid as process `target` sees it: 0 when they are in different pid namespaces
// (the stub then waits its 3 s out if the tool dies).
pid_t pid_seen_by(pid_t target)
{
    struct stat mine {}, theirs {};
    if (stat("/proc/self/ns/pid", &mine) != 0 || stat(fmt::format("/proc/{}/ns/pid", target).c_str(), &theirs) != 0)
        return 0;
    return mine.st_ino == theirs.st_ino && mine.st_dev == theirs.st_dev ? getpid() : 0;
}
}  // namespace

std::string PtraceThread::stub_code()
{
    // After the call: select() for 50 ms at a time, then kill(TOOL, 0): a tool that died is
    // seen within 50 ms (ESRCH) and the thread goes home at once; one that lives stops it
    // before (it polls the done flag). At most 60 rounds (3 s), for a tool whose pid the
    // target cannot see (0: kill(0, 0) never fails with ESRCH) or may not signal. select() and
    // kill() leave the thread's restart block alone (nanosleep or poll would not).
    static const uint8_t code[] = {
        0x41, 0xff, 0xd3,                                      // 00: call *%r11
        0x48, 0x89, 0x44, 0x24, 0x08,                          // 03: mov %rax, 0x8(%rsp)      (uc_link: result)
        0xc7, 0x84, 0x24, 0xc0, 0, 0, 0, 1, 0, 0, 0,           // 08: movl $1, 0xc0(%rsp)      (done)
        0x31, 0xc0,                                            // 13: xor %eax, %eax           (a round:)
        0x48, 0x89, 0x84, 0x24, 0xe8, 0, 0, 0,                 // 15: mov %rax, 0xe8(%rsp)     (tv_sec 0)
        0xc7, 0x84, 0x24, 0xf0, 0, 0, 0, 0x50, 0xc3, 0, 0,     // 1d: movl $50000, 0xf0(%rsp)  (tv_usec)
        0x31, 0xff,                                            // 28: xor %edi, %edi
        0x31, 0xf6,                                            // 2a: xor %esi, %esi
        0x31, 0xd2,                                            // 2c: xor %edx, %edx
        0x45, 0x31, 0xd2,                                      // 2e: xor %r10d, %r10d
        0x4c, 0x8d, 0x84, 0x24, 0xe8, 0, 0, 0,                 // 31: lea 0xe8(%rsp), %r8      (the timeval)
        0xb8, 0x17, 0x00, 0x00, 0x00,                          // 39: mov $23, %eax            (select)
        0x0f, 0x05,                                            // 3e: syscall
        0x8b, 0xbc, 0x24, 0xf8, 0, 0, 0,                       // 40: mov 0xf8(%rsp), %edi     (the tool's pid)
        0x31, 0xf6,                                            // 47: xor %esi, %esi
        0xb8, 0x3e, 0x00, 0x00, 0x00,                          // 49: mov $62, %eax            (kill)
        0x0f, 0x05,                                            // 4e: syscall
        0x83, 0xf8, 0xfd,                                      // 50: cmp $-3, %eax            (ESRCH: gone)
        0x74, 0x09,                                            // 53: je 0x5e
        0xff, 0x8c, 0x24, 0x00, 0x01, 0, 0,                    // 55: decl 0x100(%rsp)         (rounds left)
        0x75, 0xb5,                                            // 5c: jne 0x13
        0xb8, 0x0f, 0x00, 0x00, 0x00,                          // 5e: mov $15, %eax            (rt_sigreturn)
        0x0f, 0x05,                                            // 63: syscall
        0xeb, 0xf7,                                            // 65: jmp 0x5e
    };
    static_assert(sizeof code <= kStubBytes);
    return std::string(reinterpret_cast<const char *>(code), sizeof code);
}

int PtraceThread::call(uint64_t fn, std::vector<uint64_t> args, int data_arg, const std::string &data,
                       const Return &ret, uint64_t *result, std::string *why, int timeout_ms)
{
    *result = 0;
    if (args.size() > 6) {
        *why = "at most 6 arguments";
        return -EINVAL;
    }
    // 1. The frame, below the red zone: data, the extended state, then the ucontext at X
    //    (16-aligned); rt_sigreturn finds it with the stack pointer at X.
    uint64_t sp = regs_.rsp - 128 - 256;
    sp = (sp - data.size() - 1) & ~uint64_t(15);
    uint64_t data_at = sp;
    size_t xs = xstate_.size();
    sp = (sp - xs - 4 - 64) & ~uint64_t(63);
    uint64_t fp_at = sp;
    sp = (sp - sizeof(ucontext_t)) & ~uint64_t(15);
    uint64_t x = sp;

    // The state rt_sigreturn restores: the thread as stopped, an interrupted system call set
    // to run again.
    ucontext_t uc;
    std::memset(&uc, 0, sizeof uc);
    uc.uc_flags = 0x1 | 0x2 | 0x4;  // UC_FP_XSTATE | UC_SIGCONTEXT_SS | UC_STRICT_RESTORE_SS
    uc.uc_stack.ss_flags = 3;        // invalid: the thread's alternate stack is left as it is
    greg_t *g = uc.uc_mcontext.gregs;
    g[REG_R8] = regs_.r8, g[REG_R9] = regs_.r9, g[REG_R10] = regs_.r10, g[REG_R11] = regs_.r11;
    g[REG_R12] = regs_.r12, g[REG_R13] = regs_.r13, g[REG_R14] = regs_.r14, g[REG_R15] = regs_.r15;
    g[REG_RDI] = regs_.rdi, g[REG_RSI] = regs_.rsi, g[REG_RBP] = regs_.rbp, g[REG_RBX] = regs_.rbx;
    g[REG_RDX] = regs_.rdx, g[REG_RAX] = regs_.rax, g[REG_RCX] = regs_.rcx, g[REG_RSP] = regs_.rsp;
    g[REG_RIP] = regs_.rip, g[REG_EFL] = regs_.eflags;
    g[REG_CSGSFS] = static_cast<greg_t>((regs_.cs & 0xffff) | (regs_.gs & 0xffff) << 16 | (regs_.fs & 0xffff) << 32 |
                                        (regs_.ss & 0xffff) << 48);
    long nr = static_cast<long>(regs_.orig_rax), rv = static_cast<long>(regs_.rax);
    if (nr >= 0 && (rv == -kErestartSys || rv == -kErestartNoIntr || rv == -kErestartNoHand ||
                    rv == -kErestartRestartBlock || (rv == -EINTR && eintr_after_stop(nr) && pending_.empty()))) {
        g[REG_RAX] = nr;
        g[REG_RIP] = static_cast<greg_t>(regs_.rip - 2);  // the syscall instruction again
    }
    uc.uc_mcontext.fpregs = reinterpret_cast<fpregset_t>(fp_at);
    std::memcpy(&uc.uc_sigmask, &sigmask_, sizeof sigmask_);
    // The stub's data (see stub_code): no result, not done; the timeval it sets each round; the
    // tool's pid as the target sees it; 60 rounds of 50 ms at most.
    uc.uc_mcontext.__reserved1[0] = 0;
    uc.uc_mcontext.__reserved1[1] = 0;
    uc.uc_mcontext.__reserved1[2] = static_cast<unsigned long long>(pid_seen_by(pid_));
    uc.uc_mcontext.__reserved1[3] = 60;

    std::vector<uint8_t> fp(xstate_);
    // The software-reserved bytes of the FXSAVE image (464..511) describe the XSAVE area to the
    // kernel (the regset fills them in); magic2 closes the area.
    uint32_t magic1 = 0;
    std::memcpy(&magic1, fp.data() + 464, 4);
    uint32_t xsize = static_cast<uint32_t>(xs);
    if (magic1 == 0x46505853u) std::memcpy(&xsize, fp.data() + 464 + 16, 4);
    xsize = std::min<uint32_t>(xsize, static_cast<uint32_t>(xs));
    fp.resize(xsize + 4);
    uint32_t magic2 = 0x46505845u;
    std::memcpy(fp.data() + xsize, &magic2, 4);

    uint64_t ret_slot = x - 8, home = ret.restore_rt;
    if (!write_mem(tid_, data_at, data.c_str(), data.size() + 1) || !write_mem(tid_, fp_at, fp.data(), fp.size()) ||
        !write_mem(tid_, x, &uc, sizeof uc) || (!ret.stub && !write_mem(tid_, ret_slot, &home, 8))) {
        int e = errno ? errno : EFAULT;
        *why = fmt::format("cannot write to the stack of thread {}: {}", tid_, std::strerror(e));
        return -e;
    }
    if (data_arg >= 0 && static_cast<size_t>(data_arg) < args.size()) args[data_arg] = data_at;
    test_kill_point("frame-written");

    // 2. The call: through the stub (which calls r11 from X), or straight to fn returning to
    //    __restore_rt (return address at X - 8).
    user_regs_struct r = regs_;
    unsigned long long *argregs[] = {&r.rdi, &r.rsi, &r.rdx, &r.rcx, &r.r8, &r.r9};
    for (size_t i = 0; i < args.size(); ++i) *argregs[i] = args[i];
    if (ret.stub) {
        r.rip = ret.stub;
        r.r11 = fn;
        r.rsp = x;
    } else {
        r.rip = fn;
        r.rsp = ret_slot;
    }
    r.rax = 0;
    r.orig_rax = static_cast<uint64_t>(-1);  // not in a system call: nothing to restart
    r.eflags &= ~uint64_t(0x400 | 0x100);    // DF, TF
    if (ptrace(PTRACE_SETREGS, tid_, nullptr, &r) != 0) {
        int e = errno;
        *why = fmt::format("PTRACE_SETREGS {}: {}", tid_, std::strerror(e));
        return -e;
    }
    changed_ = true;
    interrupted_ = false;
    test_kill_point("registers-set");
    if (ret.stub) return finish_stub_call(ret, x, result, why, timeout_ms);
    ptrace(PTRACE_SETOPTIONS, tid_, nullptr, PTRACE_O_TRACESYSGOOD);
    if (ptrace(PTRACE_SYSCALL, tid_, nullptr, nullptr) != 0) {
        int e = errno;
        *why = fmt::format("PTRACE_SYSCALL {}: {}", tid_, std::strerror(e));
        return -e;
    }
    test_kill_point("calling");

    // 3. Follow it to its rt_sigreturn (the stack pointer at X). While the tool lives, that
    //    rt_sigreturn is skipped: it would forget the restart block of an interrupted system
    //    call (nanosleep's remaining time); the tool restores the thread itself. The thread is
    //    left before the sigreturn instruction, its way home should the tool die now.
    uint64_t sigreturn_insn = ret.restore_rt;
    bool returning = false;
    for (;;) {
        int st = 0;
        int w = wait_stop(&st, timeout_ms, why);
        if (w == -ETIMEDOUT) {
            // Still inside the call (perhaps waiting for a lock): it comes home by itself through
            // the frame. Let it go as it is.
            changed_ = false;
            *why = fmt::format("the call in thread {} did not return within {} ms; the thread will resume by "
                               "itself when it does",
                               tid_, timeout_ms);
            return -ETIMEDOUT;
        }
        if (w < 0) return w;
        if (WIFEXITED(st) || WIFSIGNALED(st)) {
            attached_ = changed_ = false;
            *why = WIFSIGNALED(st) ? fmt::format("the process was killed by signal {} during the call", WTERMSIG(st))
                                   : "the process exited during the call";
            return -ESRCH;
        }
        int sig = WSTOPSIG(st);
        if (sig == (SIGTRAP | 0x80)) {  // a system call stop
            struct __ptrace_syscall_info info {};
            ptrace(PTRACE_GET_SYSCALL_INFO, tid_, sizeof info, &info);
            if (returning && info.op == PTRACE_SYSCALL_INFO_EXIT) {
                user_regs_struct home {};
                ptrace(PTRACE_GETREGS, tid_, nullptr, &home);
                home.rip = sigreturn_insn;
                home.rsp = x;
                home.orig_rax = static_cast<uint64_t>(-1);
                ptrace(PTRACE_SETREGS, tid_, nullptr, &home);
                break;
            }
            if (!returning && info.op == PTRACE_SYSCALL_INFO_ENTRY && info.entry.nr == SYS_rt_sigreturn &&
                info.stack_pointer == x) {
                returning = true;
                test_kill_point("returned");
                user_regs_struct skip {};
                ptrace(PTRACE_GETREGS, tid_, nullptr, &skip);
                skip.orig_rax = static_cast<uint64_t>(-1);  // the system call is skipped
                ptrace(PTRACE_SETREGS, tid_, nullptr, &skip);
            }
            ptrace(PTRACE_SYSCALL, tid_, nullptr, nullptr);
            continue;
        }
        if ((st >> 16) == PTRACE_EVENT_STOP) {  // a stop of ours, or a group-stop: go on
            ptrace(PTRACE_SYSCALL, tid_, nullptr, nullptr);
            continue;
        }
        if (sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGFPE) {
            user_regs_struct now {};
            ptrace(PTRACE_GETREGS, tid_, nullptr, &now);
            *why = fmt::format("the call faulted in thread {} (signal {} at {:#x}); its registers are restored", tid_,
                               sig, now.rip);
            std::string err;
            restore(&err);
            return -EFAULT;
        }
        pending_.push_back(sig);  // the program's: delivered when the thread is let go
        ptrace(PTRACE_SYSCALL, tid_, nullptr, nullptr);
    }
    return 0;
}

int PtraceThread::finish_stub_call(const Return &ret, uint64_t x, uint64_t *result, std::string *why, int timeout_ms)
{
    if (ptrace(PTRACE_CONT, tid_, nullptr, nullptr) != 0) {
        int e = errno;
        *why = fmt::format("PTRACE_CONT {}: {}", tid_, std::strerror(e));
        return -e;
    }
    test_kill_point("calling");
    // The call runs unobserved; the tool looks at the done flag, and handles the stops signals
    // cause meanwhile. It looks less and less often (from 0.1 to 2 ms): on a busy machine its
    // own wakeups take CPU from the call.
    int pause_us = 100;
    for (int waited_us = 0;; waited_us += pause_us, pause_us = std::min(2000, pause_us * 3 / 2)) {
        int st = 0;
        pid_t w = waitpid(tid_, &st, __WALL | WNOHANG);
        if (w == tid_) {
            if (WIFEXITED(st) || WIFSIGNALED(st)) {
                attached_ = changed_ = false;
                *why = WIFSIGNALED(st) ? fmt::format("the process was killed by signal {} during the call", WTERMSIG(st))
                                       : "the process exited during the call";
                return -ESRCH;
            }
            int sig = WSTOPSIG(st);
            if ((st >> 16) != PTRACE_EVENT_STOP) {
                if (sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGFPE) {
                    user_regs_struct now {};
                    ptrace(PTRACE_GETREGS, tid_, nullptr, &now);
                    *why = fmt::format("the call faulted in thread {} (signal {} at {:#x}); its registers are restored",
                                       tid_, sig, now.rip);
                    std::string err;
                    restore(&err);
                    return -EFAULT;
                }
                pending_.push_back(sig);  // the program's: delivered when the thread is let go
            }
            ptrace(PTRACE_CONT, tid_, nullptr, nullptr);
            pause_us = 100;
            continue;
        }
        uint64_t done = 0;
        if (read(x + kDoneAt, &done, 8) && done == 1) break;
        if (waited_us >= timeout_ms * 1000) {
            // Still inside the call (perhaps waiting for a lock): it comes home by itself through
            // the frame. Let it go as it is.
            changed_ = false;
            *why = fmt::format("the call in thread {} did not return within {} ms; the thread will resume by "
                               "itself when it does",
                               tid_, timeout_ms);
            return -ETIMEDOUT;
        }
        usleep(static_cast<useconds_t>(pause_us));
    }
    if (!read(x + kResultAt, result, 8)) *result = 0;
    test_kill_point("returned");
    // Stop it where it waits for the tool.
    if (ptrace(PTRACE_INTERRUPT, tid_, nullptr, nullptr) != 0) {
        int e = errno;
        *why = fmt::format("PTRACE_INTERRUPT {}: {}", tid_, std::strerror(e));
        return -e;
    }
    if (int w = wait_interrupt_stop(why); w < 0) return w;
    user_regs_struct now {};
    ptrace(PTRACE_GETREGS, tid_, nullptr, &now);
    if (now.rip < ret.stub || now.rip >= ret.stub + kStubBytes) {
        // It waited out the tool and went home through rt_sigreturn: nothing left to restore.
        changed_ = false;
        get_state(why);
    } else {
        interrupted_ = true;  // at a PTRACE_INTERRUPT stop: restore() puts the registers back here
    }
    return 0;
}

int PtraceThread::wait_interrupt_stop(std::string *why)
{
    for (;;) {
        int st = 0;
        if (int w = wait_stop(&st, 2000, why); w < 0) return w;
        if (WIFEXITED(st) || WIFSIGNALED(st)) {
            attached_ = changed_ = false;
            *why = "the process exited";
            return -ESRCH;
        }
        if ((st >> 16) == PTRACE_EVENT_STOP) return 0;
        // A system call stop left over from PTRACE_SYSCALL is not a signal of the program's.
        if (WSTOPSIG(st) != (SIGTRAP | 0x80)) pending_.push_back(WSTOPSIG(st));
        ptrace(PTRACE_CONT, tid_, nullptr, nullptr);
    }
}

int PtraceThread::restore(std::string *why)
{
    if (!changed_) return 0;
    // A PTRACE_INTERRUPT stop is one after which the kernel itself restarts a system call the
    // way it was interrupted: there the exact registers go back, before the thread runs again.
    // After a stub call the thread is at one already (waiting in the stub); after a call through
    // __restore_rt it stands before its rt_sigreturn (or at a fault), and is stopped there.
    if (!interrupted_) {
        if (ptrace(PTRACE_INTERRUPT, tid_, nullptr, nullptr) != 0 || ptrace(PTRACE_CONT, tid_, nullptr, nullptr) != 0) {
            int e = errno;
            *why = fmt::format("cannot stop thread {} again: {}", tid_, std::strerror(e));
            return -e;
        }
        if (int w = wait_interrupt_stop(why); w < 0) return w;
    }
    interrupted_ = false;
    test_kill_point("restoring");
    if (ptrace(PTRACE_SETREGS, tid_, nullptr, &regs_) != 0) {
        int e = errno;
        *why = fmt::format("cannot restore the registers of thread {}: {}", tid_, std::strerror(e));
        return -e;
    }
    struct iovec iov = {xstate_.data(), xstate_.size()};
    if (ptrace(PTRACE_SETREGSET, tid_, NT_X86_XSTATE, &iov) != 0) {
        int e = errno;
        *why = fmt::format("cannot restore the extended state of thread {}: {}", tid_, std::strerror(e));
        return -e;
    }
    changed_ = false;
    return 0;
}

void PtraceThread::fix_interrupted_syscall()
{
    long nr = static_cast<long>(regs_.orig_rax);
    if (nr < 0 || static_cast<long>(regs_.rax) != -EINTR || !eintr_after_stop(nr) || !pending_.empty()) return;
    user_regs_struct r = regs_;
    r.rax = static_cast<uint64_t>(nr);
    r.rip -= 2;
    if (ptrace(PTRACE_SETREGS, tid_, nullptr, &r) == 0) regs_ = r;
}

void PtraceThread::detach()
{
    if (!attached_) return;
    std::string why;
    restore(&why);
    fix_interrupted_syscall();
    int sig = pending_.empty() ? 0 : pending_.front();
    ptrace(PTRACE_DETACH, tid_, nullptr, reinterpret_cast<void *>(static_cast<long>(sig)));
    for (size_t i = 1; i < pending_.size(); ++i) syscall(SYS_tgkill, pid_, tid_, pending_[i]);
    attached_ = false;
}

}  // namespace liveprobe::tool
