// Decoding and classification of one instruction for the breakpoint path.
//
// The classification answers one question: can this instruction run unchanged (apart from a
// rebased RIP-relative displacement) from a slot somewhere else in memory, must it be emulated
// because it reads or writes rip, or can it not be probed at all. Everything that is refused
// is refused with a fixed reason, so the tool can tell the user exactly why.
#include "arch/x86_64/insn.hpp"

#include <cerrno>
#include <type_traits>

namespace liveprobe::arch {

// Signal handlers read probe points' copies of Insn; the copy must be a plain byte copy.
static_assert(std::is_trivially_copyable_v<Insn>);

namespace {

// Reasons for -EOPNOTSUPP. Fixed strings: callers keep the pointer.
constexpr const char *kWhyInt3 = "int3: a breakpoint someone else placed (a debugger's?)";
constexpr const char *kWhyIntN = "int n: software interrupt";
constexpr const char *kWhyInt1 = "int1/icebp: debug trap";
constexpr const char *kWhySyscall =
    "syscall/sysenter: the kernel returns to the address after it, which would be the slot";
constexpr const char *kWhySysret = "sysret/sysexit: kernel-only return to user mode";
constexpr const char *kWhyIret = "iret/uiret: interrupt return pops rip, cs and rflags";
constexpr const char *kWhyFar = "far call/jmp/ret: changes cs";
constexpr const char *kWhyXbegin =
    "xbegin: its abort target is relative, and the int3 would abort every transaction";
constexpr const char *kWhyOpsize =
    "near branch with an operand-size prefix (0x66): Intel and AMD disagree on its length, "
    "target and stack width";
constexpr const char *kWhySegBranch = "indirect branch through an fs:/gs: memory operand";
constexpr const char *kWhyRelative =
    "instruction with a relative target that liveprobe cannot emulate";
constexpr const char *kWhyDisp = "RIP-relative operand without a 32-bit displacement";

bool is_jcc(ZydisMnemonic m) {
    switch (m) {
        case ZYDIS_MNEMONIC_JO:
        case ZYDIS_MNEMONIC_JNO:
        case ZYDIS_MNEMONIC_JB:
        case ZYDIS_MNEMONIC_JNB:
        case ZYDIS_MNEMONIC_JZ:
        case ZYDIS_MNEMONIC_JNZ:
        case ZYDIS_MNEMONIC_JBE:
        case ZYDIS_MNEMONIC_JNBE:
        case ZYDIS_MNEMONIC_JS:
        case ZYDIS_MNEMONIC_JNS:
        case ZYDIS_MNEMONIC_JP:
        case ZYDIS_MNEMONIC_JNP:
        case ZYDIS_MNEMONIC_JL:
        case ZYDIS_MNEMONIC_JNL:
        case ZYDIS_MNEMONIC_JLE:
        case ZYDIS_MNEMONIC_JNLE:
            return true;
        default:
            return false;
    }
}

bool is_rip(ZydisRegister r) {
    return r == ZYDIS_REGISTER_RIP || r == ZYDIS_REGISTER_EIP;
}

// The instructions that are refused whatever their operands.
const char *refused(const ZydisDecodedInstruction &zi) {
    switch (zi.mnemonic) {
        case ZYDIS_MNEMONIC_INT3:
            return kWhyInt3;
        case ZYDIS_MNEMONIC_INT:
        case ZYDIS_MNEMONIC_INTO:  // invalid in 64-bit mode; kept in case a decoder accepts it
            return kWhyIntN;
        case ZYDIS_MNEMONIC_INT1:
            return kWhyInt1;
        case ZYDIS_MNEMONIC_SYSCALL:
        case ZYDIS_MNEMONIC_SYSENTER:
            return kWhySyscall;
        case ZYDIS_MNEMONIC_SYSRET:
        case ZYDIS_MNEMONIC_SYSEXIT:
            return kWhySysret;
        case ZYDIS_MNEMONIC_IRET:
        case ZYDIS_MNEMONIC_IRETD:
        case ZYDIS_MNEMONIC_IRETQ:
        case ZYDIS_MNEMONIC_UIRET:
            return kWhyIret;
        case ZYDIS_MNEMONIC_XBEGIN:
            return kWhyXbegin;
        default:
            return nullptr;
    }
}

// Classifies a control transfer (jmp, jcc, call, ret, loop*, j*cxz) as kEmulate, or refuses it.
// Returns nullptr when accepted, else the reason.
const char *classify_branch(const ZydisDecodedInstruction &zi, const ZydisDecodedOperand *ops,
                            uint64_t addr, Insn &out) {
    if (zi.meta.branch_type == ZYDIS_BRANCH_TYPE_FAR) return kWhyFar;
    // In 64-bit mode Intel ignores 0x66 on near branches while AMD truncates to 16 bits (and
    // decodes a rel16 immediate, so even the length differs): emulating either would be wrong
    // on the other.
    if (zi.attributes & ZYDIS_ATTRIB_HAS_OPERANDSIZE) return kWhyOpsize;

    const ZydisDecodedOperand *first = zi.operand_count_visible > 0 ? &ops[0] : nullptr;
    if (first && first->type == ZYDIS_OPERAND_TYPE_IMMEDIATE && first->imm.is_relative) {
        ZyanU64 target = 0;
        if (!ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(&zi, first, addr, &target))) return kWhyRelative;
        out.target = target;
    } else if (first && first->type == ZYDIS_OPERAND_TYPE_MEMORY) {
        // fs:/gs: bases live in MSRs the signal context does not carry; other segments have
        // base 0 in 64-bit mode.
        if (first->mem.segment == ZYDIS_REGISTER_FS || first->mem.segment == ZYDIS_REGISTER_GS)
            return kWhySegBranch;
    }
    out.cls = InsnClass::kEmulate;
    return nullptr;
}

}  // namespace

int decode(uint64_t addr, const uint8_t *buf, size_t avail, Insn &out, const char **why) {
    const char *reason = nullptr;
    ZydisDecoder decoder;
    ZydisDecoderInit(&decoder, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);

    Insn insn;
    insn.addr = addr;
    ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
    if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(&decoder, buf, avail, &insn.zi, ops))) {
        if (why) *why = "not a valid x86-64 instruction";
        return -EILSEQ;
    }
    insn.len = insn.zi.length;
    for (size_t i = 0; i < insn.len; ++i) insn.bytes[i] = buf[i];
    for (size_t i = 0; i < insn.zi.operand_count_visible && i < ZYDIS_MAX_OPERAND_COUNT_VISIBLE;
         ++i)
        insn.ops[i] = ops[i];

    for (size_t i = 0; i < insn.zi.operand_count_visible; ++i) {
        if (ops[i].type == ZYDIS_OPERAND_TYPE_MEMORY && is_rip(ops[i].mem.base)) {
            insn.rip_relative = true;
            if (insn.zi.raw.disp.size != 32) reason = kWhyDisp;
        }
    }

    if (!reason) reason = refused(insn.zi);
    if (!reason) {
        switch (insn.zi.mnemonic) {
            case ZYDIS_MNEMONIC_JMP:
            case ZYDIS_MNEMONIC_CALL:
            case ZYDIS_MNEMONIC_RET:
            case ZYDIS_MNEMONIC_LOOP:
            case ZYDIS_MNEMONIC_LOOPE:
            case ZYDIS_MNEMONIC_LOOPNE:
            case ZYDIS_MNEMONIC_JRCXZ:
            case ZYDIS_MNEMONIC_JECXZ:
                reason = classify_branch(insn.zi, ops, addr, insn);
                break;
            default:
                if (is_jcc(insn.zi.mnemonic)) {
                    reason = classify_branch(insn.zi, ops, addr, insn);
                    break;
                }
                // Whatever else carries a relative immediate (jcxz cannot occur in 64-bit
                // mode; KNC's jkzd; future ones) would land at the wrong place from a slot.
                for (size_t i = 0; i < insn.zi.operand_count_visible; ++i)
                    if (ops[i].type == ZYDIS_OPERAND_TYPE_IMMEDIATE && ops[i].imm.is_relative)
                        reason = kWhyRelative;
                break;
        }
    }
    if (reason) {
        if (why) *why = reason;
        return -EOPNOTSUPP;
    }
    if (why) *why = nullptr;
    out = insn;
    return 0;
}

size_t insn_length(const uint8_t *buf, size_t avail) {
    ZydisDecoder decoder;
    ZydisDecoderInit(&decoder, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
    ZydisDecodedInstruction zi;
    if (!ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(&decoder, nullptr, buf, avail, &zi))) return 0;
    return zi.length;
}

}  // namespace liveprobe::arch
