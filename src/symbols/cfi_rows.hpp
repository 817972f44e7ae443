// An object file's call frame information (.eh_frame) as rows, for an unwinder that cannot run
// libdw on the hit path: arch/x86_64/unwind_table.hpp builds its table from them when a trace
// wants stacks. For each address range of each FDE: where the CFA is (a register plus an
// offset, or an expression the table does not take), and where one register (the frame
// pointer) was saved. Read with libdw, which interprets the CFA program; not async-signal-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace liveprobe::symbols {

struct CfiRow {
    uint64_t start = 0, end = 0;  // file addresses: [start, end)
    bool cfa_known = false;       // CFA = DWARF register cfa_reg + cfa_off (else an expression)
    uint32_t cfa_reg = 0;
    int64_t cfa_off = 0;
    enum class Saved : uint8_t { same, undefined, at_cfa, other } saved = Saved::same;  // `reg`'s rule
    int64_t saved_off = 0;        // at_cfa: the register's value was saved at CFA + saved_off
    bool outermost = false;       // the return address is undefined: no caller (_start, a thread's start)
};

// Appends the rows of the FDEs that start at `fde_starts` (file addresses) in the object file at
// `path`, with register `reg`'s rule and whether the return address (register `ra`) is
// undefined, to *out, merging neighbours with the same rules. false
// when the file cannot be read or has no CFI.
bool cfi_rows(const std::string &path, const std::vector<uint64_t> &fde_starts, uint32_t reg, uint32_t ra,
              std::vector<CfiRow> *out);

}  // namespace liveprobe::symbols
