// ignores_second_arg (region.hpp): does a handler never look at its struct pt_regs *? And
// regs_fields_only: does it use it only to load or store some of its fields?
//
// A forward walk over the paths of the handler on which rsi may still hold the pointer it was
// called with ("tainted"). Any read of rsi on such a path (an operand, hidden ones included,
// or the base or index of a memory operand) is a use; so is handing it on where it cannot be
// followed (an indirect call or jump, a syscall). A full write of rsi or esi ends the taint on
// that path. Direct calls and jumps out are followed into the callee with rsi still tainted
// (and after a call returns rsi counts as tainted still: with -fipa-ra a caller may know its
// callee left rsi alone). Only a proof counts: an instruction that cannot be decoded is a use.
// With fields, a memory operand [rsi + d] inside one of those fields is not a use.
#include <cinttypes>
#include <cstdio>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "arch/x86_64/region.hpp"
#include "symbols/symbols.hpp"

namespace liveprobe::arch {
namespace {

constexpr uint32_t kRsi = 1u << 6;

std::string at_text(uint64_t at) { return symbols::describe(at); }

// `xor %esi,%esi` and `sub %rsi,%rsi` only write rsi, whatever the decoder says of their reads.
bool zeroing_idiom(const ZydisDecodedInstruction &zi, const ZydisDecodedOperand *ops)
{
    if (zi.mnemonic != ZYDIS_MNEMONIC_XOR && zi.mnemonic != ZYDIS_MNEMONIC_SUB) return false;
    return zi.operand_count_visible == 2 && ops[0].type == ZYDIS_OPERAND_TYPE_REGISTER &&
           ops[1].type == ZYDIS_OPERAND_TYPE_REGISTER && ops[0].reg.value == ops[1].reg.value;
}

// A memory operand [rsi + d] (no index, no segment override) that stays inside one 8-byte field
// of struct pt_regs whose bit is set in `fields` (bit i: the field at offset 8 i).
bool allowed_field(const ZydisDecodedOperand &op, uint32_t fields)
{
    if (!fields || op.mem.base != ZYDIS_REGISTER_RSI || op.mem.index != ZYDIS_REGISTER_NONE) return false;
    if (op.mem.segment != ZYDIS_REGISTER_DS && op.mem.segment != ZYDIS_REGISTER_NONE) return false;
    if (op.mem.type != ZYDIS_MEMOP_TYPE_MEM || !op.mem.disp.has_displacement) return false;
    const int64_t d = op.mem.disp.value;
    const uint32_t bytes = op.size / 8;
    if (d < 0 || d >= 21 * 8 || bytes == 0 || bytes > 8 || d % 8 + bytes > 8) return false;
    return fields >> (d / 8) & 1;
}

bool reads_rsi(const ZydisDecodedInstruction &zi, const ZydisDecodedOperand *ops, uint32_t fields)
{
    if (zeroing_idiom(zi, ops)) return false;
    for (size_t i = 0; i < zi.operand_count; ++i) {
        const ZydisDecodedOperand &op = ops[i];
        if (op.type == ZYDIS_OPERAND_TYPE_REGISTER && (op.actions & ZYDIS_OPERAND_ACTION_MASK_READ) &&
            (gpr_bit(op.reg.value) & kRsi))
            return true;
        if (op.type == ZYDIS_OPERAND_TYPE_MEMORY && ((gpr_bit(op.mem.base) | gpr_bit(op.mem.index)) & kRsi) &&
            !allowed_field(op, fields))
            return true;
    }
    return false;
}

// A write of all of rsi (rsi itself, or esi, which clears the upper half), on every execution.
bool overwrites_rsi(const ZydisDecodedInstruction &zi, const ZydisDecodedOperand *ops)
{
    for (size_t i = 0; i < zi.operand_count; ++i) {
        const ZydisDecodedOperand &op = ops[i];
        if (op.type == ZYDIS_OPERAND_TYPE_REGISTER && (op.actions & ZYDIS_OPERAND_ACTION_WRITE) &&
            (op.reg.value == ZYDIS_REGISTER_RSI || op.reg.value == ZYDIS_REGISTER_ESI))
            return true;
    }
    return false;
}

struct Walk {
    std::set<uint64_t> functions;  // entered with rsi tainted (a second entry adds nothing)
    uint32_t fields = 0;           // the pt_regs fields it may read or write through rsi

    const char *function(uint64_t entry, int left);
};

// Follows a branch out of the function being walked (a call, or a jump elsewhere).
const char *follow(Walk &w, uint64_t site, uint64_t target, int left)
{
    std::optional<symbols::Function> g = symbols::function_at(target);
    if (!g || g->name.empty()) {
        if (uint64_t t = plt_target(target)) target = t;  // a PLT stub does not read rsi
    }
    if (left <= 0) return intern_reason("rsi still holds regs at the call at " + at_text(site) + ", deeper than the levels followed");
    if (const char *why = w.function(target, left - 1))
        return intern_reason(std::string(why) + ", reached from " + at_text(site));
    return nullptr;
}

const char *Walk::function(uint64_t entry, int left)
{
    std::optional<symbols::Function> f = symbols::function_at(entry);
    if (!f) return intern_reason("no bounds for " + at_text(entry));
    if (!functions.insert(entry).second) return nullptr;
    ZydisDecoder dec;
    ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
    std::set<uint64_t> seen;
    std::vector<uint64_t> todo{entry};
    while (!todo.empty()) {
        uint64_t at = todo.back();
        todo.pop_back();
        // Straight on from `at` while rsi is tainted.
        while (seen.insert(at).second) {
            if (at < f->start || at >= f->end) {
                // A jump into another part (f.cold): a function of its own as far as bounds go.
                if (const char *why = follow(*this, at, at, left)) return why;
                break;
            }
            ZydisDecodedInstruction zi;
            ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
            if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(&dec, reinterpret_cast<const void *>(at), f->end - at, &zi, ops)))
                return intern_reason("undecodable bytes at " + at_text(at));
            if (zi.mnemonic == ZYDIS_MNEMONIC_INT3) return intern_reason("int3 at " + at_text(at) + " (hides the instruction under it)");
            const std::string mnemonic = ZydisMnemonicGetString(zi.mnemonic);
            if (reads_rsi(zi, ops, fields)) return intern_reason(mnemonic + " at " + at_text(at) + " reads rsi (regs)");
            if (zi.mnemonic == ZYDIS_MNEMONIC_SYSCALL || zi.mnemonic == ZYDIS_MNEMONIC_SYSENTER ||
                zi.mnemonic == ZYDIS_MNEMONIC_INT || zi.mnemonic == ZYDIS_MNEMONIC_INTO)
                return intern_reason(mnemonic + " at " + at_text(at) + " with rsi (regs) as its argument");
            const uint64_t next = at + zi.length;
            if (zi.mnemonic == ZYDIS_MNEMONIC_RET || zi.mnemonic == ZYDIS_MNEMONIC_UD2 ||
                zi.mnemonic == ZYDIS_MNEMONIC_HLT)
                break;
            if (zi.meta.branch_type != ZYDIS_BRANCH_TYPE_NONE) {
                const ZydisDecodedOperand *op0 = zi.operand_count_visible > 0 ? &ops[0] : nullptr;
                ZyanU64 target = 0;
                if (!op0 || op0->type != ZYDIS_OPERAND_TYPE_IMMEDIATE || !op0->imm.is_relative ||
                    !ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(&zi, op0, at, &target)))
                    return intern_reason("indirect " + mnemonic + " at " + at_text(at) + " while rsi may hold regs");
                if (zi.mnemonic == ZYDIS_MNEMONIC_CALL) {
                    if (target != next) {
                        if (const char *why = follow(*this, at, target, left)) return why;
                    }
                    at = next;
                    continue;
                }
                if (zi.mnemonic == ZYDIS_MNEMONIC_JMP) {
                    at = target;
                    continue;
                }
                todo.push_back(target);  // a conditional branch: both ways
                at = next;
                continue;
            }
            if (overwrites_rsi(zi, ops)) break;  // this path no longer holds regs in rsi
            at = next;
        }
    }
    return nullptr;
}

}  // namespace

bool regs_fields_only(uint64_t entry, int depth, uint32_t fields, const char **why)
{
    Walk w;
    w.fields = fields;
    const char *reason = w.function(entry, depth < 0 ? 0 : depth);
    if (why) *why = reason;
    return reason == nullptr;
}

bool ignores_second_arg(uint64_t entry, int depth, const char **why)
{
    return regs_fields_only(entry, depth, 0, why);
}

}  // namespace liveprobe::arch
