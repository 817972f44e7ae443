// One thread of another process under ptrace: seized, stopped, made to call functions, and
// put back exactly as it was.
//
// Killing the tool at any moment must leave the target unharmed. PTRACE_SEIZE gives the first
// half: the kernel detaches a dead tracer's threads, none is left stopped. For the second, a
// thread made to call a function always has a way home that needs no tool: the call returns
// into rt_sigreturn over a signal frame built on its stack from its own registers, signal
// mask and extended state (an interrupted system call set to run again, since rt_sigreturn
// restarts nothing). The return goes either into the C library's __restore_rt, or into a stub
// that first stores the result in memory (the stub page, see Stub). The tool follows the call
// with PTRACE_SYSCALL, lets rt_sigreturn run, and then puts back the exact registers and
// extended state at a stop from which the kernel restarts the interrupted system call itself
// (a PTRACE_INTERRUPT stop), remaining time included.
#pragma once

#include <sys/types.h>
#include <sys/user.h>

#include <cstdint>
#include <string>
#include <vector>

namespace liveprobe::tool {

// Steps of an attach at which a test may have the tool kill itself
// (LIVEPROBE_TEST_KILL_AT=NAME): it must leave the target unharmed at every one.
void test_kill_point(const char *name);

class PtraceThread {
public:
    PtraceThread(pid_t pid, pid_t tid) : pid_(pid), tid_(tid) {}
    ~PtraceThread();  // detaches if still attached (restoring the registers if a call ran)
    PtraceThread(const PtraceThread &) = delete;
    PtraceThread &operator=(const PtraceThread &) = delete;

    pid_t tid() const { return tid_; }

    // PTRACE_SEIZE + PTRACE_INTERRUPT, then waits until it is stopped: 0, or -errno with *why
    // (-ESRCH: it exited; -EPERM: not allowed).
    int seize_and_stop(std::string *why, int timeout_ms = 2000);

    // Its registers as stopped.
    const user_regs_struct &regs() const { return regs_; }

    // Where a call returns. With a stub (stub_code() somewhere executable in the process), the
    // result comes back; with only __restore_rt (before a stub exists), there is none.
    struct Return {
        uint64_t stub = 0;
        uint64_t restore_rt = 0;
    };
    // The stub's code, position-independent, its data in fields of the frame's ucontext that
    // rt_sigreturn ignores (uc_link: the result; gregs[REG_ERR]: done; __reserved1: a
    // timeval, the tool's pid, rounds left): call *%r11; store the result; set done; wait for
    // the tool in select(), 50 ms at a time, checking that the tool lives (kill(pid, 0)), at
    // most 3 s: the tool stops the thread there and restores it; then rt_sigreturn (again if
    // it was skipped), its way home when the tool is gone, within 50 ms of its death. The call runs unobserved, at full
    // speed: a tool stop per system call costs a scheduling round trip each, about 180 ms in
    // all on a busy machine.
    static std::string stub_code();
    static constexpr size_t kStubBytes = 128;

    // Calls fn(args...) (up to 6 integer arguments) in the thread, with `data` copied onto its
    // stack first: args[data_arg] (if >= 0) becomes the copy's address. *result: the return
    // value (0 without a stub). 0, or -errno with *why.
    int call(uint64_t fn, std::vector<uint64_t> args, int data_arg, const std::string &data, const Return &ret,
             uint64_t *result, std::string *why, int timeout_ms = 10000);

    // Reads `len` bytes at `addr` of the process.
    bool read(uint64_t addr, void *out, size_t len) const;
    // Writes `len` bytes at `addr` of the process.
    bool write(uint64_t addr, const void *data, size_t len) const;
    // Reads a NUL-terminated string (at most `max` bytes).
    std::string read_string(uint64_t addr, size_t max = 4096) const;

    // Undoes what a system call interrupted by the stop would report to the program although
    // no signal handler ran: the calls that return EINTR after a stop rather than being
    // restarted by the kernel (epoll_wait, sigtimedwait, semop, ...) are made to start again.
    void fix_interrupted_syscall();

    // Restores the registers and extended state as stopped (when a call changed them) and lets
    // the thread go, delivering a signal that arrived meanwhile. Idempotent.
    void detach();

private:
    int wait_stop(int *status, int timeout_ms, std::string *why);
    int get_state(std::string *why);
    int restore(std::string *why);
    // Waits for the PTRACE_EVENT_STOP a PTRACE_INTERRUPT asked for, keeping the program's
    // signals that stop it first for later.
    int wait_interrupt_stop(std::string *why);
    int finish_stub_call(const Return &ret, uint64_t x, uint64_t *result, std::string *why, int timeout_ms);

    pid_t pid_;
    pid_t tid_;
    bool attached_ = false;
    bool changed_ = false;          // a call ran: restore the registers before detaching
    bool interrupted_ = false;      // and it is at a PTRACE_INTERRUPT stop already
    user_regs_struct regs_{};       // as stopped
    std::vector<uint8_t> xstate_;   // NT_X86_XSTATE as stopped
    uint64_t sigmask_ = 0;          // blocked signals as stopped
    std::vector<int> pending_;      // signals to deliver when letting it go
};

}  // namespace liveprobe::tool
