// An object file's DWARF read from disk by the `liveprobe` tool (not the target's agent): its
// functions' parameters and source lines, and the variables in scope at an address with where
// they are, for `list --params`, `list --lines` and the source-line probe specs
// (SRCFILE:LINE, FUNC:RELLINE), which the tool turns into FUNC+OFF before the agent sees them.
// Addresses are the file's (before the load bias).
#pragma once

#include <elfutils/libdw.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "symbols/dwarf_params.hpp"

namespace liveprobe::symbols {

struct SourceLine {
    uint64_t addr = 0;   // where the line's first statement starts
    std::string file;    // as the DWARF names it (a path)
    int line = 0;
};

struct SourceFunction {
    std::string name;    // DW_AT_name (a C++ method's own name, not qualified)
    uint64_t entry = 0;  // where it is called (the start of its first range)
    std::vector<std::pair<uint64_t, uint64_t>> ranges;  // [low, high): its code (a hot and a cold part...)
    Dwarf_Off die = 0;   // its DIE (to tell its own lines from those inlined into it)
    std::string decl_file;
    int decl_line = 0;
    std::vector<Param> params;
    std::string ret_type;  // as C writes it
};

// A variable or parameter in scope at an address, and where it is then as a fetch
// (trace/spec.hpp): `%REG` or `+OFF(%REG)`, typed :{DESC}. `fetch` is empty, and `why` says
// why, when the DWARF has no location for it there that a fetch can read.
struct SourceVariable {
    std::string name;
    std::string type;  // as C writes it
    std::string fetch;
    std::string why;
};

class DwarfReader {
public:
    // The object's DWARF, or its separate debug file's: nullptr with *why when it has none.
    static std::unique_ptr<DwarfReader> open(const std::string &path, std::string *why);
    ~DwarfReader();
    DwarfReader(const DwarfReader &) = delete;
    DwarfReader &operator=(const DwarfReader &) = delete;

    // The function whose code holds pc (its entry, or inside it): false when none.
    bool function_at(uint64_t pc, SourceFunction *out);
    // The statement lines of a function's own code (not what was inlined into it), each at the
    // lowest address it starts at, by line.
    std::vector<SourceLine> lines(const SourceFunction &f);
    // Where line `line` of a source file starts: `file` is a base name or the end of a path
    // ("typed_target.cpp", "tests/programs/typed_target.cpp"). One address per function it
    // is in, and per copy of it inlined into another (the lowest of each).
    std::vector<SourceLine> line_addresses(const std::string &file, int line);
    // Whether any compilation unit has a source file `file` names (as line_addresses matches).
    bool has_source(const std::string &file);
    // The variables and parameters in scope at pc, innermost first.
    std::vector<SourceVariable> variables_at(uint64_t pc);

private:
    DwarfReader() = default;
    // fn(cu) for each compilation unit, until it returns true: whether one did.
    bool for_each_unit(const std::function<bool(Dwarf_Die *)> &fn);
    Elf *elf_ = nullptr;        // the object
    Elf *debug_elf_ = nullptr;  // its separate debug file, when its DWARF is there
    Dwarf *dw_ = nullptr;
    Dwarf_CFI *cfi_ = nullptr;
};

// Whether `path` (a DWARF file name) is what `name` says: equal, its base name, or a path's end
// at a '/'.
bool source_matches(const std::string &path, const std::string &name);

}  // namespace liveprobe::symbols
