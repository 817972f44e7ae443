// Emulation of the control transfers the breakpoint path cannot run out of line.
//
// This runs inside the SIGTRAP handler: plain arithmetic on pt_regs and the stored decoded
// operands, no decoder, no library calls, no allocation (check `objdump -d` for calls to
// memcpy/memset after changing it). Memory is reached only through MemOps, so a bad pointer
// in the probed program becomes -EFAULT instead of a fault inside the handler.
//
// Only ip, sp and cx can change. They are computed into locals and written to regs at the end,
// after every memory access has succeeded, so a fault leaves regs exactly as they were (the
// CPU, too, changes nothing when a branch faults). No instruction handled here changes flags.
#include <liveprobe/kprobes.h>

#include <cerrno>

#include "arch/x86_64/insn.hpp"

namespace liveprobe::arch {

namespace {

constexpr uint64_t kCF = 0x1;
constexpr uint64_t kPF = 0x4;
constexpr uint64_t kZF = 0x40;
constexpr uint64_t kSF = 0x80;
constexpr uint64_t kOF = 0x800;

// pt_regs fields in hardware register order (rax, rcx, rdx, rbx, rsp, rbp, rsi, rdi, r8..r15).
constexpr unsigned long pt_regs::*kGpr[16] = {
    &pt_regs::ax,  &pt_regs::cx,  &pt_regs::dx,  &pt_regs::bx,  &pt_regs::sp,  &pt_regs::bp,
    &pt_regs::si,  &pt_regs::di,  &pt_regs::r8,  &pt_regs::r9,  &pt_regs::r10, &pt_regs::r11,
    &pt_regs::r12, &pt_regs::r13, &pt_regs::r14, &pt_regs::r15,
};

// Value of a general register (64- or 32-bit name) as an address component. A 32-bit name
// yields the whole 64-bit register: it only occurs under an address-size prefix, where the
// caller truncates the sum, and (a + b) mod 2^32 does not depend on the upper halves.
bool gpr(const pt_regs &r, ZydisRegister reg, uint64_t *v) {
    int i;
    if (reg >= ZYDIS_REGISTER_RAX && reg <= ZYDIS_REGISTER_R15)
        i = reg - ZYDIS_REGISTER_RAX;
    else if (reg >= ZYDIS_REGISTER_EAX && reg <= ZYDIS_REGISTER_R15D)
        i = reg - ZYDIS_REGISTER_EAX;
    else
        return false;
    *v = r.*kGpr[i];
    return true;
}

// Effective address of a memory operand. decode() refused fs:/gs:, and every other segment
// has base 0 in 64-bit mode.
bool effective_address(const Insn &insn, const ZydisDecodedOperandMem &m, const pt_regs &r,
                       uint64_t *ea) {
    uint64_t a = static_cast<uint64_t>(m.disp.value);
    if (m.base == ZYDIS_REGISTER_RIP || m.base == ZYDIS_REGISTER_EIP) {
        a += insn.addr + insn.len;  // RIP is the address of the next instruction
    } else if (m.base != ZYDIS_REGISTER_NONE) {
        uint64_t b;
        if (!gpr(r, m.base, &b)) return false;
        a += b;
    }
    if (m.index != ZYDIS_REGISTER_NONE) {
        uint64_t x;
        if (!gpr(r, m.index, &x)) return false;
        a += x * m.scale;
    }
    if (insn.zi.address_width == 32) a &= 0xffffffffu;
    *ea = a;
    return true;
}

// True when jcc's condition holds. cc is the low nibble of the opcode (7x and 0f 8x alike):
// its upper three bits pick the test, bit 0 negates it.
bool condition(unsigned cc, uint64_t f) {
    const bool sf_ne_of = !(f & kSF) != !(f & kOF);
    bool r;
    switch (cc >> 1) {
        case 0:
            r = f & kOF;
            break;  // o
        case 1:
            r = f & kCF;
            break;  // b
        case 2:
            r = f & kZF;
            break;  // z
        case 3:
            r = f & (kCF | kZF);
            break;  // be
        case 4:
            r = f & kSF;
            break;  // s
        case 5:
            r = f & kPF;
            break;  // p
        case 6:
            r = sf_ne_of;
            break;  // l
        default:
            r = (f & kZF) || sf_ne_of;
            break;  // le
    }
    return (cc & 1) ? !r : r;
}

bool read_u64(const MemOps &mem, uint64_t addr, uint64_t *v) {
    return mem.read(mem.ctx, addr, v, sizeof(*v));
}

int fault(uint64_t addr, uint64_t *fault_addr) {
    if (fault_addr) *fault_addr = addr;
    return -EFAULT;
}

}  // namespace

int emulate(const Insn &insn, pt_regs &regs, const MemOps &mem, uint64_t *fault_addr) {
    if (insn.cls != InsnClass::kEmulate) return -EINVAL;
    const ZydisDecodedInstruction &zi = insn.zi;
    const ZydisDecodedOperand &op = insn.ops[0];
    const uint64_t next = insn.addr + insn.len;
    const bool direct = zi.operand_count_visible > 0 && op.type == ZYDIS_OPERAND_TYPE_IMMEDIATE;

    uint64_t ip = next;
    uint64_t sp = regs.sp;
    uint64_t cx = regs.cx;

    switch (zi.mnemonic) {
        case ZYDIS_MNEMONIC_JMP:
        case ZYDIS_MNEMONIC_CALL: {
            // The target is read before the return address is pushed: `call *(%rsp)` and
            // `call *%rsp` use the stack pointer from before the call.
            uint64_t target = insn.target;
            if (!direct) {
                if (op.type == ZYDIS_OPERAND_TYPE_REGISTER) {
                    if (!gpr(regs, op.reg.value, &target)) return -EINVAL;
                } else {
                    uint64_t ea;
                    if (!effective_address(insn, op.mem, regs, &ea)) return -EINVAL;
                    if (!read_u64(mem, ea, &target)) return fault(ea, fault_addr);
                }
            }
            if (zi.mnemonic == ZYDIS_MNEMONIC_CALL) {
                sp -= 8;
                const uint64_t ret = next;
                if (!mem.write(mem.ctx, sp, &ret, sizeof(ret))) return fault(sp, fault_addr);
            }
            ip = target;
            break;
        }
        case ZYDIS_MNEMONIC_RET: {
            uint64_t target;
            if (!read_u64(mem, sp, &target)) return fault(sp, fault_addr);
            sp += 8;
            if (zi.operand_count_visible > 0) sp += op.imm.value.u & 0xffff;  // ret imm16
            ip = target;
            break;
        }
        case ZYDIS_MNEMONIC_LOOP:
        case ZYDIS_MNEMONIC_LOOPE:
        case ZYDIS_MNEMONIC_LOOPNE: {
            // SDM vol. 2 LOOP/LOOPcc: the count is ECX when the address size is 32 (0x67),
            // else RCX. Writing ECX zero-extends into RCX, as every 32-bit register write does
            // in 64-bit mode (SDM vol. 1, 3.4.1.1); checked on hardware: `a32 loop` with
            // rcx = 0x1234567800000005 leaves rcx = 0 after the loop, and Bochs and QEMU do
            // the same. Flags are not modified.
            uint64_t count;
            if (zi.address_width == 32) {
                count = static_cast<uint32_t>(cx - 1);
            } else {
                count = cx - 1;
            }
            cx = count;
            bool taken = count != 0;
            if (zi.mnemonic == ZYDIS_MNEMONIC_LOOPE) taken = taken && (regs.flags & kZF);
            if (zi.mnemonic == ZYDIS_MNEMONIC_LOOPNE) taken = taken && !(regs.flags & kZF);
            if (taken) ip = insn.target;
            break;
        }
        case ZYDIS_MNEMONIC_JRCXZ:
        case ZYDIS_MNEMONIC_JECXZ: {
            const uint64_t count = zi.address_width == 32 ? static_cast<uint32_t>(cx) : cx;
            if (count == 0) ip = insn.target;
            break;
        }
        default:  // jcc: decode() admits no other mnemonic as kEmulate
            if (condition(zi.opcode & 0xf, regs.flags)) ip = insn.target;
            break;
    }

    regs.ip = ip;
    regs.sp = sp;
    regs.cx = cx;
    return 0;
}

}  // namespace liveprobe::arch
