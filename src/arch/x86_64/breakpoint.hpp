// The breakpoint path on x86-64: liveprobe's SIGTRAP handler (an int3 at a probed address, or
// at the end of an out-of-line copy when post handlers must run) and its fault-signal handler.
//
// A hit, step by step:
//   1. int3 at A traps; the handler finds A's probe point (dispatch acquire()). None: a stale
//      int3 (another thread just removed it: resume at A) or the program's own (forwarded).
//   2. Pre handlers run on a pt_regs built from the signal context (ip = A).
//   3. The instruction runs out of line: the context resumes in A's slot, a relocated copy
//      followed by a jump back to A + len, or by an int3 when post handlers must run
//      (step 4). Control transfers (jmp, jcc, call, ret, loop, jrcxz) are emulated instead.
//   4. The int3 in the slot traps; post handlers run with ip = A + len; resume there.
// No single-step trap is ever used.
#pragma once

#include <signal.h>
#include <ucontext.h>

#include <liveprobe/kprobes.h>

namespace liveprobe::core {

void breakpoint_trap_handler(int sig, siginfo_t *info, ucontext_t *uc);
void breakpoint_fault_handler(int sig, siginfo_t *info, ucontext_t *uc);

}  // namespace liveprobe::core

namespace liveprobe::arch {

void regs_from_context(const ucontext_t *uc, struct pt_regs *regs) noexcept;
void regs_to_context(const struct pt_regs *regs, ucontext_t *uc) noexcept;

}  // namespace liveprobe::arch
