// Jump optimization, the instruction side (region.hpp): which instructions a 5-byte jump may
// replace, and their relocated copy in a detour.
//
// plan_region follows the kernel's can_optimize() (arch/x86/kernel/kprobes/opt.c): decode the
// whole function linearly, refuse it when it has an indirect jump (its targets are invisible),
// and refuse the region when any direct branch lands on one of its bytes other than the first.
// The walk here decodes everything with Zydis itself rather than through decode(): decode()
// refuses instructions (syscall, far or 0x66-prefixed branches, fs:-based indirect jumps) whose
// length and branch targets the walk still needs.
//
// Reasons are fixed strings, or, when they name an address, formatted into a per-thread
// buffer: they stay valid until the same thread calls plan_region again, which is how the
// caller uses them (copied into its error message at once).
#include "arch/x86_64/region.hpp"

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <vector>

#include "arch/x86_64/jump_table.hpp"

namespace liveprobe::arch {

namespace {

thread_local char t_reason[256];

[[gnu::format(printf, 1, 2)]] const char *reason(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(t_reason, sizeof t_reason, fmt, ap);
    va_end(ap);
    return t_reason;
}

// A direct control transfer found by the walk (jmp, jcc, call, loop*, jrcxz, xbegin: anything
// with a relative target).
struct Branch {
    uint64_t site;
    uint64_t target;
    ZydisMnemonic mnemonic;
    bool in_cold;
};

// An indirect jmp found by the walk: part 0 is the function, i > 0 its cold part i - 1.
struct IndirectJmp {
    uint64_t site;
    size_t part;
    size_t n_before;  // instructions of its part before it (Walk::starts)
    int dwarf_reg;    // jmp *%REG: the register's DWARF number; -1 through memory
};

// The DWARF number (x86-64 psABI) of a 64-bit general register, -1 for any other.
int dwarf_number(ZydisRegister r) {
    static constexpr ZydisRegister kOrder[] = {ZYDIS_REGISTER_RAX, ZYDIS_REGISTER_RDX, ZYDIS_REGISTER_RCX,
                                               ZYDIS_REGISTER_RBX, ZYDIS_REGISTER_RSI, ZYDIS_REGISTER_RDI,
                                               ZYDIS_REGISTER_RBP, ZYDIS_REGISTER_RSP, ZYDIS_REGISTER_R8,
                                               ZYDIS_REGISTER_R9,  ZYDIS_REGISTER_R10, ZYDIS_REGISTER_R11,
                                               ZYDIS_REGISTER_R12, ZYDIS_REGISTER_R13, ZYDIS_REGISTER_R14,
                                               ZYDIS_REGISTER_R15};
    for (int i = 0; i < 16; ++i)
        if (kOrder[i] == r) return i;
    return -1;
}

// An indirect jmp that is neither a table read here nor a return: it jumps through a pointer.
struct Unresolved {
    uint64_t site;
    bool in_cold;
    const char *why;       // read_jump_table's (static storage)
    bool through_pointer;  // certainly through a pointer loaded from memory, not a sum
};

struct Walk {
    std::vector<Branch> branches;
    std::vector<Branch> addresses;  // addresses the code computes (RIP-relative, absolute)
    std::vector<IndirectJmp> indirect;
    std::vector<Unresolved> unresolved;
    std::vector<std::vector<uint32_t>> starts;  // per part, each instruction's offset
    size_t entry_loads = 0;      // movsxd loads of 4-scaled entries: relative tables read
    size_t relative_tables = 0;  // relative tables read_tables read
    bool addr_on_boundary = false;
};

// The addresses instruction zi at `at` computes without a branch: RIP-relative memory operands
// (lea, mov, a jmp through a pointer in memory), absolute displacements (non-PIC tables) and
// immediates (non-PIC `mov $label`), into w->addresses; a relative table's entry load counted.
void note_addresses(const ZydisDecodedInstruction &zi, const ZydisDecodedOperand *ops, uint64_t at, bool is_cold,
                    Walk *w) {
    for (size_t i = 0; i < zi.operand_count_visible; ++i) {
        const ZydisDecodedOperand &o = ops[i];
        if (o.type == ZYDIS_OPERAND_TYPE_IMMEDIATE && !o.imm.is_relative) {
            w->addresses.push_back({at, o.imm.value.u, zi.mnemonic, is_cold});
        } else if (o.type == ZYDIS_OPERAND_TYPE_MEMORY && zi.mnemonic != ZYDIS_MNEMONIC_NOP) {
            if (o.mem.base == ZYDIS_REGISTER_RIP) {
                ZyanU64 a = 0;
                if (ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(&zi, &o, at, &a)))
                    w->addresses.push_back({at, a, zi.mnemonic, is_cold});
            } else if (o.mem.base == ZYDIS_REGISTER_NONE && o.mem.disp.has_displacement) {
                w->addresses.push_back({at, static_cast<uint64_t>(o.mem.disp.value), zi.mnemonic, is_cold});
            }
            if (zi.mnemonic == ZYDIS_MNEMONIC_MOVSXD && o.size == 32 && o.mem.index != ZYDIS_REGISTER_NONE &&
                o.mem.scale == 4)
                ++w->entry_loads;
        }
    }
}

// Decodes r from its start to its end, collecting what plan_region needs. Returns nullptr or a
// reason (an undecodable byte hides everything after it).
const char *walk(const CodeRange &r, bool is_cold, uint64_t addr, Walk *w) {
    const size_t part = w->starts.size();
    std::vector<uint32_t> &starts = w->starts.emplace_back();
    ZydisDecoder dec;
    ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
    size_t off = 0;
    while (off < r.len) {
        const uint64_t at = r.start + off;
        if (at == addr) w->addr_on_boundary = true;
        ZydisDecodedInstruction zi;
        ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
        if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(&dec, r.bytes + off, r.len - off, &zi, ops))) {
            if (is_cold)
                return reason("a cold part of the function cannot be decoded at 0x%" PRIx64
                              " (+0x%zx in the part): its jumps are unknown",
                              at, off);
            return reason("the function cannot be decoded at +0x%zx: its jumps are unknown", off);
        }
        for (size_t i = 0; i < zi.operand_count_visible; ++i) {
            if (ops[i].type != ZYDIS_OPERAND_TYPE_IMMEDIATE || !ops[i].imm.is_relative) continue;
            ZyanU64 target = 0;
            if (ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(&zi, &ops[i], at, &target)))
                w->branches.push_back({at, target, zi.mnemonic, is_cold});
        }
        note_addresses(zi, ops, at, is_cold, w);
        // Any jmp without a relative immediate (register or memory operand, near or far,
        // notrack or not) goes somewhere a linear decode cannot see, unless it is a jump table
        // (plan_region reads those).
        if (zi.mnemonic == ZYDIS_MNEMONIC_JMP &&
            !(zi.operand_count_visible > 0 && ops[0].type == ZYDIS_OPERAND_TYPE_IMMEDIATE))
            w->indirect.push_back({at, part, starts.size(),
                                   zi.operand_count_visible > 0 && ops[0].type == ZYDIS_OPERAND_TYPE_REGISTER
                                       ? dwarf_number(ops[0].reg.value)
                                       : -1});
        starts.push_back(static_cast<uint32_t>(off));
        off += zi.length;
    }
    return nullptr;
}

bool is_call(const Insn &insn) {
    return insn.zi.mnemonic == ZYDIS_MNEMONIC_CALL;
}

bool is_ret(const Insn &insn) {
    return insn.zi.mnemonic == ZYDIS_MNEMONIC_RET;
}

// jmp *%reg or jmp *mem: a jump through a pointer (a tail call), which may end the region as a
// ret does (plan_region proves where it can go).
bool is_indirect_jmp(const Insn &insn) {
    return insn.zi.mnemonic == ZYDIS_MNEMONIC_JMP && insn.target == 0;
}

// Its memory operand is disp32(%rip): mod 00, r/m 101.
bool rip_relative_modrm(const Insn &insn) {
    return (insn.zi.attributes & ZYDIS_ATTRIB_HAS_MODRM) && insn.zi.raw.modrm.mod == 0 && insn.zi.raw.modrm.rm == 5;
}

bool is_direct_jump(const Insn &insn) {
    // jmp rel8/rel32 or jcc: the only kEmulate instructions with a target besides call and
    // loop*/jrcxz, which are told apart by mnemonic.
    if (insn.cls != InsnClass::kEmulate || insn.target == 0) return false;
    switch (insn.zi.mnemonic) {
        case ZYDIS_MNEMONIC_CALL:
        case ZYDIS_MNEMONIC_LOOP:
        case ZYDIS_MNEMONIC_LOOPE:
        case ZYDIS_MNEMONIC_LOOPNE:
        case ZYDIS_MNEMONIC_JRCXZ:
        case ZYDIS_MNEMONIC_JECXZ:
            return false;
        default:
            return true;
    }
}

// How many of the n bytes at p are whole nop or int3 instructions, from the first: alignment
// padding (GCC's `data16 cs nopw`, `nopl 0(%rax)`, `xchg %ax,%ax`, int3 fill).
size_t padding_bytes(const uint8_t *p, size_t n) {
    ZydisDecoder dec;
    ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
    ZydisDecodedInstruction zi;
    size_t off = 0;
    while (off < n && ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(&dec, nullptr, p + off, n - off, &zi)) &&
           (zi.mnemonic == ZYDIS_MNEMONIC_NOP || zi.mnemonic == ZYDIS_MNEMONIC_INT3 ||
            (zi.mnemonic == ZYDIS_MNEMONIC_XCHG && zi.length == 2 && p[off] == 0x66 && p[off + 1] == 0x90)))
        off += zi.length;
    return off;
}

// Takes instructions from addr until kJmpLen bytes are covered, the function's padding after a
// final ret or jump through a pointer included. Returns nullptr or a reason.
const char *take_region(uint64_t addr, const CodeRange &fn, size_t padding, Region *region) {
    const uint64_t fn_end = fn.start + fn.len;
    uint64_t at = addr;
    region->addr = addr;
    region->len = 0;
    region->n = 0;
    while (region->len < kJmpLen) {
        if (at >= fn_end)
            return reason("the function ends %zu bytes after the probe (%zu are replaced)",
                          region->len, kJmpLen);
        Insn &insn = region->insns[region->n];
        const char *why = nullptr;
        const size_t avail = static_cast<size_t>(fn_end - at) < kMaxInsnLen
                                 ? static_cast<size_t>(fn_end - at)
                                 : kMaxInsnLen;
        if (decode(at, fn.bytes + (at - fn.start), avail, insn, &why) != 0)
            return reason("the instruction at +%" PRIu64 " cannot be relocated: %s", at - addr,
                          why ? why : "invalid");
        if (insn.cls == InsnClass::kEmulate) {
            const bool last_ok = is_ret(insn) || is_indirect_jmp(insn) || (is_call(insn) && insn.target != 0);
            if (is_call(insn) && insn.target == 0)
                return reason("an indirect call at +%" PRIu64 " cannot be relocated", at - addr);
            if (!last_ok && !is_direct_jump(insn))
                return reason("a %s at +%" PRIu64 " cannot be relocated (only jmp and jcc)",
                              ZydisMnemonicGetString(insn.zi.mnemonic), at - addr);
            const size_t short_by = kJmpLen - (region->len + insn.len < kJmpLen ? region->len + insn.len : kJmpLen);
            if (last_ok && short_by && !is_call(insn) && at + insn.len == fn_end &&
                padding_bytes(fn.bytes + fn.len, padding) >= short_by) {
                for (size_t i = 0; i < short_by; ++i) region->pad[i] = fn.bytes[fn.len + i];
                region->pad_len = short_by;
                region->n++;
                region->len = kJmpLen;
                return nullptr;
            }
            if (last_ok && region->len + insn.len < kJmpLen) {
                // The function's last instruction: its padding was too short to take, or none.
                const char *no_pad = at + insn.len == fn_end ? ", and no alignment padding after the function to take" : "";
                if (is_ret(insn))
                    return reason("a ret ends the code %zu bytes after the probe (%zu are replaced)%s",
                                  region->len + insn.len, kJmpLen, no_pad);
                if (is_indirect_jmp(insn))
                    return reason("a jump through a pointer ends the code %zu bytes after the probe (%zu are replaced)%s",
                                  region->len + insn.len, kJmpLen, no_pad);
                return reason("a call is not the last instruction of the region");
            }
        }
        region->len += insn.len;
        region->n++;
        at += insn.len;
    }
    return nullptr;
}

}  // namespace

namespace {

struct Parts {
    const CodeRange *fn;
    const std::vector<CodeRange> *cold;
    const Walk *w;
};

// Whether target is the start of an instruction of the function or of a cold part, as the
// linear decode found them: where every entry of a real table leads.
bool in_parts(uint64_t target, const void *ctx) {
    const Parts &p = *static_cast<const Parts *>(ctx);
    for (size_t i = 0; i <= p.cold->size(); ++i) {
        const CodeRange &c = i == 0 ? *p.fn : (*p.cold)[i - 1];
        if (target < c.start || target >= c.start + c.len) continue;
        const std::vector<uint32_t> &starts = p.w->starts[i];
        return std::binary_search(starts.begin(), starts.end(), static_cast<uint32_t>(target - c.start));
    }
    return false;
}

// The targets of every indirect jmp of the walk: each a jump table (its targets added to
// w->branches), a return, or a jump through a pointer (w->unresolved, which plan_region
// proves or refuses once it knows the region). A table's dispatch must be entered at its top
// only: no known target may land after its first instruction, up to the jmp.
const char *read_tables(const CodeRange &fn, const std::vector<CodeRange> &cold, ReadMemory read,
                        JumpIsReturn is_return, Walk *w) {
    struct Span {
        uint64_t from, to;
    };
    std::vector<Span> spans;
    const Parts parts{&fn, &cold, w};
    std::vector<CodePart> code;
    for (size_t i = 0; i <= cold.size(); ++i) {
        const CodeRange &r = i == 0 ? fn : cold[i - 1];
        code.push_back({r.start, r.bytes, r.len, &w->starts[i]});
    }
    // Read in rounds. The first reads each table as its dispatch shows it. A table that could
    // not be read, or whose dispatch a known target lands inside, is read again once others
    // are known: its hoisted register's proof then follows the paths through their jumps (gawk's
    // parse_expression has two dispatches, one with its lea right before), and it may prove
    // the register hoisted and start the dispatch at the entry's load.
    const size_t n = w->indirect.size();
    std::vector<JumpTable> tables(n);
    std::vector<const char *> whys(n, "not read");
    KnownJumps known;
    auto read_one = [&](size_t k, bool again) {
        const IndirectJmp &ij = w->indirect[k];
        JumpTable t;
        whys[k] = read_jump_table(code, ij.part, ij.n_before, static_cast<uint32_t>(ij.site - code[ij.part].start),
                                  read, in_parts, &parts, &t, again ? &known : nullptr, again);
        tables[k] = t;
        if (whys[k] == nullptr) known[ij.site] = t.targets;
    };
    auto entered_inside = [&](size_t k) {  // a known target inside table k's dispatch
        const uint64_t from = tables[k].first_site, to = w->indirect[k].site;
        for (const Branch &b : w->branches)
            if (b.target > from && b.target <= to) return true;
        for (const auto &[site, targets] : known)
            for (uint64_t target : targets)
                if (target > from && target <= to) return true;
        return false;
    };
    for (size_t k = 0; k < n; ++k) read_one(k, false);
    for (bool progress = true; progress;) {
        progress = false;
        for (size_t k = 0; k < n; ++k) {
            if (whys[k] == nullptr && !entered_inside(k)) continue;
            const bool was_read = whys[k] == nullptr;
            const uint64_t was_first = tables[k].first_site;
            read_one(k, true);
            progress = progress || (whys[k] == nullptr && (!was_read || tables[k].first_site != was_first));
        }
    }
    for (size_t k = 0; k < n; ++k) {
        const IndirectJmp &ij = w->indirect[k];
        const bool in_cold = ij.part != 0;
        const JumpTable &t = tables[k];
        const char *why = whys[k];
        if (why && ij.dwarf_reg >= 0 && is_return && is_return(ij.site, ij.dwarf_reg))
            continue;  // a return: its target is the caller's
        if (why) {
            w->unresolved.push_back({ij.site, in_cold, why, t.through_pointer});
            continue;
        }
        if (t.relative) ++w->relative_tables;
        for (uint64_t target : t.targets)
            w->branches.push_back({ij.site, target, ZYDIS_MNEMONIC_JMP, in_cold});
        spans.push_back({t.first_site, ij.site});
    }
    // Sites in the function as +offsets, in a cold part as addresses (as the other reasons).
    auto where = [&fn](uint64_t a, char *buf, size_t n) {
        if (a >= fn.start && a < fn.start + fn.len) std::snprintf(buf, n, "+0x%" PRIx64, a - fn.start);
        else std::snprintf(buf, n, "0x%" PRIx64, a);
        return buf;
    };
    char from[24], to[24];
    for (const Span &s : spans)
        for (const Branch &b : w->branches)
            if (b.target > s.from && b.target <= s.to)
                return reason("a jump at %s lands inside the jump table dispatch at %s: its targets are unknown",
                              where(b.site, from, sizeof from), where(s.to, to, sizeof to));
    return nullptr;
}

// Step 4 of plan_region: nullptr when no jump through a pointer can land in (addr, addr + len).
const char *prove_pointer_jumps(const Walk &w, const CodeRange &fn, uint64_t addr, size_t len, AddressStored stored) {
    if (w.unresolved.empty()) return nullptr;
    const Unresolved &u = w.unresolved.front();
    // A jump that may go through a sum of registers may be an unread relative table's dispatch
    // when the function reads an entry no table explains (a movsxd of an int array's element
    // looks the same): only jumps through a loaded pointer are free of that.
    bool may_be_sum = false;
    for (const Unresolved &j : w.unresolved) may_be_sum = may_be_sum || !j.through_pointer;
    const char *and_why = nullptr;
    if (may_be_sum && w.entry_loads > w.relative_tables)
        and_why = ", and the function reads a jump table's entry that no table read here explains";
    else if (stored == nullptr)
        and_why = "";
    else if (const int s = stored(addr + 1, addr + len); s > 0)
        and_why = ", and the object's data stores an address inside the bytes a jmp would replace";
    else if (s < 0)
        and_why = ", and the object's data cannot be searched for addresses";
    if (and_why == nullptr) return nullptr;
    if (u.in_cold)
        return reason("a cold part of the function has an indirect jump at 0x%" PRIx64
                      " whose targets are unknown (%s)%s",
                      u.site, u.why, and_why);
    return reason("the function has an indirect jump at +0x%" PRIx64 " whose targets are unknown (%s)%s",
                  u.site - fn.start, u.why, and_why);
}

}  // namespace

const char *plan_region(uint64_t addr, const CodeRange &fn, const std::vector<CodeRange> &cold,
                        const std::vector<uint64_t> &other_probes, Region *out, ReadMemory read,
                        JumpIsReturn is_return, AddressStored stored, size_t padding) {
    if (fn.bytes == nullptr || addr < fn.start || addr >= fn.start + fn.len)
        return "the probe address is outside the function's bounds";

    // 1. Decode every part of the function: its direct branches and indirect jumps.
    Walk w;
    if (const char *why = walk(fn, false, addr, &w)) return why;
    if (!w.addr_on_boundary)
        return "the probe address is not on an instruction boundary of the function";
    for (const CodeRange &part : cold)
        if (const char *why = walk(part, true, addr, &w)) return why;
    if (const char *why = read_tables(fn, cold, read, is_return, &w)) return why;

    // 2. The instructions the jump replaces, each relocatable.
    Region region;
    if (const char *why = take_region(addr, fn, padding, &region)) return why;

    // 3. Nothing may land on bytes 1..len-1 of the region: after patching they hold the
    //    middle of the jump. Landing on the first byte is fine (it is the jump).
    //    Nor may the function compute the address of one (a computed goto's label).
    auto lands_inside = [&](const std::vector<Branch> &list, const char *does) -> const char * {
        for (const Branch &b : list) {
            if (b.target <= addr || b.target >= addr + region.len) continue;
            const char *what = ZydisMnemonicGetString(b.mnemonic);
            if (b.in_cold)
                return reason("a %s at 0x%" PRIx64 " in a cold part of the function %s byte %" PRIu64 " of the region",
                              what, b.site, does, b.target - addr);
            return reason("a %s at +0x%" PRIx64 " in the function %s byte %" PRIu64 " of the region", what,
                          b.site - fn.start, does, b.target - addr);
        }
        return nullptr;
    };
    if (const char *why = lands_inside(w.branches, "targets")) return why;
    if (const char *why = lands_inside(w.addresses, "computes the address of")) return why;

    // 4. A jump through a pointer lands where a stored or computed address points: proven
    //    away from the region (region.hpp), or the function is refused.
    if (const char *why = prove_pointer_jumps(w, fn, addr, region.len, stored)) return why;

    // 5. Another probe's int3 would be overwritten by the jump (and its hits lost).
    for (uint64_t p : other_probes)
        if (p > addr && p < addr + region.len)
            return reason("another probe at +%" PRIu64 " lies inside the %zu bytes replaced",
                          p - addr, region.len);

    *out = region;
    return nullptr;
}

bool branches_to(const CodeRange &fn, const std::vector<CodeRange> &cold, uint64_t target) {
    Walk w;
    if (walk(fn, false, fn.start, &w)) return false;
    for (const CodeRange &part : cold)
        if (walk(part, true, fn.start, &w)) return false;
    for (const Branch &b : w.branches)
        if (b.target == target) return true;
    return false;
}

// ---------------------------------------------------------------------------------------------
// The relocated copy
// ---------------------------------------------------------------------------------------------

namespace {

constexpr size_t kJccRel32Len = 6;  // 0f 8x rel32
// lea -8(%rsp),%rsp; push %rax; movabs $ret,%rax; mov %rax,8(%rsp); pop %rax; jmp rel32
constexpr size_t kCallSeqLen = 5 + 1 + 10 + 5 + 1 + kJmpLen;

void put_le(uint8_t *p, uint64_t v, size_t n) {
    for (size_t i = 0; i < n; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

// rel32 of a branch of length len at `from` to `to`, when it reaches.
bool rel32(uint64_t from, size_t len, uint64_t to, int32_t *rel) {
    const int64_t d = static_cast<int64_t>(to - (from + len));
    if (d < INT32_MIN || d > INT32_MAX) return false;
    *rel = static_cast<int32_t>(d);
    return true;
}

// The condition code (low nibble of 7x / 0f 8x) of a jcc.
uint8_t jcc_condition(const Insn &insn) {
    return insn.zi.opcode & 0x0f;
}

// Writes one instruction at out (runtime address at). Returns bytes written or -errno.
int relocate_one(const Insn &insn, bool last, uint64_t at, uint8_t *out, size_t cap) {
    if (insn.cls == InsnClass::kOutOfLine) {
        if (cap < insn.len) return -ENOSPC;
        return copy_rebased(insn, insn.rip_relative, at, out);  // as the breakpoint path's slots
    }

    if (is_ret(insn)) {
        if (!last) return -EINVAL;
        if (cap < insn.len) return -ENOSPC;
        for (size_t i = 0; i < insn.len; ++i) out[i] = insn.bytes[i];
        return insn.len;
    }

    if (is_indirect_jmp(insn)) {
        // Copied as is; through disp32(%rip), the displacement rebased to reach the same
        // pointer from the copy.
        if (!last) return -EINVAL;
        if (cap < insn.len) return -ENOSPC;
        return copy_rebased(insn, rip_relative_modrm(insn), at, out);
    }

    if (is_call(insn)) {
        if (!last || insn.target == 0) return -EINVAL;
        if (cap < kCallSeqLen) return -ENOSPC;
        // The callee must see the original return address (it returns into the function, and
        // unwinders walking through it see the function, never the detour), and no register
        // or flag may change: reserve the slot first, then fill it through a saved %rax.
        // lea, mov and push/pop leave the flags alone.
        int32_t rel = 0;
        if (!rel32(at + kCallSeqLen - kJmpLen, kJmpLen, insn.target, &rel)) return -ERANGE;
        const uint8_t head[] = {
            0x48, 0x8d, 0x64, 0x24, 0xf8,  // lea -0x8(%rsp),%rsp
            0x50,                          // push %rax
            0x48, 0xb8,                    // movabs $ret,%rax (imm64 follows)
        };
        uint8_t *p = out;
        for (uint8_t b : head) *p++ = b;
        put_le(p, insn.addr + insn.len, 8);
        p += 8;
        const uint8_t tail[] = {
            0x48, 0x89, 0x44, 0x24, 0x08,  // mov %rax,0x8(%rsp)
            0x58,                          // pop %rax
            0xe9,                          // jmp target (rel32 follows)
        };
        for (uint8_t b : tail) *p++ = b;
        put_le(p, static_cast<uint32_t>(rel), 4);
        return static_cast<int>(kCallSeqLen);
    }

    if (!is_direct_jump(insn)) return -EINVAL;
    int32_t rel = 0;
    if (insn.zi.mnemonic == ZYDIS_MNEMONIC_JMP) {
        if (cap < kJmpLen) return -ENOSPC;
        if (!rel32(at, kJmpLen, insn.target, &rel)) return -ERANGE;
        out[0] = 0xe9;
        put_le(out + 1, static_cast<uint32_t>(rel), 4);
        return static_cast<int>(kJmpLen);
    }
    // A jcc, rel8 (7x) or rel32 (0f 8x): always rel32, since the copy is far from the target.
    // Prefixes (branch hints, bnd) are dropped: they change nothing the program can observe.
    if (cap < kJccRel32Len) return -ENOSPC;
    if (!rel32(at, kJccRel32Len, insn.target, &rel)) return -ERANGE;
    out[0] = 0x0f;
    out[1] = static_cast<uint8_t>(0x80 | jcc_condition(insn));
    put_le(out + 2, static_cast<uint32_t>(rel), 4);
    return static_cast<int>(kJccRel32Len);
}

}  // namespace

int relocate_region(const Region &region, uint64_t at, uint8_t *out, size_t cap, RelocMap *map) {
    if (region.n == 0 || region.n > kMaxRegionInsns) return -EINVAL;
    size_t pos = 0;
    bool falls_through = true;
    for (size_t i = 0; i < region.n; ++i) {
        const Insn &insn = region.insns[i];
        const bool last = i + 1 == region.n;
        const int n = relocate_one(insn, last, at + pos, out + pos, cap - pos);
        if (n < 0) return n;
        if (map) {
            map->orig[i] = insn.addr;
            map->offset[i] = static_cast<uint32_t>(pos);
        }
        pos += static_cast<size_t>(n);
        if (last && (is_ret(insn) || is_call(insn) || is_indirect_jmp(insn))) falls_through = false;
    }
    if (map) map->n = region.n;

    if (falls_through) {
        if (cap - pos < kJmpLen) return -ENOSPC;
        int32_t rel = 0;
        if (!rel32(at + pos, kJmpLen, region.addr + region.len, &rel)) return -ERANGE;
        out[pos] = 0xe9;
        put_le(out + pos + 1, static_cast<uint32_t>(rel), 4);
        pos += kJmpLen;
    }
    return static_cast<int>(pos);
}

}  // namespace liveprobe::arch
