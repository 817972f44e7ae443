#include "symbols/dwarf_params.hpp"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <mutex>
#include <set>
#include <unordered_map>

#include <fmt/format.h>

#include "arch/x86_64/value_home.hpp"
#include "core/immortal.hpp"
#include "symbols/dwarf_types.hpp"
#include "symbols/elf_object.hpp"
#include "symbols/symbols.hpp"
#include "trace/value_type.hpp"

namespace liveprobe::symbols {
namespace {

// Fills p's type, descriptor and place from the SysV classification of its type (psABI
// 3.2.3): integer registers di si dx cx r8 r9 then the stack, xmm0-7 then the stack. *ints and
// *sses count the registers taken so far; *lost is set when a value went on the stack before
// an integer there (whose stack word is then not known here).
void place_param(Dwarf_Die *param, Param *p, uint32_t *ints, uint32_t *sses, bool *lost)
{
    using arch::ValueClass;
    Dwarf_Die type;
    type_of(param, &type, &p->type);
    p->desc = describe_type(param);
    // A class passed by invisible reference: its address in an integer register, the class
    // read through it, as a C++ reference is.
    if (!p->desc.empty() && p->desc[0] == 'T') p->desc = "r" + p->desc;
    const auto vt = trace::parse_vtype(p->desc);
    // A type nothing is known of (not even its size) is taken for a word in a register, as a
    // parameter of assembly is: fetched raw.
    const ValueClass c = vt ? arch::classify(*vt) : p->desc.empty() ? ValueClass::integer : ValueClass::memory;
    p->size = vt ? vt->size : 0;
    p->is_pointer = vt && (vt->kind == trace::VKind::pointer || vt->kind == trace::VKind::string || vt->kind == trace::VKind::reference);
    p->is_char_pointer = vt && vt->kind == trace::VKind::string;
    p->is_signed = vt && (vt->kind == trace::VKind::sint || (vt->kind == trace::VKind::enumeration && vt->is_signed));
    const uint32_t need_int = static_cast<uint32_t>(arch::integer_registers(c));
    const uint32_t need_sse = static_cast<uint32_t>(arch::sse_registers(c));
    if (c == ValueClass::memory || c == ValueClass::x87 || (need_int && *ints + need_int > 6) || (need_sse && *sses + need_sse > 8)) {
        if (c == ValueClass::integer && !*lost) {
            p->slot = ++*ints;  // $arg7 on: the stack's words, in order
            return;
        }
        p->why_no_slot = c == ValueClass::integer ? "it follows a value passed on the stack"
                                                  : fmt::format("passed on the stack ({})", p->type);
        *lost = true;
        return;
    }
    if (c == ValueClass::int_sse || c == ValueClass::sse_int) {
        p->why_no_slot = fmt::format("split between an integer and a vector register ({})", p->type);
    } else if (need_int) {
        p->slot = *ints + 1;
    } else if (need_sse) {
        p->xmm = *sses + 1;
    }
    *ints += need_int;
    *sses += need_sse;
}

// The DWARF of the last object asked for stays open: a glob's functions are mostly in one
// object, and reading its .debug_info again for each of them is what costs. Never destroyed
// (core/immortal.hpp: a thread may use it while the process exits).
struct DwarfFile {
    std::string key;  // the file's path, device, inode and change time
    Elf *elf = nullptr;   // the file whose DWARF dw reads (elf_object.hpp: no descriptor kept)
    Dwarf *dw = nullptr;  // none when the file has no DWARF
    // The subprograms of the compilation units looked at so far, by entry address: one walk a
    // unit (dwarf_getscopes walks it for each function: a glob over a unit of 10,000
    // functions took 12 s).
    std::set<Dwarf_Off> indexed;
    std::unordered_map<uint64_t, Dwarf_Off> entries;
};
std::mutex g_dwarf_mu;
core::Immortal<DwarfFile> g_dwarf;

// Each function's answer, by its object (path, device, inode, change time) and address, for
// the agent's life (g_dwarf_mu held): a session reads an object's DWARF once, and the next
// sessions (an attach, a trace and a detach in a loop) find their answers here. Reading a
// separate debug file's DWARF takes megabytes (libc's compressed sections, decompressed) which
// glibc keeps in the reading thread's arena once freed; each new agent thread's arena held
// another copy (the chaos test's memory part: +8 MiB at one events session in three). An answer
// is a few hundred bytes; at most kMaxAnswers are kept.
struct Answer {
    std::vector<Param> params;
    std::string ret;
    std::string why;
    int r = 0;
};
constexpr size_t kMaxAnswers = 65536;
core::Immortal<std::unordered_map<std::string, Answer>> g_answers;

int read_function(const std::string &open_path, const std::string &path, uint64_t pc, std::vector<Param> *out,
                  std::string *why, std::string *ret);

// Adds the subprograms under `die` with an entry address (through namespaces and classes).
void index_subprograms(Dwarf_Die *die, DwarfFile &d, int depth)
{
    Dwarf_Die child;
    if (depth > 8 || dwarf_child(die, &child) != 0) return;
    do {
        int tag = dwarf_tag(&child);
        Dwarf_Addr low = 0;
        if (tag == DW_TAG_subprogram && dwarf_lowpc(&child, &low) == 0) d.entries.emplace(low, dwarf_dieoffset(&child));
        else if (tag == DW_TAG_namespace || tag == DW_TAG_structure_type || tag == DW_TAG_class_type)
            index_subprograms(&child, d, depth + 1);
    } while (dwarf_siblingof(&child, &child) == 0);
}

// The subprogram whose entry is pc, in the unit `cu` (g_dwarf_mu held); else the innermost
// subprogram whose scope holds pc; nullptr when none.
Dwarf_Die *subprogram_at(Dwarf_Die &cu, uint64_t pc, Dwarf_Die *out)
{
    DwarfFile &d = g_dwarf.value;
    if (d.indexed.insert(dwarf_dieoffset(&cu)).second) index_subprograms(&cu, d, 0);
    if (auto it = d.entries.find(pc); it != d.entries.end() && dwarf_offdie(d.dw, it->second, out)) return out;
    Dwarf_Die *scopes = nullptr;
    int n = dwarf_getscopes(&cu, pc, &scopes);
    Dwarf_Die *found = nullptr;
    for (int i = 0; i < n && !found; ++i)
        if (dwarf_tag(&scopes[i]) == DW_TAG_subprogram) {
            *out = scopes[i];
            found = out;
        }
    free(scopes);
    return found;
}

// Closes d's DWARF and ELF (g_dwarf_mu held); d emptied.
void end_dwarf(DwarfFile &d)
{
    if (d.dw) dwarf_end(d.dw);
    if (d.elf) elf_end(d.elf);
    d = DwarfFile{};
}

// Makes g_dwarf the file at open_path's (g_dwarf_mu held): false when it cannot be read.
bool open_dwarf(const std::string &open_path, const std::string &path)
{
    struct stat st {};
    if (stat(open_path.c_str(), &st) != 0) return false;
    std::string key = fmt::format("{} {} {} {}.{}", open_path, st.st_dev, st.st_ino, st.st_ctim.tv_sec, st.st_ctim.tv_nsec);
    DwarfFile &d = g_dwarf.value;
    if (key == d.key) return true;
    end_dwarf(d);
    d.elf = read_elf_file(open_path);
    if (d.elf == nullptr) return false;
    d.key = key;
    d.dw = dwarf_begin_elf(d.elf, DWARF_C_READ, nullptr);
    if (d.dw == nullptr) {  // no DWARF in the object itself: its separate debug file
        const std::string debug = find_debug_file(d.elf, path);
        elf_end(d.elf);
        d.elf = debug.empty() ? nullptr : read_elf_file(debug);
        if (d.elf) d.dw = dwarf_begin_elf(d.elf, DWARF_C_READ, nullptr);
    }
    return true;
}

}  // namespace

void close_dwarf()
{
    std::lock_guard lock(g_dwarf_mu);
    end_dwarf(g_dwarf.value);
}

void params_of_die(Dwarf_Die *fn, std::vector<Param> *out, std::string *ret)
{
    uint32_t ints = 0, sses = 0;
    bool lost = false;
    Dwarf_Die child;
    // A function returning a value in memory takes its address in rdi first.
    const std::string ret_desc = describe_type(fn);
    if (ret) *ret = ret_desc;
    if (const auto rt = trace::parse_vtype(ret_desc); rt && arch::classify(*rt) == arch::ValueClass::memory) ++ints;
    if (dwarf_child(fn, &child) == 0) {
        do {
            if (dwarf_tag(&child) != DW_TAG_formal_parameter) continue;
            Param p;
            const char *name = dwarf_diename(&child);
            p.name = name ? name : "";
            place_param(&child, &p, &ints, &sses, &lost);
            out->push_back(std::move(p));
        } while (dwarf_siblingof(&child, &child) == 0);
    }
}

int function_params(uint64_t entry, std::vector<Param> *out, std::string *why, std::string *ret)
{
    std::string open_path, path;
    uint64_t bias = 0;
    if (!object_at(entry, &open_path, &path, &bias)) {
        *why = fmt::format("no object at {:#x}", entry);
        return -ENOENT;
    }
    std::lock_guard lock(g_dwarf_mu);
    uint64_t pc = entry - bias;
    // What an object's DWARF said of a function, kept for the agent's life (see g_answers).
    struct stat st {};
    const std::string key = stat(open_path.c_str(), &st) == 0
                                ? fmt::format("{} {} {} {}.{} {:#x}", open_path, st.st_dev, st.st_ino, st.st_ctim.tv_sec,
                                              st.st_ctim.tv_nsec, pc)
                                : std::string();
    auto &answers = g_answers.value;
    if (auto it = answers.find(key); !key.empty() && it != answers.end()) {
        *out = it->second.params;
        if (ret) *ret = it->second.ret;
        *why = it->second.why;
        return it->second.r;
    }
    std::string ret_desc;
    const int r = read_function(open_path, path, pc, out, why, &ret_desc);
    if (ret) *ret = ret_desc;
    if (!key.empty() && answers.size() < kMaxAnswers) answers.emplace(key, Answer{*out, ret_desc, *why, r});
    return r;
}

namespace {

int read_function(const std::string &open_path, const std::string &path, uint64_t pc, std::vector<Param> *out,
                  std::string *why, std::string *ret)
{
    if (!open_dwarf(open_path, path)) {
        *why = fmt::format("{}: cannot be read", path);
        return -ENOENT;
    }
    Dwarf *dw = g_dwarf.value.dw;
    int r = -ENOENT;
    Dwarf_Die cu;
    if (dw == nullptr) {
        *why = fmt::format("{} has no DWARF (build it with -g, or install its debug symbols)", path);
    } else if (dwarf_addrdie(dw, pc, &cu) == nullptr) {
        *why = fmt::format("{} has no DWARF for {:#x} (build it with -g, or install its debug symbols)", path, pc);
    } else {
        Dwarf_Die fn_die;
        Dwarf_Die *fn = subprogram_at(cu, pc, &fn_die);
        if (!fn) {
            *why = fmt::format("no function in the DWARF of {} at {:#x}", path, pc);
        } else {
            params_of_die(fn, out, ret);
            r = 0;
        }
    }
    return r;
}

}  // namespace

}  // namespace liveprobe::symbols
