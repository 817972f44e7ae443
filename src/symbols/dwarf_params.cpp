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

#include "core/immortal.hpp"
#include "symbols/elf_object.hpp"
#include "symbols/symbols.hpp"

namespace liveprobe::symbols {
namespace {

// The type a DIE's DW_AT_type names, through typedefs and qualifiers; `text` gets the C spelling.
bool type_of(Dwarf_Die *die, Dwarf_Die *out, std::string *text)
{
    Dwarf_Attribute attr;
    if (!dwarf_attr_integrate(die, DW_AT_type, &attr) || !dwarf_formref_die(&attr, out)) {
        *text = "void";
        return false;
    }
    std::string quals;
    for (int depth = 0; depth < 16; ++depth) {
        int tag = dwarf_tag(out);
        if (tag != DW_TAG_typedef && tag != DW_TAG_const_type && tag != DW_TAG_volatile_type &&
            tag != DW_TAG_restrict_type && tag != DW_TAG_atomic_type)
            break;
        if (tag == DW_TAG_typedef && text->empty() && dwarf_diename(out)) *text = dwarf_diename(out);
        if (tag == DW_TAG_const_type) quals = "const ";
        Dwarf_Die next;
        if (!dwarf_attr_integrate(out, DW_AT_type, &attr) || !dwarf_formref_die(&attr, &next)) {
            *text = quals + "void";
            return false;
        }
        *out = next;
    }
    if (text->empty()) {
        const char *name = dwarf_diename(out);
        switch (dwarf_tag(out)) {
        case DW_TAG_structure_type: *text = quals + "struct " + (name ? name : "?"); break;
        case DW_TAG_union_type: *text = quals + "union " + (name ? name : "?"); break;
        case DW_TAG_enumeration_type: *text = quals + "enum " + (name ? name : "?"); break;
        case DW_TAG_pointer_type: {
            Dwarf_Die to;
            std::string inner;
            type_of(out, &to, &inner);
            *text = inner + " *";
            break;
        }
        case DW_TAG_reference_type:
        case DW_TAG_rvalue_reference_type: {
            Dwarf_Die to;
            std::string inner;
            type_of(out, &to, &inner);
            *text = inner + " &";
            break;
        }
        default: *text = quals + (name ? name : "?");
        }
    }
    return true;
}

Dwarf_Word size_of(Dwarf_Die *type)
{
    Dwarf_Word size = 0;
    Dwarf_Attribute attr;
    if (dwarf_attr_integrate(type, DW_AT_byte_size, &attr) && dwarf_formudata(&attr, &size) == 0) return size;
    return 0;
}

// Fills p's class from its type: an integer, a pointer or an enum take an integer register.
void classify(Dwarf_Die *param, Param *p)
{
    Dwarf_Die type;
    if (!type_of(param, &type, &p->type)) return;
    int tag = dwarf_tag(&type);
    Dwarf_Attribute attr;
    Dwarf_Word enc = 0;
    if (tag == DW_TAG_pointer_type || tag == DW_TAG_reference_type || tag == DW_TAG_rvalue_reference_type) {
        p->is_pointer = true;
        p->size = 8;
        Dwarf_Die to;
        std::string ignored;
        if (type_of(&type, &to, &ignored) && dwarf_tag(&to) == DW_TAG_base_type &&
            dwarf_attr_integrate(&to, DW_AT_encoding, &attr) && dwarf_formudata(&attr, &enc) == 0)
            p->is_char_pointer = (enc == DW_ATE_signed_char || enc == DW_ATE_unsigned_char) && size_of(&to) == 1;
        return;
    }
    p->size = static_cast<uint32_t>(size_of(&type));
    if (tag == DW_TAG_enumeration_type) {
        p->is_signed = true;
        return;
    }
    if (tag == DW_TAG_base_type && dwarf_attr_integrate(&type, DW_AT_encoding, &attr) && dwarf_formudata(&attr, &enc) == 0) {
        if (enc == DW_ATE_float || enc == DW_ATE_complex_float) p->why_no_slot = "a floating-point value (in a vector register)";
        p->is_signed = enc == DW_ATE_signed || enc == DW_ATE_signed_char;
        if (p->size > 8) p->why_no_slot = fmt::format("{} bytes", p->size);
        return;
    }
    p->why_no_slot = "passed by value (" + p->type + ")";
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

int function_params(uint64_t entry, std::vector<Param> *out, std::string *why)
{
    std::string open_path, path;
    uint64_t bias = 0;
    if (!object_at(entry, &open_path, &path, &bias)) {
        *why = fmt::format("no object at {:#x}", entry);
        return -ENOENT;
    }
    std::lock_guard lock(g_dwarf_mu);
    if (!open_dwarf(open_path, path)) {
        *why = fmt::format("{}: cannot be read", path);
        return -ENOENT;
    }
    Dwarf *dw = g_dwarf.value.dw;
    int r = -ENOENT;
    uint64_t pc = entry - bias;
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
            uint32_t slot = 0;
            bool lost = false;  // after a struct passed by value, the integer registers are unknown
            Dwarf_Die child;
            // A function returning a struct in memory takes its address in rdi first.
            Dwarf_Die ret;
            std::string ret_text;
            if (type_of(fn, &ret, &ret_text)) {
                int tag = dwarf_tag(&ret);
                if ((tag == DW_TAG_structure_type || tag == DW_TAG_union_type) && size_of(&ret) > 16) ++slot;
            }
            if (dwarf_child(fn, &child) == 0) {
                do {
                    if (dwarf_tag(&child) != DW_TAG_formal_parameter) continue;
                    Param p;
                    const char *name = dwarf_diename(&child);
                    p.name = name ? name : "";
                    classify(&child, &p);
                    if (p.why_no_slot.empty() && lost) p.why_no_slot = "it follows a struct passed by value";
                    if (p.why_no_slot.empty()) p.slot = ++slot;  // $arg7 on are on the stack
                    else if (p.why_no_slot.rfind("passed by value", 0) == 0) lost = true;
                    out->push_back(std::move(p));
                } while (dwarf_siblingof(&child, &child) == 0);
            }
            r = 0;
        }
    }
    return r;
}

}  // namespace liveprobe::symbols
