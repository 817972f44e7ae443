#include "arch/x86_64/exits.hpp"

#include <Zydis/Zydis.h>

namespace liveprobe::arch {
namespace {

ZydisDecoder minimal_decoder()
{
    ZydisDecoder dec;
    ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
    ZydisDecoderEnableMode(&dec, ZYDIS_DECODER_MODE_MINIMAL, ZYAN_TRUE);
    return dec;
}

uint64_t relative_target(uint64_t at, const ZydisDecodedInstruction &in)
{
    return at + in.length + static_cast<uint64_t>(in.raw.imm[0].value.s);
}

// The target of a direct call or jmp at addr (reading its bytes from memory), 0 if it is not one.
uint64_t direct_call_target(uint64_t addr)
{
    ZydisDecoder dec = minimal_decoder();
    ZydisDecodedInstruction in;
    const auto *p = reinterpret_cast<const uint8_t *>(addr);
    if (!ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(&dec, nullptr, p, 15, &in))) return 0;
    if ((in.mnemonic != ZYDIS_MNEMONIC_CALL && in.mnemonic != ZYDIS_MNEMONIC_JMP) || !in.raw.imm[0].is_relative)
        return 0;
    return relative_target(addr, in);
}

}  // namespace

uint64_t plt_got_slot(uint64_t plt_stub)
{
    ZydisDecoder dec;
    ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
    ZydisDecodedInstruction in;
    ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
    uint64_t at = plt_stub;
    for (int i = 0; i < 2; ++i) {  // endbr64, then (bnd) jmp *got(%rip)
        const auto *p = reinterpret_cast<const uint8_t *>(at);
        if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(&dec, p, 15, &in, ops))) return 0;
        if (in.mnemonic == ZYDIS_MNEMONIC_ENDBR64) {
            at += in.length;
            continue;
        }
        if (in.mnemonic != ZYDIS_MNEMONIC_JMP || ops[0].type != ZYDIS_OPERAND_TYPE_MEMORY ||
            ops[0].mem.base != ZYDIS_REGISTER_RIP)
            return 0;
        return at + in.length + static_cast<uint64_t>(ops[0].mem.disp.value);
    }
    return 0;
}

const char *function_returns(uint64_t start, const uint8_t *code, size_t len, const NoReturnTest &noreturn,
                             std::vector<uint64_t> *rets)
{
    ZydisDecoder dec = minimal_decoder();
    rets->clear();
    auto leaves = [&](uint64_t to) {
        if (to >= start && to < start + len) return false;
        uint64_t callee = direct_call_target(to);
        return !(callee && noreturn(callee));
    };
    ZydisDecodedInstruction in;
    for (size_t off = 0; off < len; off += in.length) {
        if (!ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(&dec, nullptr, code + off, len - off, &in)))
            return "an undecodable byte";
        uint64_t at = start + off;
        if (in.mnemonic == ZYDIS_MNEMONIC_RET) {
            rets->push_back(at);
        } else if (in.mnemonic == ZYDIS_MNEMONIC_INT3) {
            return "an int3";
        } else if (in.mnemonic == ZYDIS_MNEMONIC_JMP || in.meta.category == ZYDIS_CATEGORY_COND_BR) {
            if (!in.raw.imm[0].is_relative) return "an indirect jump";
            if (leaves(relative_target(at, in))) return "a jump out of the function (tail call)";
        }
    }
    return rets->empty() ? "no ret" : nullptr;
}

}  // namespace liveprobe::arch
