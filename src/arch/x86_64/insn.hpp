// x86-64 instruction tools for the breakpoint path: decode and classify one instruction, build
// its out-of-line copy ("slot"), and emulate the control transfers that cannot run out of line.
// These only produce bytes and register values; the policy of what to patch lives in src/core.
//
// Everything here is pure (no I/O, no allocation, no locks) and async-signal-safe, except
// decode(), which runs at registration time.
#pragma once

#include <cstddef>
#include <cstdint>

#include <Zydis/Zydis.h>

struct pt_regs;

namespace liveprobe::arch {

constexpr size_t kMaxInsnLen = 15;

// How the breakpoint path runs a probed instruction.
enum class InsnClass : uint8_t {
    kOutOfLine,  // runs as is from a slot (RIP-relative operands rebased), then jumps back
    kEmulate,    // a control transfer: jmp/jcc/call/ret/loop/jrcxz, direct or indirect;
                 // computed by emulate(); never executed out of line
};

// One decoded instruction at its original address. Trivially copyable: it is copied into
// the probe point at registration and read by signal handlers.
struct Insn {
    uint64_t addr = 0;  // where the original instruction lives
    uint8_t len = 0;
    uint8_t bytes[kMaxInsnLen] = {};
    InsnClass cls = InsnClass::kOutOfLine;
    bool rip_relative = false;  // has a RIP-relative memory operand (disp32 rebased in slots)
    // For a direct (relative) kEmulate branch: the absolute address it transfers to when
    // taken (jmp, jcc, call rel32, loop*, jrcxz/jecxz). 0 for indirect branches and ret.
    uint64_t target = 0;
    ZydisDecodedInstruction zi{};                               // for emulate() and relocation
    ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT_VISIBLE]{};  // visible operands only
};

// Decodes the instruction at runtime address `addr` from buf[0..avail).
// Returns 0, or -EILSEQ (not a valid instruction), or -EOPNOTSUPP (valid but unprobeable:
// int3, int n, into, int1, syscall, sysenter, sysexit, sysret, iret, far call/jmp/ret,
// xbegin, ... ). On failure *why is set to a fixed string naming the instruction class.
int decode(uint64_t addr, const uint8_t* buf, size_t avail, Insn& out, const char** why);

// Length of the instruction at buf (0 when it does not decode). For boundary walks.
size_t insn_length(const uint8_t* buf, size_t avail);

// What ends the out-of-line copy.
enum class SlotTail : uint8_t {
    kJumpBack,  // jump to insn.addr + insn.len (rel32 when in reach, else jmp [rip+0]; .quad)
    kTrap,      // one int3 byte, so the post handler can run
};

// Writes the out-of-line copy of a kOutOfLine instruction, to be executed at address `at`:
// the instruction (RIP-relative displacement rebased so it addresses the same memory from
// `at`) followed by the tail. Returns the number of bytes written, or
// -ERANGE (a RIP-relative target is beyond +-2 GiB of `at`), -ENOSPC (cap too small),
// -EINVAL (insn is not kOutOfLine). *trap_offset (when the tail is kTrap) receives the
// offset of the int3 byte in out.
int build_slot(const Insn& insn, uint64_t at, SlotTail tail, uint8_t* out, size_t cap,
               size_t* trap_offset);

// Writes insn's bytes at out, to be executed at `at`, its disp32(%rip) operand (`rip`: it has
// one) rebased to address the same memory from there. insn.len bytes, or -ERANGE / -EINVAL.
int copy_rebased(const Insn& insn, bool rip, uint64_t at, uint8_t* out);

// Guarded memory access for emulate(): each returns false if the access faulted.
struct MemOps {
    bool (*read)(void* ctx, uint64_t addr, void* dst, size_t n);
    bool (*write)(void* ctx, uint64_t addr, const void* src, size_t n);
    void* ctx;
};

// Executes a kEmulate instruction on `regs` as the CPU would: regs->ip becomes the next
// instruction or the branch target, sp/cx/flags change as the instruction defines, and a
// call writes its return address (insn.addr + insn.len) below sp. regs->ip on entry is
// insn.addr. Returns 0, or -EFAULT when a memory access faulted (then regs is unchanged and
// *fault_addr is the address that could not be accessed).
int emulate(const Insn& insn, pt_regs& regs, const MemOps& mem, uint64_t* fault_addr);

}  // namespace liveprobe::arch
