#include "symbols/elf_object.hpp"

#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>
#include <dwarf.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "symbols/names.hpp"

namespace liveprobe::symbols {
namespace {

struct OpenElf {
    Elf *elf = nullptr;
};

OpenElf open_elf(const std::string &path) { return {read_elf_file(path)}; }

void close_elf(OpenElf &e) {
    if (e.elf) elf_end(e.elf);
    e = OpenElf{};
}

// Version index -> version name, from .gnu.version_d. Index 1 (VER_NDX_GLOBAL) and the base
// definition (the file's own soname) mean "unversioned" and are left out.
std::unordered_map<uint16_t, std::string> read_verdef(Elf *elf) {
    std::unordered_map<uint16_t, std::string> out;
    Elf_Scn *scn = nullptr;
    while ((scn = elf_nextscn(elf, scn)) != nullptr) {
        GElf_Shdr shdr;
        if (gelf_getshdr(scn, &shdr) == nullptr || shdr.sh_type != SHT_GNU_verdef) continue;
        Elf_Data *data = elf_getdata(scn, nullptr);
        if (data == nullptr) continue;
        size_t offset = 0;
        for (size_t n = 0; n < shdr.sh_info; ++n) {
            GElf_Verdef def;
            if (gelf_getverdef(data, offset, &def) == nullptr) break;
            GElf_Verdaux aux;
            if (!(def.vd_flags & VER_FLG_BASE) &&
                gelf_getverdaux(data, offset + def.vd_aux, &aux) != nullptr) {
                const char *name = elf_strptr(elf, shdr.sh_link, aux.vda_name);
                if (name) out[def.vd_ndx] = name;
            }
            if (def.vd_next == 0) break;
            offset += def.vd_next;
        }
    }
    return out;
}

std::string hex(const unsigned char *p, size_t n) {
    static const char digits[] = "0123456789abcdef";
    std::string s;
    for (size_t i = 0; i < n; ++i) {
        s.push_back(digits[p[i] >> 4]);
        s.push_back(digits[p[i] & 15]);
    }
    return s;
}

bool readable(const std::string &path) {
    return ::access(path.c_str(), R_OK) == 0;
}


// Of two aliases of one function, the name to show: the one other code binds to (global),
// without a version suffix, with fewer leading underscores, shorter. "getpid" rather than
// "__GI___getpid", "memcpy" rather than "memcpy@@GLIBC_2.14".
bool better_alias(const Symbol &a, const Symbol &b) {
    if (a.global != b.global) return a.global;
    bool a_ver = a.name.find('@') != std::string::npos;
    bool b_ver = b.name.find('@') != std::string::npos;
    if (a_ver != b_ver) return !a_ver;
    size_t a_us = a.name.find_first_not_of('_'), b_us = b.name.find_first_not_of('_');
    if (a_us != b_us) return a_us < b_us;
    if (a.name.size() != b.name.size()) return a.name.size() < b.name.size();
    return a.name < b.name;
}

}  // namespace

// The separate debug file of `elf` at `path`, as gdb looks for it: by build ID first, then by
// .gnu_debuglink next to the file, in its .debug/ and under /usr/lib/debug. Empty when none.
std::string find_debug_file(Elf *elf, const std::string &path) {
    const void *id = nullptr;
    ssize_t len = dwelf_elf_gnu_build_id(elf, &id);
    if (len > 1) {
        auto *bytes = static_cast<const unsigned char *>(id);
        std::string file = "/usr/lib/debug/.build-id/" + hex(bytes, 1) + "/" +
                           hex(bytes + 1, static_cast<size_t>(len) - 1) + ".debug";
        if (readable(file)) return file;
    }
    GElf_Word crc = 0;
    const char *link = dwelf_elf_gnu_debuglink(elf, &crc);
    if (link == nullptr || path.starts_with("/proc/")) return {};
    std::string dir(path, 0, path.rfind('/') + 1);
    for (const std::string &file :
         {dir + link, dir + ".debug/" + link, "/usr/lib/debug" + dir + link}) {
        // The link may name the file itself when it was not stripped; never read it twice.
        if (file != path && readable(file)) return file;
    }
    return {};
}

Elf *read_elf_file(const std::string &path) {
    static const bool version_ok = elf_version(EV_CURRENT) != EV_NONE;
    if (!version_ok) return nullptr;
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return nullptr;
    Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, nullptr);
    // FDREAD: the file read all into memory unless it is mapped, and the descriptor forgotten
    // by libelf (as FDDONE does), closed here.
    if (elf && (elf_kind(elf) != ELF_K_ELF || elf_cntl(elf, ELF_C_FDREAD) != 0)) {
        elf_end(elf);
        elf = nullptr;
    }
    ::close(fd);
    return elf;
}

std::unique_ptr<ElfObject> ElfObject::load(const std::string &path, bool use_debug_file,
                                           std::string *why) {
    OpenElf file = open_elf(path);
    if (file.elf == nullptr) {
        if (why) *why = "cannot read '" + path + "' as ELF";
        return nullptr;
    }
    std::unique_ptr<ElfObject> obj(new ElfObject);
    obj->elf_ = file.elf;
    GElf_Ehdr ehdr;
    if (gelf_getehdr(file.elf, &ehdr) != nullptr) obj->elf_type_ = ehdr.e_type;
    obj->read_tables(file.elf, false);
    // A file that kept its .symtab has nothing more in its debug file's; reading both would
    // only double every symbol.
    if (use_debug_file && !obj->has_symtab_) {
        std::string debug = find_debug_file(file.elf, path);
        OpenElf dbg = debug.empty() ? OpenElf{} : open_elf(debug);
        if (dbg.elf != nullptr) {
            obj->debug_file_ = debug;
            obj->read_tables(dbg.elf, true);
            close_elf(dbg);  // every name was copied out
        }
    }
    obj->index();
    return obj;
}

std::string ElfObject::soname() const {
    Elf_Scn *scn = nullptr;
    while ((scn = elf_nextscn(elf_, scn)) != nullptr) {
        GElf_Shdr shdr;
        if (gelf_getshdr(scn, &shdr) == nullptr || shdr.sh_type != SHT_DYNAMIC) continue;
        Elf_Data *data = elf_getdata(scn, nullptr);
        const size_t n = shdr.sh_entsize ? shdr.sh_size / shdr.sh_entsize : 0;
        for (size_t i = 0; data && i < n; ++i) {
            GElf_Dyn dyn;
            if (gelf_getdyn(data, static_cast<int>(i), &dyn) == nullptr) break;
            if (dyn.d_tag != DT_SONAME) continue;
            const char *name = elf_strptr(elf_, shdr.sh_link, dyn.d_un.d_val);
            return name ? name : "";
        }
    }
    return {};
}

std::string ElfObject::jump_slot_symbol(uint64_t got) const {
    Elf_Scn *scn = nullptr;
    while ((scn = elf_nextscn(elf_, scn)) != nullptr) {
        GElf_Shdr shdr;
        if (gelf_getshdr(scn, &shdr) == nullptr || shdr.sh_type != SHT_RELA) continue;
        Elf_Data *data = elf_getdata(scn, nullptr);
        Elf_Scn *symscn = elf_getscn(elf_, shdr.sh_link);
        GElf_Shdr symshdr;
        if (!data || !symscn || gelf_getshdr(symscn, &symshdr) == nullptr) continue;
        Elf_Data *syms = elf_getdata(symscn, nullptr);
        size_t n = shdr.sh_entsize ? shdr.sh_size / shdr.sh_entsize : 0;
        for (size_t i = 0; i < n; ++i) {
            GElf_Rela rela;
            if (gelf_getrela(data, static_cast<int>(i), &rela) == nullptr) continue;
            if (rela.r_offset != got || GELF_R_TYPE(rela.r_info) != R_X86_64_JUMP_SLOT) continue;
            GElf_Sym sym;
            if (!syms || gelf_getsym(syms, static_cast<int>(GELF_R_SYM(rela.r_info)), &sym) == nullptr) return {};
            const char *name = elf_strptr(elf_, symshdr.sh_link, sym.st_name);
            return name ? name : "";
        }
    }
    return {};
}

ElfObject::~ElfObject() {
    if (cfi_) dwarf_cfi_end(cfi_);
    if (elf_) elf_end(elf_);
}

bool ElfObject::read_tables(Elf *elf, bool from_debug_file) {
    Elf_Data *versym = nullptr;
    Elf_Scn *scn = nullptr;
    while ((scn = elf_nextscn(elf, scn)) != nullptr) {
        GElf_Shdr shdr;
        if (gelf_getshdr(scn, &shdr) != nullptr && shdr.sh_type == SHT_GNU_versym)
            versym = elf_getdata(scn, nullptr);
    }
    std::unordered_map<uint16_t, std::string> versions;
    if (versym) versions = read_verdef(elf);
    scn = nullptr;
    while ((scn = elf_nextscn(elf, scn)) != nullptr) {
        GElf_Shdr shdr;
        if (gelf_getshdr(scn, &shdr) == nullptr) continue;
        if (shdr.sh_type == SHT_SYMTAB) {
            if (!from_debug_file) has_symtab_ = true;
            read_table(elf, scn, shdr, nullptr, versions);
        } else if (shdr.sh_type == SHT_DYNSYM && !from_debug_file) {
            // A debug file's .dynsym (if any) repeats the stripped file's.
            read_table(elf, scn, shdr, versym, versions);
        }
    }
    return true;
}

void ElfObject::read_table(Elf *elf, Elf_Scn *scn, const GElf_Shdr &shdr, Elf_Data *versym,
                           const std::unordered_map<uint16_t, std::string> &versions) {
    Elf_Data *data = elf_getdata(scn, nullptr);
    if (data == nullptr || shdr.sh_entsize == 0) return;
    size_t count = shdr.sh_size / shdr.sh_entsize;
    for (size_t i = 1; i < count; ++i) {
        GElf_Sym sym;
        if (gelf_getsym(data, static_cast<int>(i), &sym) == nullptr) continue;
        uint8_t type = GELF_ST_TYPE(sym.st_info);
        if (type != STT_FUNC && type != STT_GNU_IFUNC && type != STT_OBJECT && type != STT_NOTYPE)
            continue;  // sections, files and TLS offsets are not addresses
        // Undefined symbols are references to other objects. SHN_ABS values are not relative
        // to the load base (version markers such as GLIBC_2.2.5 in .dynsym, linker constants),
        // so adding the bias would invent an address; common symbols exist only in .o files.
        if (sym.st_shndx == SHN_UNDEF || sym.st_shndx == SHN_ABS || sym.st_shndx == SHN_COMMON)
            continue;
        const char *name = elf_strptr(elf, shdr.sh_link, sym.st_name);
        if (name == nullptr || name[0] == '\0') continue;
        Symbol s;
        s.name = name;
        s.value = sym.st_value;
        s.size = sym.st_size;
        s.type = type;
        // Hidden symbols were made LOCAL by the static linker, so binding alone tells what
        // the rest of the program can bind to.
        s.global = GELF_ST_BIND(sym.st_info) != STB_LOCAL;
        if (versym != nullptr) {
            GElf_Versym ver = 0;
            if (gelf_getversym(versym, static_cast<int>(i), &ver) != nullptr) {
                s.hidden_version = (ver & 0x8000) != 0;
                auto it = versions.find(static_cast<uint16_t>(ver & 0x7fff));
                if (it != versions.end()) s.version = it->second;
            }
        } else {
            std::string_view version;
            bool hidden = false;
            names::split_version(s.name, &version, &hidden);
            if (!version.empty()) {
                s.version = std::string(version);
                s.hidden_version = hidden;
            }
        }
        symbols_.push_back(std::move(s));
    }
}

void ElfObject::index() {
    by_name_.reserve(symbols_.size());
    for (uint32_t i = 0; i < symbols_.size(); ++i) {
        const Symbol &s = symbols_[i];
        std::string_view version;
        bool hidden = false;
        by_name_[names::split_version(s.name, &version, &hidden)].push_back(i);
        if (s.type == STT_FUNC || s.type == STT_GNU_IFUNC) {
            function_starts_.push_back(i);
            if (s.size > 0) {
                functions_.push_back(i);
                max_function_size_ = std::max(max_function_size_, s.size);
            }
        }
    }
    auto by_value = [this](uint32_t a, uint32_t b) {
        return symbols_[a].value < symbols_[b].value;
    };
    std::sort(functions_.begin(), functions_.end(), by_value);
    std::sort(function_starts_.begin(), function_starts_.end(), by_value);
}

const std::vector<uint32_t> *ElfObject::by_name(std::string_view name) const {
    auto it = by_name_.find(name);
    return it == by_name_.end() ? nullptr : &it->second;
}

void ElfObject::index_demangled() {
    demangled_ = true;
    for (uint32_t i = 0; i < symbols_.size(); ++i) {
        std::string_view version;
        bool hidden = false;
        std::string base(names::split_version(symbols_[i].name, &version, &hidden));
        std::string demangled = names::demangle(base.c_str());
        if (demangled.empty()) continue;
        std::string full = names::normalize(demangled);
        std::string_view unqualified = names::strip_qualifiers(full);
        std::string_view bare = names::strip_parameters(full);
        if (unqualified.size() != full.size())
            demangled_unqualified_[std::string(unqualified)].push_back(i);
        if (bare.size() != full.size()) demangled_bare_[std::string(bare)].push_back(i);
        demangled_full_[std::move(full)].push_back(i);
    }
}

std::vector<uint32_t> ElfObject::by_demangled(std::string_view normalized) {
    if (!demangled_) index_demangled();
    auto find = [&](const std::unordered_map<std::string, std::vector<uint32_t>> &map) {
        auto it = map.find(std::string(normalized));
        return it == map.end() ? std::vector<uint32_t>{} : it->second;
    };
    std::vector<uint32_t> out = find(demangled_full_);
    if (!out.empty()) return out;
    if (names::strip_parameters(normalized).size() != normalized.size())
        return find(demangled_unqualified_);
    return find(demangled_bare_);
}

const Symbol *ElfObject::function_containing(uint64_t addr) const {
    // Symbols may nest or overlap (aliases, a function inside another's range); every
    // candidate starts within max_function_size_ below addr, which bounds the scan.
    auto it = std::upper_bound(functions_.begin(), functions_.end(), addr,
                               [this](uint64_t a, uint32_t i) { return a < symbols_[i].value; });
    const Symbol *best = nullptr;
    while (it != functions_.begin()) {
        const Symbol &s = symbols_[*--it];
        if (addr - s.value >= max_function_size_) break;
        if (addr - s.value >= s.size) continue;
        if (best == nullptr || s.size < best->size ||
            (s.size == best->size && s.value == best->value && better_alias(s, *best)))
            best = &s;
    }
    return best;
}

uint64_t ElfObject::next_function_start(uint64_t addr) const {
    auto it = std::lower_bound(function_starts_.begin(), function_starts_.end(), addr,
                               [this](uint32_t i, uint64_t a) { return symbols_[i].value < a; });
    return it == function_starts_.end() ? UINT64_MAX : symbols_[*it].value;
}

const Symbol *ElfObject::function_starting(uint64_t addr) const {
    auto it = std::lower_bound(function_starts_.begin(), function_starts_.end(), addr,
                               [this](uint32_t i, uint64_t a) { return symbols_[i].value < a; });
    const Symbol *best = nullptr;
    for (; it != function_starts_.end() && symbols_[*it].value == addr; ++it)
        if (best == nullptr || better_alias(symbols_[*it], *best)) best = &symbols_[*it];
    return best;
}

Dwarf_Frame *ElfObject::frame_at(uint64_t addr) {
    if (!cfi_tried_) {
        cfi_tried_ = true;
        cfi_ = dwarf_getcfi_elf(elf_);
    }
    Dwarf_Frame *frame = nullptr;
    if (cfi_ == nullptr || dwarf_cfi_addrframe(cfi_, addr, &frame) != 0) return nullptr;
    return frame;
}

bool ElfObject::fde_range(uint64_t addr, uint64_t *start, uint64_t *end) {
    Dwarf_Frame *frame = frame_at(addr);
    if (frame == nullptr) return false;
    Dwarf_Addr s = 0, e = 0;
    bool signal = false;
    int ok = dwarf_frame_info(frame, &s, &e, &signal);
    std::free(frame);
    if (ok < 0 || e <= s) return false;
    *start = s;
    *end = e;
    return true;
}

int ElfObject::return_address_at_sp(uint64_t addr, std::string *cfa) {
    Dwarf_Frame *frame = frame_at(addr);
    if (frame == nullptr) return -1;
    // A register-plus-offset rule comes back as one DW_OP_bregx (libdw's form of it).
    Dwarf_Op *ops = nullptr;
    size_t nops = 0;
    int r = -1;
    if (dwarf_frame_cfa(frame, &ops, &nops) == 0) {
        constexpr Dwarf_Word kRsp = 7;  // the x86-64 psABI's DWARF number of rsp
        const char *regs[] = {"rax", "rdx", "rcx", "rbx", "rsi", "rdi", "rbp", "rsp"};
        if (nops == 1 && ops[0].atom == DW_OP_bregx && ops[0].number == kRsp && ops[0].number2 == 8) {
            r = 1;
        } else {
            r = 0;
            if (nops == 1 && ops[0].atom == DW_OP_bregx && ops[0].number <= kRsp)
                *cfa = std::string(regs[ops[0].number]) + (static_cast<int64_t>(ops[0].number2) < 0 ? "" : "+") +
                       std::to_string(static_cast<int64_t>(ops[0].number2));
            else
                *cfa = "an expression";
        }
    }
    std::free(frame);
    return r;
}

int ElfObject::return_address_register(uint64_t addr) {
    Dwarf_Frame *frame = frame_at(addr);
    if (frame == nullptr) return -1;
    constexpr int kReturnAddress = 16;  // the x86-64 psABI's return address column
    Dwarf_Op mem[3];
    Dwarf_Op *ops = nullptr;
    size_t nops = 0;
    int reg = -1;
    // libdw gives a register rule as one DW_OP_regx.
    if (dwarf_frame_register(frame, kReturnAddress, mem, &ops, &nops) == 0 && ops && nops == 1 &&
        ops[0].atom == DW_OP_regx && ops[0].number < 16)
        reg = static_cast<int>(ops[0].number);
    std::free(frame);
    return reg;
}

}  // namespace liveprobe::symbols
