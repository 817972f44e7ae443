// Jump tables (jump_table.hpp): recognizing a switch dispatch and reading its entries.
//
// The dispatch is matched backwards from the jmp over the instructions a linear decode found
// before it, by register definitions: the register jumped through was last written by an add of
// two registers; of those, one was last written by a movsxd of a 4-scaled table entry, the other
// by a RIP-relative lea of the table, and the movsxd's base register by a lea of the same table.
// Any control transfer met on the way fails the match: the definitions must be the ones every
// path to the jmp runs. The table's address may also be a callee-saved register's, set once for
// the whole function (hoisted_table). (A branch into the middle of the sequence from elsewhere would break that
// too: region.cpp checks that no known target lands after first_site, up to the jmp.)
#include "arch/x86_64/jump_table.hpp"

#include <Zydis/Zydis.h>

#include <algorithm>
#include <cstring>

namespace liveprobe::arch {
namespace {

constexpr size_t kWindow = 24;  // instructions looked at before the jmp
constexpr size_t kMaxCandidates = 8;  // addresses a hoisted table register is set to

struct Dec {
    uint64_t site = 0;
    ZydisDecodedInstruction zi;
    ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
};

bool decode_at(uint64_t start, const uint8_t *code, size_t len, uint32_t off, Dec *d)
{
    ZydisDecoder dec;
    ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
    if (off >= len) return false;
    d->site = start + off;
    return ZYAN_SUCCESS(ZydisDecoderDecodeFull(&dec, code + off, len - off, &d->zi, d->ops));
}

ZydisRegister full(ZydisRegister r)
{
    return ZydisRegisterGetLargestEnclosing(ZYDIS_MACHINE_MODE_LONG_64, r);
}

bool is_gpr64(ZydisRegister r)
{
    return ZydisRegisterGetClass(r) == ZYDIS_REGCLASS_GPR64;
}

// True when d writes r (any part of it), explicitly or implicitly.
bool writes(const Dec &d, ZydisRegister r)
{
    for (size_t i = 0; i < d.zi.operand_count; ++i) {
        const ZydisDecodedOperand &o = d.ops[i];
        if (o.type == ZYDIS_OPERAND_TYPE_REGISTER && (o.actions & ZYDIS_OPERAND_ACTION_MASK_WRITE) &&
            full(o.reg.value) == r)
            return true;
    }
    return false;
}

bool transfers_control(const Dec &d)
{
    switch (d.zi.meta.category) {
        case ZYDIS_CATEGORY_COND_BR:
        case ZYDIS_CATEGORY_UNCOND_BR:
        case ZYDIS_CATEGORY_CALL:
        case ZYDIS_CATEGORY_RET:
        case ZYDIS_CATEGORY_SYSCALL:
        case ZYDIS_CATEGORY_INTERRUPT:
        case ZYDIS_CATEGORY_SYSTEM:
            return true;
        default:
            return false;
    }
}

// `lea disp(%rip), %r64`: its address.
bool rip_lea(const Dec &d, ZydisRegister r, uint64_t *addr)
{
    if (d.zi.mnemonic != ZYDIS_MNEMONIC_LEA || d.zi.operand_count_visible != 2) return false;
    if (d.ops[0].type != ZYDIS_OPERAND_TYPE_REGISTER || d.ops[0].reg.value != r || !is_gpr64(r)) return false;
    const ZydisDecodedOperand &m = d.ops[1];
    if (m.type != ZYDIS_OPERAND_TYPE_MEMORY || m.mem.base != ZYDIS_REGISTER_RIP || m.mem.index != ZYDIS_REGISTER_NONE)
        return false;
    ZyanU64 a = 0;
    if (!ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(&d.zi, &m, d.site, &a))) return false;
    *addr = a;
    return true;
}

// `movsxd (%rB,%rI,4), %r64`: its base and index registers.
bool entry_load(const Dec &d, ZydisRegister r, ZydisRegister *base, ZydisRegister *index)
{
    if (d.zi.mnemonic != ZYDIS_MNEMONIC_MOVSXD || d.zi.operand_count_visible != 2) return false;
    if (d.ops[0].type != ZYDIS_OPERAND_TYPE_REGISTER || d.ops[0].reg.value != r || !is_gpr64(r)) return false;
    const ZydisDecodedOperand &m = d.ops[1];
    if (m.type != ZYDIS_OPERAND_TYPE_MEMORY || m.size != 32 || !is_gpr64(m.mem.base) ||
        m.mem.index == ZYDIS_REGISTER_NONE || m.mem.scale != 4 || m.mem.disp.value != 0 ||
        (m.mem.segment != ZYDIS_REGISTER_DS && m.mem.segment != ZYDIS_REGISTER_SS))  // SS: based on rbp
        return false;
    *base = m.mem.base;
    *index = full(m.mem.index);
    return true;
}

// The window of instructions before the jmp, oldest first; fails on a control transfer in it
// only when a definition is looked for past it (see last_def).
struct Window {
    Dec insns[kWindow];
    size_t n = 0;
};

// The index in w of the last instruction before `before` writing r; -1 when none is in the
// window, -2 when a control transfer comes first.
long last_def(const Window &w, size_t before, ZydisRegister r)
{
    for (size_t i = before; i-- > 0;) {
        if (transfers_control(w.insns[i])) return -2;
        if (writes(w.insns[i], r)) return static_cast<long>(i);
    }
    return -1;
}

// True when d copies r's low 32 bits onto itself (`mov %eax,%eax`: zero-extends, the value an
// unsigned 32-bit compare saw is kept).
bool zero_extends_itself(const Dec &d, ZydisRegister r)
{
    return d.zi.mnemonic == ZYDIS_MNEMONIC_MOV && d.zi.operand_count_visible == 2 &&
           d.ops[0].type == ZYDIS_OPERAND_TYPE_REGISTER && d.ops[1].type == ZYDIS_OPERAND_TYPE_REGISTER &&
           d.ops[0].reg.value == d.ops[1].reg.value && full(d.ops[0].reg.value) == r &&
           ZydisRegisterGetClass(d.ops[0].reg.value) == ZYDIS_REGCLASS_GPR32;
}

// The bounds check guarding the table's use at w.insns[use], indexed by `index`: a compare of
// the index with an immediate and, right after it, the unsigned jump away when it is above
// (ja: imm + 1 entries) or not below (jae: imm entries), the index not written between but by a
// zero extension of itself. Returns the entry count and the compare's position, or 0.
size_t table_bound(const Window &w, size_t use, ZydisRegister index, size_t *cmp_at)
{
    for (size_t i = use; i-- > 1;) {
        const Dec &d = w.insns[i];
        if (d.zi.mnemonic == ZYDIS_MNEMONIC_JNBE || d.zi.mnemonic == ZYDIS_MNEMONIC_JNB) {
            const Dec &c = w.insns[i - 1];
            if (c.zi.mnemonic != ZYDIS_MNEMONIC_CMP || c.zi.operand_count_visible != 2 ||
                c.ops[0].type != ZYDIS_OPERAND_TYPE_REGISTER || full(c.ops[0].reg.value) != index ||
                c.ops[1].type != ZYDIS_OPERAND_TYPE_IMMEDIATE)
                return 0;
            const uint64_t imm = c.ops[1].imm.value.u & ((c.ops[0].size >= 64) ? ~0ull : (1ull << c.ops[0].size) - 1);
            const uint64_t n = d.zi.mnemonic == ZYDIS_MNEMONIC_JNBE ? imm + 1 : imm;
            if (n == 0 || n > kMaxJumpTableEntries) return 0;
            *cmp_at = i - 1;
            return static_cast<size_t>(n);
        }
        if (transfers_control(d)) return 0;
        if (writes(d, index) && !zero_extends_itself(d, index)) return 0;
    }
    return 0;
}

// Every part of the function, decoded linearly (region.cpp's starts), and the jump's site.
struct Part {
    const std::vector<CodePart> &parts;
    uint64_t jmp_site;
    const KnownJumps *known;  // other dispatches' targets, or null
    bool narrow;              // read_jump_table's
};

bool callee_saved(ZydisRegister r)
{
    switch (r) {
        case ZYDIS_REGISTER_RBX:
        case ZYDIS_REGISTER_RBP:
        case ZYDIS_REGISTER_R12:
        case ZYDIS_REGISTER_R13:
        case ZYDIS_REGISTER_R14:
        case ZYDIS_REGISTER_R15:
            return true;
        default:
            return false;
    }
}

// The table a register holds at the jump when its definition is not in the window: GCC hoists
// `lea TABLE(%rip), %rB` out of the loop a switch is in, into a callee-saved register when the
// loop makes calls (which keep it), any register when it makes none, and may reuse the register
// for something else after the loop. Every value the register can hold at the jump must then
// come from such a lea: no other write of it (setcc, mov, pop..., and for a caller-saved
// register any call, which may change it), and not its value on entry (the caller's), may
// reach the jump on a path that no lea of it crosses (reaches_jump). Each lea's address is a
// candidate, and read_jump_table
// keeps those whose entries all target the function: one that does not cannot be what the jump
// adds, or the program would jump out of the function through it. The targets are those of
// every candidate kept, more than the real table's at worst, which only refuses more.
//
// The paths are the direct branches and fallthroughs of every part (cold parts branch back into
// the function), from the function's entry; a call returns (the register is the callee's to
// keep), and falling off a part's end (after a call that does not return) ends a path.
struct Flow {
    std::vector<Dec> insns;  // every part's, by address
    const KnownJumps *known = nullptr;
    size_t index_of(uint64_t addr) const
    {
        size_t lo = 0, hi = insns.size();
        while (lo < hi) {
            const size_t mid = (lo + hi) / 2;
            if (insns[mid].site < addr) lo = mid + 1;
            else hi = mid;
        }
        return lo < insns.size() && insns[lo].site == addr ? lo : SIZE_MAX;
    }
    std::vector<std::pair<uint64_t, uint64_t>> ranges;  // each part's [start, end)
    bool covers(uint64_t addr) const
    {
        for (auto [lo, hi] : ranges)
            if (addr >= lo && addr < hi) return true;
        return false;
    }
};

// Whether a value of r set at insns[from] (or on entry, from == SIZE_MAX) reaches the jump at
// insns[jmp] on a path no lea of r crosses (nor, `calls_write`: r is caller-saved, a call,
// whose value is then its own); true too when a path leaves what can be followed (an indirect
// jump, a branch into the middle of an instruction).
bool reaches_jump(const Flow &f, uint64_t entry, ZydisRegister r, size_t from, size_t jmp, bool calls_write)
{
    std::vector<char> seen(f.insns.size(), 0);
    std::vector<size_t> todo;
    auto push = [&](size_t k) {
        if (k < f.insns.size() && !seen[k]) seen[k] = 1, todo.push_back(k);
    };
    auto next = [&](size_t k) {  // the fallthrough, when in the same part
        if (k + 1 < f.insns.size() && f.insns[k + 1].site == f.insns[k].site + f.insns[k].zi.length) push(k + 1);
    };
    if (from == SIZE_MAX) push(f.index_of(entry));
    else next(from);
    while (!todo.empty()) {
        const size_t k = todo.back();
        todo.pop_back();
        if (k == jmp) return true;
        const Dec &d = f.insns[k];
        uint64_t t = 0;
        if (rip_lea(d, r, &t)) continue;  // a table's address from here on
        if (calls_write && d.zi.mnemonic == ZYDIS_MNEMONIC_CALL) continue;  // the call's value from here on: its own write
        const ZydisMnemonic m = d.zi.mnemonic;
        if (m == ZYDIS_MNEMONIC_RET) continue;
        const bool cond = d.zi.meta.category == ZYDIS_CATEGORY_COND_BR;
        if (m == ZYDIS_MNEMONIC_JMP || cond) {
            const ZydisDecodedOperand &o = d.ops[0];
            if (o.type != ZYDIS_OPERAND_TYPE_IMMEDIATE || !o.imm.is_relative) {
                // Another dispatch whose table was read: its targets; any other: unknown.
                auto it = f.known ? f.known->find(d.site) : KnownJumps::const_iterator();
                if (!f.known || it == f.known->end()) return true;
                for (uint64_t target : it->second) {
                    const size_t at = f.index_of(target);
                    if (at == SIZE_MAX) return true;
                    push(at);
                }
                continue;
            }
            ZyanU64 target = 0;
            if (!ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(&d.zi, &o, d.site, &target))) return true;
            if (f.covers(target)) {
                const size_t at = f.index_of(target);
                if (at == SIZE_MAX) return true;
                push(at);
            }  // else: a tail call, out of the function
            if (cond) next(k);
            continue;
        }
        if (d.zi.meta.category == ZYDIS_CATEGORY_INTERRUPT || d.zi.meta.category == ZYDIS_CATEGORY_SYSTEM)
            return true;
        next(k);
    }
    return false;
}

bool hoisted_table(const Part &p, ZydisRegister r, uint64_t jmp_site, std::vector<uint64_t> *tables)
{
    const bool kept_by_calls = callee_saved(r);
    Flow f;
    f.known = p.known;
    for (const CodePart &c : p.parts) {
        f.ranges.emplace_back(c.start, c.start + c.len);
        for (uint32_t off : *c.starts) {
            f.insns.emplace_back();
            if (!decode_at(c.start, c.code, c.len, off, &f.insns.back())) return false;
        }
    }
    std::sort(f.insns.begin(), f.insns.end(), [](const Dec &a, const Dec &b) { return a.site < b.site; });
    const uint64_t entry = p.parts.front().start;
    const size_t jmp = f.index_of(jmp_site);
    if (jmp == SIZE_MAX || reaches_jump(f, entry, r, SIZE_MAX, jmp, !kept_by_calls)) return false;
    for (size_t i = 0; i < f.insns.size(); ++i) {
        const bool call_clobbers = !kept_by_calls && f.insns[i].zi.mnemonic == ZYDIS_MNEMONIC_CALL;
        if (!writes(f.insns[i], r) && !call_clobbers) continue;
        uint64_t t = 0;
        if (rip_lea(f.insns[i], r, &t)) {
            // Only the leas whose value reaches the jump: a caller-saved register is set to
            // many addresses (a string for each call), which the calls then take.
            if (std::find(tables->begin(), tables->end(), t) == tables->end() &&
                reaches_jump(f, entry, r, i, jmp, !kept_by_calls))
                tables->push_back(t);
        } else if (reaches_jump(f, entry, r, i, jmp, !kept_by_calls)) {
            return false;
        }
    }
    return !tables->empty() && tables->size() <= kMaxCandidates;
}

const char *match_relative(const Window &w, const Part &p, ZydisRegister jumped, JumpTable *out,
                           std::vector<uint64_t> *candidates)
{
    const long add = last_def(w, w.n, jumped);
    if (add < 0) return "the register jumped through is not computed just before the jump";
    const Dec &a = w.insns[add];
    if (a.zi.mnemonic != ZYDIS_MNEMONIC_ADD || a.zi.operand_count_visible != 2 ||
        a.ops[1].type != ZYDIS_OPERAND_TYPE_REGISTER || !is_gpr64(a.ops[1].reg.value)) {
        // A 64-bit load of the whole register from memory: a pointer.
        out->through_pointer = a.zi.mnemonic == ZYDIS_MNEMONIC_MOV && a.zi.operand_count_visible == 2 &&
                               a.ops[0].type == ZYDIS_OPERAND_TYPE_REGISTER && a.ops[0].reg.value == jumped &&
                               a.ops[1].type == ZYDIS_OPERAND_TYPE_MEMORY && a.ops[1].size == 64;
        return "the register jumped through is not the sum of two registers";
    }
    const ZydisRegister other = a.ops[1].reg.value;
    // jumped = jumped + other: one held the entry, the other the table.
    const long d1 = last_def(w, static_cast<size_t>(add), jumped);
    const long d2 = last_def(w, static_cast<size_t>(add), other);
    long load = -1, lea = -1;
    ZydisRegister base = ZYDIS_REGISTER_NONE, index = ZYDIS_REGISTER_NONE;
    uint64_t table = 0, table2 = 0;
    bool hoisted = false;  // the table's address comes from a lea outside the window
    if (d1 >= 0 && d2 < 0 && entry_load(w.insns[d1], jumped, &base, &index) && hoisted_table(p, other, p.jmp_site, candidates)) {
        load = lea = d1;
        hoisted = true;
        table = candidates->front();
    } else if (d1 < 0 || d2 < 0) {
        return "the jump's operands are not computed just before it";
    } else if (entry_load(w.insns[d1], jumped, &base, &index) && rip_lea(w.insns[d2], other, &table)) {
        load = d1;
        lea = d2;
    } else if (entry_load(w.insns[d2], other, &base, &index) && rip_lea(w.insns[d1], jumped, &table)) {
        load = d2;
        lea = d1;
    } else {
        return "the jump's operands are not a table entry and the table's address";
    }
    long bdef = last_def(w, static_cast<size_t>(load), base);
    if (hoisted && base == other && bdef < 0) {
        bdef = load;  // the same register, holding the same table
    } else if (bdef < 0 || !rip_lea(w.insns[bdef], base, &table2) || table2 != table) {
        return "the table entry is not read from the table the jump adds";
    }
    out->table = table;
    long first = lea < load ? lea : load;
    if (bdef < first) first = bdef;
    // The table's lea may come well before the entry's load, with a loop's head between them
    // that a jump back reaches (gawk's parse_expression): when every value of the base register
    // that reaches the jump is a table's lea (hoisted_table), the sequence that must be entered
    // at its top starts at the load.
    if (p.narrow && !hoisted && first < load && hoisted_table(p, base, p.jmp_site, candidates)) {
        hoisted = true;
        first = load;
    }
    if (!hoisted) *candidates = {table};
    size_t cmp_at = 0;
    out->entries = table_bound(w, static_cast<size_t>(load), index, &cmp_at);
    if (out->entries && static_cast<long>(cmp_at) < first) first = static_cast<long>(cmp_at);
    out->first_site = w.insns[first].site;
    return nullptr;
}

// The entries of the table at `table` (`esize` bytes each: 4, relative to the table; 8,
// addresses): `entries` of them as the bounds check lets through, each of which must target
// the function; without one (0), while they do. nullptr, or why they are not a table's.
const char *read_entries(uint64_t table, size_t esize, size_t entries, ReadMemory read,
                         bool (*in_function)(uint64_t target, const void *ctx), const void *ctx,
                         std::vector<uint64_t> *targets)
{
    const size_t limit = entries ? entries : kMaxJumpTableEntries;
    constexpr size_t kChunk = 64;
    uint8_t buf[kChunk * 8];
    for (size_t i = 0; i < limit;) {
        const size_t want = limit - i < kChunk ? limit - i : kChunk;
        size_t got = want;
        if (!read(table + i * esize, buf, want * esize)) {
            // The chunk crosses the end of what is readable: one entry at a time.
            got = 0;
            while (got < want && read(table + (i + got) * esize, buf + got * esize, esize)) ++got;
            if (entries && got < want) return "the table cannot be read";
        }
        for (size_t k = 0; k < got; ++k) {
            uint64_t target = 0;
            if (esize == 4) {
                int32_t e;
                std::memcpy(&e, buf + k * 4, 4);
                target = table + static_cast<uint64_t>(static_cast<int64_t>(e));
            } else {
                std::memcpy(&target, buf + k * 8, 8);
            }
            if (!in_function(target, ctx)) {
                if (entries) return "an entry of the table does not target an instruction of the function";
                if (targets->empty()) return "the table's first entry does not target an instruction of the function";
                return nullptr;
            }
            targets->push_back(target);
        }
        if (got < want) break;
        i += got;
    }
    if (targets->empty()) return "the table cannot be read";
    return nullptr;
}

}  // namespace

const char *read_jump_table(const std::vector<CodePart> &parts, size_t part_index, size_t n_before, uint32_t jmp_off,
                            ReadMemory read, bool (*in_function)(uint64_t target, const void *ctx), const void *ctx,
                            JumpTable *out, const KnownJumps *known, bool narrow)
{
    const CodePart &here = parts[part_index];
    const uint64_t start = here.start;
    const uint8_t *code = here.code;
    const size_t len = here.len;
    const Part part{parts, start + jmp_off, known, narrow};
    const std::vector<uint32_t> starts(here.starts->begin(), here.starts->begin() + static_cast<long>(n_before));
    if (!read) return "no memory reader";
    Dec j;
    if (!decode_at(start, code, len, jmp_off, &j) || j.zi.mnemonic != ZYDIS_MNEMONIC_JMP ||
        j.zi.operand_count_visible < 1)
        return "not a jump";
    const ZydisDecodedOperand &op = j.ops[0];
    Window w;
    const size_t from = starts.size() > kWindow ? starts.size() - kWindow : 0;
    for (size_t i = from; i < starts.size(); ++i)
        if (!decode_at(start, code, len, starts[i], &w.insns[w.n++])) return "undecodable code before the jump";
    bool relative = false;
    out->entries = 0;
    out->through_pointer = false;
    std::vector<uint64_t> candidates;
    if (op.type == ZYDIS_OPERAND_TYPE_REGISTER && is_gpr64(op.reg.value)) {
        if (const char *why = match_relative(w, part, op.reg.value, out, &candidates)) return why;
        relative = true;
    } else if (op.type == ZYDIS_OPERAND_TYPE_MEMORY && op.size == 64 && op.mem.base == ZYDIS_REGISTER_NONE &&
               op.mem.index != ZYDIS_REGISTER_NONE && op.mem.scale == 8 && op.mem.segment == ZYDIS_REGISTER_DS) {
        out->table = static_cast<uint64_t>(op.mem.disp.value);
        candidates = {out->table};
        out->first_site = j.site;
        size_t cmp_at = 0;
        out->entries = table_bound(w, w.n, full(op.mem.index), &cmp_at);
        if (out->entries) out->first_site = w.insns[cmp_at].site;
    } else {
        out->through_pointer = op.type == ZYDIS_OPERAND_TYPE_MEMORY;  // jmp *8(%rax), jmp *ptr(%rip)
        return "the jump is through neither a computed table entry nor a table of addresses";
    }
    out->relative = relative;
    out->targets.clear();
    const char *first_why = nullptr;
    size_t kept = 0;
    for (uint64_t table : candidates) {
        std::vector<uint64_t> targets;
        const char *why = read_entries(table, relative ? 4 : 8, out->entries, read, in_function, ctx, &targets);
        if (why) {
            if (!first_why) first_why = why;
            continue;
        }
        if (kept++ == 0) out->table = table;
        out->targets.insert(out->targets.end(), targets.begin(), targets.end());
    }
    return kept ? nullptr : first_why;
}

}  // namespace liveprobe::arch
