#include "symbols/dwarf_lines.hpp"

#include <dwarf.h>
#include <elfutils/libdw.h>

#include <algorithm>
#include <functional>
#include <map>

#include <fmt/format.h>

#include "symbols/dwarf_types.hpp"
#include "symbols/elf_object.hpp"
#include "trace/value_type.hpp"

namespace liveprobe::symbols {
namespace {

// DWARF's x86-64 register numbers (psABI 3.6.2) as the spec's %REG names them.
const char *reg_name(unsigned n)
{
    static const char *const kNames[] = {"ax", "dx", "cx", "bx", "si", "di", "bp", "sp",
                                         "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15"};
    return n < 16 ? kNames[n] : nullptr;
}

// The subprogram (with code) whose range holds pc in the unit cu, into *out.
bool subprogram_in(Dwarf_Die *cu, uint64_t pc, Dwarf_Die *out)
{
    Dwarf_Die *scopes = nullptr;
    const int n = dwarf_getscopes(cu, pc, &scopes);
    bool found = false;
    for (int i = 0; i < n && !found; ++i)
        if (dwarf_tag(&scopes[i]) == DW_TAG_subprogram) {
            *out = scopes[i];
            found = true;
        }
    free(scopes);
    return found;
}

// The DIE of the innermost function or inlined copy of one whose code holds pc (one probe
// each: gdb's locations of a line), 0 when pc is in none.
Dwarf_Off code_scope(Dwarf_Die *cu, uint64_t pc)
{
    Dwarf_Die *scopes = nullptr;
    const int n = dwarf_getscopes(cu, pc, &scopes);
    Dwarf_Off found = 0;
    for (int i = 0; i < n && !found; ++i)
        if (dwarf_tag(&scopes[i]) == DW_TAG_subprogram || dwarf_tag(&scopes[i]) == DW_TAG_inlined_subroutine)
            found = dwarf_dieoffset(&scopes[i]);
    free(scopes);
    return found;
}

// fn(addr, file, line) for each row of cu's line table that begins a statement, with a line
// and a file (not a sequence's end).
template <typename Fn>
void each_statement(Dwarf_Die *cu, Fn fn)
{
    Dwarf_Lines *table = nullptr;
    size_t n = 0;
    if (dwarf_getsrclines(cu, &table, &n) != 0) return;
    for (size_t i = 0; i < n; ++i) {
        Dwarf_Line *l = dwarf_onesrcline(table, i);
        Dwarf_Addr addr = 0;
        bool stmt = false, end = false;
        int line = 0;
        const char *file = dwarf_linesrc(l, nullptr, nullptr);
        if (!file || dwarf_lineaddr(l, &addr) != 0 || dwarf_lineno(l, &line) != 0 || line == 0) continue;
        dwarf_linebeginstatement(l, &stmt);
        dwarf_lineendsequence(l, &end);
        if (stmt && !end) fn(addr, file, line);
    }
}

// The line kept under `key`: the one at the lowest address.
template <typename Key>
void keep_lowest(std::map<Key, SourceLine> &lines, Key key, SourceLine l)
{
    auto [it, added] = lines.try_emplace(key, l);
    if (!added && l.addr < it->second.addr) it->second = std::move(l);
}

// A register plus a constant: DW_OP_bregN, DW_OP_bregx (what libdw gives for a CFA rule).
bool breg(const Dwarf_Op *op, size_t n, unsigned *reg, int64_t *off)
{
    if (n != 1) return false;
    if (op[0].atom >= DW_OP_breg0 && op[0].atom <= DW_OP_breg31) {
        *reg = op[0].atom - DW_OP_breg0;
        *off = static_cast<int64_t>(op[0].number);
        return true;
    }
    if (op[0].atom != DW_OP_bregx) return false;
    *reg = static_cast<unsigned>(op[0].number);
    *off = static_cast<int64_t>(op[0].number2);
    return true;
}

// The address a DWARF expression computes as `+OFF(%REG)` text: a register plus a constant
// (DW_OP_bregN, or DW_OP_fbreg with a frame base that is the CFA, itself a register plus a
// constant at pc). False when it is anything else.
bool reg_plus(const Dwarf_Op *op, size_t n, Dwarf_Die *fn, Dwarf_CFI *cfi, uint64_t pc, unsigned *reg, int64_t *off)
{
    if (breg(op, n, reg, off)) return true;
    if (n != 1 || op[0].atom != DW_OP_fbreg || !cfi) return false;
    Dwarf_Attribute fb_attr;
    Dwarf_Op *fb = nullptr;
    size_t fb_n = 0;
    if (!dwarf_attr_integrate(fn, DW_AT_frame_base, &fb_attr) || dwarf_getlocation(&fb_attr, &fb, &fb_n) != 0 || fb_n != 1 ||
        fb[0].atom != DW_OP_call_frame_cfa)
        return false;
    Dwarf_Frame *frame = nullptr;
    if (dwarf_cfi_addrframe(cfi, pc, &frame) != 0) return false;
    Dwarf_Op *cfa = nullptr;
    size_t cfa_n = 0;
    unsigned cfa_reg = 0;
    int64_t cfa_off = 0;
    const bool ok = dwarf_frame_cfa(frame, &cfa, &cfa_n) == 0 && breg(cfa, cfa_n, &cfa_reg, &cfa_off);
    if (ok) {
        *reg = cfa_reg;
        *off = cfa_off + static_cast<int64_t>(op[0].number);
    }
    free(frame);
    return ok;
}

// Where a variable is at pc, as a fetch, or why it cannot be read.
void locate(Dwarf_Die *var, Dwarf_Die *fn, Dwarf_CFI *cfi, uint64_t pc, SourceVariable *v)
{
    const std::string desc = describe_type(var);
    const auto t = trace::parse_vtype(desc);
    Dwarf_Attribute attr;
    if (!t || t->kind == trace::VKind::void_) {
        v->why = "its type is not known";
        return;
    }
    if (!dwarf_attr_integrate(var, DW_AT_location, &attr)) {
        v->why = "optimized out (no location)";
        return;
    }
    Dwarf_Op *op = nullptr;
    size_t n = 0;
    const int got = dwarf_getlocation_addr(&attr, pc, &op, &n, 1);
    if (got <= 0 || n == 0) {
        v->why = "optimized out here (no location at this address)";
        return;
    }
    unsigned reg = 0;
    int64_t off = 0;
    if (n == 1 && op[0].atom >= DW_OP_reg0 && op[0].atom <= DW_OP_reg15) {
        if (t->size > 8 && t->kind != trace::VKind::string) {
            v->why = "in a register, and larger than one";
            return;
        }
        v->fetch = fmt::format("%{}:{{{}}}", reg_name(op[0].atom - DW_OP_reg0), desc);
        return;
    }
    if (reg_plus(op, n, fn, cfi, pc, &reg, &off) && reg_name(reg)) {
        v->fetch = fmt::format("{}{}(%{}):{{{}}}", off < 0 ? '-' : '+', off < 0 ? -static_cast<uint64_t>(off) : static_cast<uint64_t>(off),
                               reg_name(reg), desc);
        return;
    }
    v->why = "its location is an expression liveprobe does not read (a vector register, pieces, a computed value)";
}

}  // namespace

bool source_matches(const std::string &path, const std::string &name)
{
    if (path == name) return true;
    return path.size() > name.size() && path.compare(path.size() - name.size(), name.size(), name) == 0 &&
           path[path.size() - name.size() - 1] == '/';
}

std::unique_ptr<DwarfReader> DwarfReader::open(const std::string &path, std::string *why)
{
    std::unique_ptr<DwarfReader> r(new DwarfReader);
    r->elf_ = read_elf_file(path);
    if (!r->elf_) {
        *why = fmt::format("{}: not an ELF file", path);
        return nullptr;
    }
    r->cfi_ = dwarf_getcfi_elf(r->elf_);  // .eh_frame is the object's own, not its debug file's
    r->dw_ = dwarf_begin_elf(r->elf_, DWARF_C_READ, nullptr);
    if (!r->dw_) {
        const std::string debug = find_debug_file(r->elf_, path);
        if (!debug.empty()) r->debug_elf_ = read_elf_file(debug);
        if (r->debug_elf_) r->dw_ = dwarf_begin_elf(r->debug_elf_, DWARF_C_READ, nullptr);
    }
    if (!r->dw_) {
        *why = fmt::format("{} has no DWARF (build it with -g, or install its debug symbols)", path);
        return nullptr;
    }
    return r;
}

DwarfReader::~DwarfReader()
{
    if (dw_) dwarf_end(dw_);
    if (cfi_) dwarf_cfi_end(cfi_);
    if (debug_elf_) elf_end(debug_elf_);
    if (elf_) elf_end(elf_);
}

bool DwarfReader::function_at(uint64_t pc, SourceFunction *out)
{
    Dwarf_Die cu, fn;
    if (!dwarf_addrdie(dw_, pc, &cu) || !subprogram_in(&cu, pc, &fn)) return false;
    const char *name = dwarf_diename(&fn);
    out->name = name ? name : "";
    out->die = dwarf_dieoffset(&fn);
    out->ranges.clear();
    Dwarf_Addr base = 0, start = 0, end = 0;
    for (ptrdiff_t off = 0; (off = dwarf_ranges(&fn, off, &base, &start, &end)) > 0;) out->ranges.emplace_back(start, end);
    Dwarf_Addr entry = 0;
    out->entry = dwarf_entrypc(&fn, &entry) == 0 ? entry : out->ranges.empty() ? 0 : out->ranges.front().first;
    const char *file = dwarf_decl_file(&fn);
    out->decl_file = file ? file : "";
    dwarf_decl_line(&fn, &out->decl_line);
    out->params.clear();
    params_of_die(&fn, &out->params, nullptr);
    Dwarf_Die ret;
    out->ret_type.clear();
    type_of(&fn, &ret, &out->ret_type);
    return true;
}

std::vector<SourceLine> DwarfReader::lines(const SourceFunction &f)
{
    std::map<int, SourceLine> by_line;
    Dwarf_Die cu;
    if (!dwarf_addrdie(dw_, f.entry, &cu)) return {};
    const auto inside = [&](Dwarf_Addr a) {
        return std::any_of(f.ranges.begin(), f.ranges.end(), [a](const auto &r) { return a >= r.first && a < r.second; });
    };
    each_statement(&cu, [&](Dwarf_Addr addr, const char *file, int line) {
        if (inside(addr) && (f.decl_file.empty() || f.decl_file == file) && line >= f.decl_line &&
            code_scope(&cu, addr) == f.die)
            keep_lowest(by_line, line, SourceLine{addr, file, line});
    });
    std::vector<SourceLine> out;
    for (auto &[line, s] : by_line) out.push_back(std::move(s));
    return out;
}

std::vector<SourceLine> DwarfReader::line_addresses(const std::string &file, int line)
{
    std::map<Dwarf_Off, SourceLine> by_scope;  // by the function's or inlined copy's DIE
    for_each_unit([&](Dwarf_Die *cu) {
        each_statement(cu, [&](Dwarf_Addr addr, const char *src, int ln) {
            if (ln != line || !source_matches(src, file)) return;
            if (const Dwarf_Off scope = code_scope(cu, addr)) keep_lowest(by_scope, scope, SourceLine{addr, src, ln});
        });
        return false;
    });
    std::vector<SourceLine> out;
    for (auto &[scope, s] : by_scope) out.push_back(std::move(s));
    return out;
}

bool DwarfReader::has_source(const std::string &file)
{
    return for_each_unit([&](Dwarf_Die *cu) {
        Dwarf_Files *files = nullptr;
        size_t n = 0;
        if (dwarf_getsrcfiles(cu, &files, &n) != 0) return false;
        for (size_t i = 0; i < n; ++i) {
            const char *name = dwarf_filesrc(files, i, nullptr, nullptr);
            if (name && source_matches(name, file)) return true;
        }
        return false;
    });
}

bool DwarfReader::for_each_unit(const std::function<bool(Dwarf_Die *)> &fn)
{
    Dwarf_Off off = 0, next = 0;
    size_t header = 0;
    while (dwarf_nextcu(dw_, off, &next, &header, nullptr, nullptr, nullptr) == 0) {
        Dwarf_Die cu;
        if (dwarf_offdie(dw_, off + header, &cu) && fn(&cu)) return true;
        off = next;
    }
    return false;
}

std::vector<SourceVariable> DwarfReader::variables_at(uint64_t pc)
{
    std::vector<SourceVariable> out;
    Dwarf_Die cu, fn;
    if (!dwarf_addrdie(dw_, pc, &cu) || !subprogram_in(&cu, pc, &fn)) return out;
    Dwarf_Die *scopes = nullptr;
    const int n = dwarf_getscopes(&cu, pc, &scopes);
    for (int i = 0; i < n; ++i) {
        Dwarf_Die child;
        if (dwarf_child(&scopes[i], &child) == 0) {
            do {
                const int tag = dwarf_tag(&child);
                // An inlined copy's variables name themselves through their abstract origin.
                Dwarf_Attribute name_attr;
                const char *name = dwarf_formstring(dwarf_attr_integrate(&child, DW_AT_name, &name_attr));
                if ((tag != DW_TAG_variable && tag != DW_TAG_formal_parameter) || !name) continue;
                if (std::any_of(out.begin(), out.end(), [&](const SourceVariable &v) { return v.name == name; })) continue;
                SourceVariable v;
                v.name = name;
                Dwarf_Die type;
                type_of(&child, &type, &v.type);
                locate(&child, &fn, cfi_, pc, &v);
                out.push_back(std::move(v));
            } while (dwarf_siblingof(&child, &child) == 0);
        }
        if (dwarf_tag(&scopes[i]) == DW_TAG_subprogram) break;  // not the unit's globals
    }
    free(scopes);
    return out;
}

}  // namespace liveprobe::symbols
