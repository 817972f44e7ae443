// Fuzzing the jump path's region analysis and relocator (arch/x86_64/region.hpp; issue 32,
// item 4): for any function's bytes and any probe offset in it, a region plan_region accepts is
// relocated so that every instruction, decoded again where it now lies, does what it did: the
// same bytes, or the same operation reaching the same absolute address (a RIP-relative
// operand, a jump's or a call's target); a final call pushes the original return address and
// jumps to the callee; a region that falls through jumps back right after itself. The input:
// byte 0 the probe's offset (modulo the code's length), byte 1 how far away the detour is,
// the rest the function's code (at most 128 bytes).
#include <Zydis/Zydis.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "arch/x86_64/region.hpp"

namespace {

using namespace liveprobe::arch;

constexpr uint64_t kFunction = 0x7f1200400000;

[[noreturn]] void wrong() { std::abort(); }

// The absolute address of insn's RIP-relative memory operand, decoded at insn.addr (EIP-relative
// with an address-size prefix: the address truncated to 32 bits, by Zydis as by the CPU).
uint64_t rip_address(const Insn &insn)
{
    for (uint8_t i = 0; i < insn.zi.operand_count_visible; ++i) {
        const ZydisDecodedOperand &op = insn.ops[i];
        if (op.type != ZYDIS_OPERAND_TYPE_MEMORY || (op.mem.base != ZYDIS_REGISTER_RIP && op.mem.base != ZYDIS_REGISTER_EIP))
            continue;
        ZyanU64 abs = 0;
        if (!ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(&insn.zi, &op, insn.addr, &abs))) wrong();
        return abs;
    }
    wrong();
}

// The instruction relocated at out[off], running at `at` + off, decoded (or the input is wrong).
Insn decoded(const uint8_t *out, int n, uint64_t at, uint32_t off)
{
    Insn insn;
    const char *why = nullptr;
    if (off >= static_cast<uint32_t>(n) || decode(at + off, out + off, static_cast<size_t>(n) - off, insn, &why) != 0)
        wrong();
    return insn;
}

bool is_call(const Insn &insn) { return insn.zi.mnemonic == ZYDIS_MNEMONIC_CALL; }
bool ends_flow(const Insn &insn)
{
    return insn.zi.mnemonic == ZYDIS_MNEMONIC_RET || is_call(insn) ||
           (insn.zi.mnemonic == ZYDIS_MNEMONIC_JMP && insn.target == 0);
}

// A final `call rel32`: "lea -8(%rsp),%rsp; push %rax; movabs $RET,%rax; mov %rax,8(%rsp);
// pop %rax; jmp TARGET" from off on: RET the original return address, TARGET the callee.
void check_call(const Insn &orig, const uint8_t *out, int n, uint64_t at, uint32_t off)
{
    bool pushed_return = false;
    for (uint32_t pos = off; pos < static_cast<uint32_t>(n);) {
        const Insn insn = decoded(out, n, at, pos);
        if (insn.zi.mnemonic == ZYDIS_MNEMONIC_MOV && insn.ops[1].type == ZYDIS_OPERAND_TYPE_IMMEDIATE &&
            insn.ops[1].imm.value.u == orig.addr + orig.len)
            pushed_return = true;
        if (insn.zi.mnemonic == ZYDIS_MNEMONIC_JMP) {
            if (!pushed_return || insn.target != orig.target) wrong();
            return;
        }
        pos += insn.len;
    }
    wrong();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 3) return 0;
    const size_t len = std::min<size_t>(size - 2, 128);
    const uint8_t *code = data + 2;
    const uint64_t addr = kFunction + data[0] % len;
    // The detour: within reach (up to 1.9 GiB away, either side), or out of it (-ERANGE).
    const int64_t distance = (static_cast<int64_t>(data[1]) - 128) * (int64_t{15} << 24);
    const uint64_t at = kFunction + static_cast<uint64_t>(distance) + 0x1000;
    const CodeRange fn{kFunction, code, len};
    Region region;
    if (plan_region(addr, fn, {}, {}, &region) != nullptr) return 0;
    if (region.addr != addr || region.len < kJmpLen || region.n == 0 || region.n > kMaxRegionInsns) wrong();
    uint8_t out[512];
    RelocMap map;
    const int n = relocate_region(region, at, out, sizeof out, &map);
    if (n == -ERANGE || n == -ENOSPC) return 0;
    if (n <= 0 || map.n != region.n) wrong();
    for (uint32_t i = 0; i < region.n; ++i) {
        const Insn &orig = region.insns[i];
        if (map.orig[i] != orig.addr || (i > 0 && map.offset[i] <= map.offset[i - 1])) wrong();
        const Insn moved = decoded(out, n, at, map.offset[i]);
        if (is_call(orig)) {
            if (i + 1 != region.n) wrong();  // only the last may be a call
            check_call(orig, out, n, at, map.offset[i]);
        } else if (orig.target != 0) {  // a relative jump: re-encoded, to the same place
            if (moved.zi.mnemonic != orig.zi.mnemonic || moved.target != orig.target) wrong();
        } else if (orig.rip_relative) {  // the same operation on the same memory
            if (moved.zi.mnemonic != orig.zi.mnemonic || rip_address(moved) != rip_address(orig)) wrong();
        } else if (moved.len != orig.len || std::memcmp(moved.bytes, orig.bytes, orig.len) != 0) {
            wrong();
        }
    }
    const Insn &last = region.insns[region.n - 1];
    if (!ends_flow(last)) {  // falls through: a jump back right after the region ends the copy
        const Insn back = decoded(out, n, at, static_cast<uint32_t>(n) - kJmpLen);
        if (back.zi.mnemonic != ZYDIS_MNEMONIC_JMP || back.target != region.addr + region.len) wrong();
    }
    return 0;
}
