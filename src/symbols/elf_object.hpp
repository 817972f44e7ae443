// One object file's symbol tables and call-frame information, as read from disk with elfutils.
// Addresses here are file addresses (st_value, FDE ranges); the caller adds the load bias.
//
// Not thread-safe: symbols.cpp owns every ElfObject and touches it only under its mutex.
#pragma once

#include <gelf.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

struct Dwarf_CFI_s;
struct Dwarf_Frame_s;

namespace liveprobe::symbols {

// The ELF file at path, read through a private mapping (or into memory when it cannot be
// mapped), its descriptor closed before the return: liveprobe keeps no descriptor of an object
// file (a kept number would mean another file in another thread's table, os/linux/fd_table.hpp).
// nullptr when it cannot be read as ELF; elf_end() it.
Elf *read_elf_file(const std::string &path);

struct Symbol {
    std::string name;     // as in the table: "memcpy@@GLIBC_2.14" in .symtab, "memcpy" in .dynsym
    std::string version;  // "GLIBC_2.14"; empty when unversioned
    uint64_t value = 0;   // st_value, a file address
    uint64_t size = 0;
    uint8_t type = 0;             // STT_FUNC, STT_GNU_IFUNC, STT_OBJECT or STT_NOTYPE
    bool hidden_version = false;  // a non-default version ("name@V", versym bit 0x8000)
    bool global = false;          // GLOBAL, WEAK or GNU_UNIQUE binding: not a static symbol
};

// The separate debug file of `elf` at `path`, as gdb looks for it: by build ID first, then by
// .gnu_debuglink next to the file, in its .debug/ and under /usr/lib/debug. Empty when none.
std::string find_debug_file(Elf *elf, const std::string &path);

class ElfObject {
  public:
    // Reads the symbols of the file at `path` (.symtab and .dynsym) and, when the file has no
    // .symtab and `use_debug_file`, those of its separate debug file (by build ID under
    // /usr/lib/debug/.build-id, else by .gnu_debuglink). Returns nullptr with *why when the
    // file cannot be read as ELF. Keeps the file open for .eh_frame lookups.
    static std::unique_ptr<ElfObject> load(const std::string &path, bool use_debug_file,
                                           std::string *why);
    ~ElfObject();
    ElfObject(const ElfObject &) = delete;
    ElfObject &operator=(const ElfObject &) = delete;

    const std::vector<Symbol> &symbols() const { return symbols_; }
    uint16_t elf_type() const { return elf_type_; }
    const std::string &debug_file() const { return debug_file_; }

    // Indices of the symbols whose name without "@VERSION" is `name`.
    const std::vector<uint32_t> *by_name(std::string_view name) const;

    // Indices of the C++ symbols whose demangled name matches `normalized` (names::normalize
    // form): the full name ("ns::W::f(int)const"), failing that the name without trailing
    // qualifiers ("ns::W::f(int)"), or, when `normalized` has no parameter list, the name
    // without parameters ("ns::W::f"). Demangles the whole table on first use.
    std::vector<uint32_t> by_demangled(std::string_view normalized);

    // The smallest sized FUNC/IFUNC symbol containing file address `addr`, else nullptr. Of
    // aliases, the best name to show (global, unversioned, fewest leading underscores).
    const Symbol *function_containing(uint64_t addr) const;
    // A FUNC/IFUNC symbol starting exactly at `addr` (sized or not, best alias), else nullptr.
    const Symbol *function_starting(uint64_t addr) const;
    // The first FUNC/IFUNC symbol start at or after `addr`, else UINT64_MAX.
    uint64_t next_function_start(uint64_t addr) const;

    // DT_SONAME: the name the loader knows a library by (libjq.so.1 for the file
    // libjq.so.1.0.4), "" when the file has none (a program).
    std::string soname() const;

    // The symbol a PLT jump slot (R_X86_64_JUMP_SLOT relocation at file address `got`) binds
    // to, or "" when there is none.
    std::string jump_slot_symbol(uint64_t got) const;

    // The [*start, *end) range of the .eh_frame FDE covering file address `addr`.
    bool fde_range(uint64_t addr, uint64_t *start, uint64_t *end);

    // Whether the return address is at the stack pointer at file address `addr`, as at a
    // function's first instruction, by the call frame information: 1 when the CFA there is
    // rsp + 8; 0 when it is anything else (*cfa: "rsp+48", "rbp+16", "an expression"); -1
    // when no FDE covers addr.
    int return_address_at_sp(uint64_t addr, std::string *cfa);

    // The register (DWARF number) that holds the frame's return address at file address
    // `addr` by the call frame information (a DW_CFA_register rule), else -1: it is saved in
    // memory, undefined, or no FDE covers addr.
    int return_address_register(uint64_t addr);

    // Whether the file's data stores an address in [from, to) (file addresses): 1 it does, 0 it
    // does not, -1 not known. What an indirect jump can load (code_pointers.cpp): in a
    // position-independent object the targets of its dynamic relocations (RELA and RELR);
    // in a fixed-address executable those, and every 4- or 8-byte value in an allocated
    // section that is not code. Read on first use.
    int stores_code_address(uint64_t from, uint64_t to);

  private:
    ElfObject() = default;
    bool read_code_pointers();
    bool read_tables(Elf *elf, bool from_debug_file);
    void read_table(Elf *elf, Elf_Scn *scn, const GElf_Shdr &shdr, Elf_Data *versym,
                    const std::unordered_map<uint16_t, std::string> &versions);
    void index();
    void index_demangled();
    // The call frame information's row at file address `addr` (free() it), else nullptr: no
    // .eh_frame, or no FDE covers addr.
    Dwarf_Frame_s *frame_at(uint64_t addr);

    Elf *elf_ = nullptr;
    Dwarf_CFI_s *cfi_ = nullptr;
    bool cfi_tried_ = false;
    uint16_t elf_type_ = 0;
    std::string debug_file_;
    bool has_symtab_ = false;

    std::vector<Symbol> symbols_;
    // Keys view into symbols_[i].name, which is never modified after index().
    std::unordered_map<std::string_view, std::vector<uint32_t>> by_name_;
    std::vector<uint32_t> functions_;  // sized FUNC/IFUNC, by value
    uint64_t max_function_size_ = 0;
    std::vector<uint32_t> function_starts_;  // every FUNC/IFUNC, by value

    int code_pointers_known_ = 0;         // 0 not read yet, 1 read, -1 unreadable
    std::vector<uint64_t> code_pointers_;  // sorted, unique

    bool demangled_ = false;
    std::unordered_map<std::string, std::vector<uint32_t>> demangled_full_;
    std::unordered_map<std::string, std::vector<uint32_t>> demangled_unqualified_;
    std::unordered_map<std::string, std::vector<uint32_t>> demangled_bare_;
};

}  // namespace liveprobe::symbols
