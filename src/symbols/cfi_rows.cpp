// An object file's call frame information as rows (cfi_rows.hpp).
#include "symbols/cfi_rows.hpp"

#include <elfutils/libdw.h>
#include <dwarf.h>

#include <cstdlib>

#include "symbols/elf_object.hpp"

namespace liveprobe::symbols {
namespace {

// One row's rules from libdw's frame: the CFA as register + offset (libdw's DW_OP_bregx), and
// `reg`'s rule: same value (no expression: a null *ops), undefined (an empty one: *ops is
// ops_mem), or saved at CFA + N (DW_OP_call_frame_cfa, then DW_OP_plus_uconst N when N is not 0).
CfiRow row_of(Dwarf_Frame *frame, uint32_t reg, uint32_t ra)
{
    CfiRow r;
    Dwarf_Op *ops = nullptr;
    size_t nops = 0;
    if (dwarf_frame_cfa(frame, &ops, &nops) == 0 && nops == 1 && ops[0].atom == DW_OP_bregx) {
        r.cfa_known = true;
        r.cfa_reg = static_cast<uint32_t>(ops[0].number);
        r.cfa_off = static_cast<int64_t>(ops[0].number2);
    }
    Dwarf_Op mem[3];
    ops = nullptr;
    nops = 0;
    r.outermost = dwarf_frame_register(frame, static_cast<int>(ra), mem, &ops, &nops) == 0 && nops == 0 && ops == mem;
    ops = nullptr;
    nops = 0;
    if (dwarf_frame_register(frame, static_cast<int>(reg), mem, &ops, &nops) != 0) {
        r.saved = CfiRow::Saved::other;
    } else if (nops == 0) {
        r.saved = ops == nullptr ? CfiRow::Saved::same : CfiRow::Saved::undefined;
    } else if (ops[0].atom == DW_OP_call_frame_cfa && (nops == 1 || (nops == 2 && ops[1].atom == DW_OP_plus_uconst))) {
        r.saved = CfiRow::Saved::at_cfa;
        r.saved_off = nops == 2 ? static_cast<int64_t>(ops[1].number) : 0;
    } else {
        r.saved = CfiRow::Saved::other;
    }
    return r;
}

bool same_rules(const CfiRow &a, const CfiRow &b)
{
    return a.cfa_known == b.cfa_known && a.cfa_reg == b.cfa_reg && a.cfa_off == b.cfa_off && a.saved == b.saved &&
           a.saved_off == b.saved_off && a.outermost == b.outermost;
}

}  // namespace

bool cfi_rows(const std::string &path, const std::vector<uint64_t> &fde_starts, uint32_t reg, uint32_t ra,
              std::vector<CfiRow> *out)
{
    Elf *elf = read_elf_file(path);
    if (!elf) return false;
    Dwarf_CFI *cfi = dwarf_getcfi_elf(elf);
    if (!cfi) {
        elf_end(elf);
        return false;
    }
    for (size_t i = 0; i < fde_starts.size(); ++i) {
        const uint64_t next = i + 1 < fde_starts.size() ? fde_starts[i + 1] : UINT64_MAX;
        // Row by row: libdw says each row's range; the FDE ends where no row is found (or at
        // the next FDE).
        for (uint64_t pc = fde_starts[i]; pc < next;) {
            Dwarf_Frame *frame = nullptr;
            if (dwarf_cfi_addrframe(cfi, pc, &frame) != 0) break;
            Dwarf_Addr s = 0, e = 0;
            bool signal = false;
            const bool ok = dwarf_frame_info(frame, &s, &e, &signal) >= 0 && s <= pc && e > pc;
            CfiRow r = ok ? row_of(frame, reg, ra) : CfiRow{};
            std::free(frame);
            if (!ok) break;
            r.start = pc;
            r.end = e < next ? e : next;
            if (!out->empty() && out->back().end == r.start && same_rules(out->back(), r)) out->back().end = r.end;
            else out->push_back(r);
            pc = r.end;
        }
    }
    dwarf_cfi_end(cfi);
    elf_end(elf);
    return true;
}

}  // namespace liveprobe::symbols
