// The code addresses an object's data stores (elf_object.hpp, stores_code_address): what a jump
// through a pointer can load, so that the optimizer can prove that such a jump never lands
// inside the bytes a probe's jmp replaces (arch/x86_64/region.hpp).
//
// In a position-independent object (ET_DYN) no address is written in the file: each one in its
// data is a dynamic relocation the loader applies, RELA (R_X86_64_RELATIVE and IRELATIVE: the
// addend; R_X86_64_64, GLOB_DAT and JUMP_SLOT against a symbol the object defines: its value
// plus the addend) or RELR (a packed list of places holding RELATIVE addends, which are read
// from the file). A fixed-address executable (ET_EXEC) also holds addresses as plain values:
// every aligned 4- and 8-byte value of its allocated sections that are not code is taken
// (integers that happen to look like a code address only make the answer "stores").
// Addresses stored only by another object (a relocation there, against a symbol here plus an
// offset) are not seen: no compiler makes one into the middle of a function.
#include <elf.h>
#include <gelf.h>

#include <algorithm>
#include <cstring>

#include "symbols/elf_object.hpp"

#ifndef SHT_RELR
#define SHT_RELR 19
#endif

namespace liveprobe::symbols {
namespace {

// The file's bytes at file address [vaddr, vaddr + n), by its loadable segments.
bool read_vaddr(Elf *elf, uint64_t vaddr, void *out, size_t n) {
    size_t file_size = 0;
    const char *raw = elf_rawfile(elf, &file_size);
    size_t phnum = 0;
    if (raw == nullptr || elf_getphdrnum(elf, &phnum) != 0) return false;
    for (size_t i = 0; i < phnum; ++i) {
        GElf_Phdr ph;
        if (gelf_getphdr(elf, static_cast<int>(i), &ph) == nullptr || ph.p_type != PT_LOAD) continue;
        if (vaddr < ph.p_vaddr || vaddr + n > ph.p_vaddr + ph.p_filesz) continue;
        const uint64_t off = ph.p_offset + (vaddr - ph.p_vaddr);
        if (off + n > file_size) return false;
        std::memcpy(out, raw + off, n);
        return true;
    }
    return false;
}

void read_rela(Elf *elf, const GElf_Shdr &shdr, Elf_Data *data, std::vector<uint64_t> *out) {
    Elf_Scn *symscn = elf_getscn(elf, shdr.sh_link);
    Elf_Data *syms = symscn ? elf_getdata(symscn, nullptr) : nullptr;
    const size_t n = shdr.sh_entsize ? shdr.sh_size / shdr.sh_entsize : 0;
    for (size_t i = 0; i < n; ++i) {
        GElf_Rela rela;
        if (gelf_getrela(data, static_cast<int>(i), &rela) == nullptr) continue;
        const uint64_t addend = static_cast<uint64_t>(rela.r_addend);
        switch (GELF_R_TYPE(rela.r_info)) {
            case R_X86_64_RELATIVE:
            case R_X86_64_IRELATIVE:
                out->push_back(addend);
                break;
            case R_X86_64_64:
            case R_X86_64_GLOB_DAT:
            case R_X86_64_JUMP_SLOT: {
                GElf_Sym sym;
                if (syms && gelf_getsym(syms, static_cast<int>(GELF_R_SYM(rela.r_info)), &sym) &&
                    sym.st_shndx != SHN_UNDEF)
                    out->push_back(sym.st_value + addend);
                break;
            }
            default:
                break;
        }
    }
}

// RELR: an even word is a place (and the next word's place follows it); an odd one a bitmap of
// the 63 words after the last place, bit i for word i - 1.
bool read_relr(Elf *elf, Elf_Data *data, std::vector<uint64_t> *out) {
    const size_t n = data->d_size / 8;
    uint64_t where = 0;
    auto take = [&](uint64_t at) {
        uint64_t v = 0;
        if (!read_vaddr(elf, at, &v, 8)) return false;
        out->push_back(v);
        return true;
    };
    for (size_t i = 0; i < n; ++i) {
        uint64_t e;
        std::memcpy(&e, static_cast<const char *>(data->d_buf) + i * 8, 8);
        if ((e & 1) == 0) {
            if (!take(e)) return false;
            where = e + 8;
            continue;
        }
        for (unsigned bit = 1; bit < 64; ++bit)
            if (((e >> bit) & 1) && !take(where + (bit - 1) * 8)) return false;
        where += 63 * 8;
    }
    return true;
}

// Every aligned 4- and 8-byte value of the section's bytes that lies in a code range.
void scan_values(const Elf_Data *data, uint64_t vaddr, const std::vector<std::pair<uint64_t, uint64_t>> &code,
                 std::vector<uint64_t> *out) {
    const auto *p = static_cast<const unsigned char *>(data->d_buf);
    const size_t n = data->d_size;
    auto in_code = [&](uint64_t v) {
        for (auto [lo, hi] : code)
            if (v >= lo && v < hi) return true;
        return false;
    };
    for (size_t off = (4 - vaddr % 4) % 4; off + 4 <= n; off += 4) {
        uint32_t v32;
        std::memcpy(&v32, p + off, 4);
        if (in_code(v32)) out->push_back(v32);
        if (off + 8 <= n) {
            uint64_t v64;
            std::memcpy(&v64, p + off, 8);
            if (v64 > UINT32_MAX && in_code(v64)) out->push_back(v64);
        }
    }
}

}  // namespace

bool ElfObject::read_code_pointers() {
    if (elf_ == nullptr) return false;
    const bool fixed = elf_type_ == ET_EXEC;
    std::vector<std::pair<uint64_t, uint64_t>> code;  // the executable sections, [lo, hi)
    Elf_Scn *scn = nullptr;
    while ((scn = elf_nextscn(elf_, scn)) != nullptr) {
        GElf_Shdr shdr;
        if (gelf_getshdr(scn, &shdr) != nullptr && (shdr.sh_flags & SHF_EXECINSTR) && (shdr.sh_flags & SHF_ALLOC))
            code.emplace_back(shdr.sh_addr, shdr.sh_addr + shdr.sh_size);
    }
    if (code.empty()) return false;  // no section headers: nothing can be said
    scn = nullptr;
    while ((scn = elf_nextscn(elf_, scn)) != nullptr) {
        GElf_Shdr shdr;
        if (gelf_getshdr(scn, &shdr) == nullptr) continue;
        if (shdr.sh_type == SHT_REL) return false;  // not x86-64's: unknown
        const bool rela = shdr.sh_type == SHT_RELA, relr = shdr.sh_type == SHT_RELR;
        const bool values = fixed && (shdr.sh_flags & SHF_ALLOC) && !(shdr.sh_flags & SHF_EXECINSTR) &&
                            shdr.sh_type != SHT_NOBITS;
        if (!rela && !relr && !values) continue;
        Elf_Data *data = elf_getdata(scn, nullptr);
        if (data == nullptr || data->d_buf == nullptr) continue;
        if (rela) read_rela(elf_, shdr, data, &code_pointers_);
        else if (relr && !read_relr(elf_, data, &code_pointers_)) return false;
        if (values) scan_values(data, shdr.sh_addr, code, &code_pointers_);
    }
    std::sort(code_pointers_.begin(), code_pointers_.end());
    code_pointers_.erase(std::unique(code_pointers_.begin(), code_pointers_.end()), code_pointers_.end());
    return true;
}

int ElfObject::stores_code_address(uint64_t from, uint64_t to) {
    if (code_pointers_known_ == 0) code_pointers_known_ = read_code_pointers() ? 1 : -1;
    if (code_pointers_known_ < 0) return -1;
    auto it = std::lower_bound(code_pointers_.begin(), code_pointers_.end(), from);
    return it != code_pointers_.end() && *it < to ? 1 : 0;
}

}  // namespace liveprobe::symbols
