#include "os/linux/gdb_jit.hpp"
#include "core/immortal.hpp"

#include <elf.h>

#include <cstring>
#include <deque>
#include <mutex>

// The interface's names and layout are fixed by GDB.
extern "C" {
struct jit_code_entry {
    jit_code_entry *next_entry;
    jit_code_entry *prev_entry;
    const char *symfile_addr;
    uint64_t symfile_size;
};
struct jit_descriptor {
    uint32_t version;
    uint32_t action_flag;  // 0 none, 1 register, 2 unregister
    jit_code_entry *relevant_entry;
    jit_code_entry *first_entry;
};
__attribute__((visibility("default"), noinline, used)) void __jit_debug_register_code() { asm volatile("" ::: "memory"); }
__attribute__((visibility("default"), used)) jit_descriptor __jit_debug_descriptor = {1, 0, nullptr, nullptr};
}

namespace liveprobe::os {
namespace {

std::mutex g_mu;
core::Immortal<std::deque<std::vector<uint8_t>>> g_images_storage;
std::deque<std::vector<uint8_t>> &g_images = g_images_storage.value;  // never freed: GDB may read them any time

template <typename T>
void put(std::vector<uint8_t> &out, size_t at, const T &v)
{
    std::memcpy(out.data() + at, &v, sizeof v);
}

}  // namespace

void gdb_jit_register(const std::string &name, uint64_t addr, uint64_t size, const std::vector<uint8_t> &eh_frame)
{
    // Layout: ELF header, .eh_frame (+ 4-byte terminator), .symtab, .strtab, .shstrtab,
    // section headers. Everything lives in one never-freed buffer.
    const char shstr[] = "\0.text\0.eh_frame\0.symtab\0.strtab\0.shstrtab";
    enum { kNull, kText, kEh, kSym, kStr, kShStr, kCount };
    const uint32_t names[kCount] = {0, 1, 7, 17, 25, 33};
    std::string strtab = std::string(1, '\0') + name + '\0';

    size_t eh_off = sizeof(Elf64_Ehdr);
    size_t eh_len = eh_frame.size() + 4;
    size_t sym_off = (eh_off + eh_len + 7) & ~size_t(7);
    size_t sym_len = 2 * sizeof(Elf64_Sym);
    size_t str_off = sym_off + sym_len;
    size_t shstr_off = str_off + strtab.size();
    size_t sh_off = (shstr_off + sizeof shstr + 7) & ~size_t(7);
    size_t total = sh_off + kCount * sizeof(Elf64_Shdr);

    std::unique_lock lk(g_mu);
    std::vector<uint8_t> &img = g_images.emplace_back(total, 0);
    std::memcpy(img.data() + eh_off, eh_frame.data(), eh_frame.size());
    std::memcpy(img.data() + str_off, strtab.data(), strtab.size());
    std::memcpy(img.data() + shstr_off, shstr, sizeof shstr);

    Elf64_Ehdr eh{};
    std::memcpy(eh.e_ident, ELFMAG, SELFMAG);
    eh.e_ident[EI_CLASS] = ELFCLASS64;
    eh.e_ident[EI_DATA] = ELFDATA2LSB;
    eh.e_ident[EI_VERSION] = EV_CURRENT;
    eh.e_ident[EI_OSABI] = ELFOSABI_SYSV;
    eh.e_type = ET_REL;
    eh.e_machine = EM_X86_64;
    eh.e_version = EV_CURRENT;
    eh.e_ehsize = sizeof(Elf64_Ehdr);
    eh.e_shoff = sh_off;
    eh.e_shentsize = sizeof(Elf64_Shdr);
    eh.e_shnum = kCount;
    eh.e_shstrndx = kShStr;
    put(img, 0, eh);

    Elf64_Sym sym{};
    sym.st_name = 1;
    sym.st_info = ELF64_ST_INFO(STB_GLOBAL, STT_FUNC);
    sym.st_shndx = kText;
    sym.st_value = addr;
    sym.st_size = size;
    put(img, sym_off + sizeof(Elf64_Sym), sym);

    Elf64_Shdr sh[kCount]{};
    for (int i = 0; i < kCount; ++i) sh[i].sh_name = names[i];
    sh[kText].sh_type = SHT_NOBITS;
    sh[kText].sh_flags = SHF_ALLOC | SHF_EXECINSTR;
    sh[kText].sh_addr = addr;
    sh[kText].sh_size = size;
    sh[kText].sh_addralign = 1;
    sh[kEh].sh_type = SHT_PROGBITS;
    sh[kEh].sh_flags = SHF_ALLOC;
    sh[kEh].sh_addr = reinterpret_cast<uint64_t>(img.data() + eh_off);
    sh[kEh].sh_offset = eh_off;
    sh[kEh].sh_size = eh_len;
    sh[kEh].sh_addralign = 8;
    sh[kSym].sh_type = SHT_SYMTAB;
    sh[kSym].sh_offset = sym_off;
    sh[kSym].sh_size = sym_len;
    sh[kSym].sh_link = kStr;
    sh[kSym].sh_info = 1;  // one local symbol: the null one
    sh[kSym].sh_entsize = sizeof(Elf64_Sym);
    sh[kSym].sh_addralign = 8;
    sh[kStr].sh_type = SHT_STRTAB;
    sh[kStr].sh_offset = str_off;
    sh[kStr].sh_size = strtab.size();
    sh[kStr].sh_addralign = 1;
    sh[kShStr].sh_type = SHT_STRTAB;
    sh[kShStr].sh_offset = shstr_off;
    sh[kShStr].sh_size = sizeof shstr;
    sh[kShStr].sh_addralign = 1;
    std::memcpy(img.data() + sh_off, sh, sizeof sh);

    auto *entry = new jit_code_entry{nullptr, nullptr, reinterpret_cast<const char *>(img.data()), total};
    entry->next_entry = __jit_debug_descriptor.first_entry;
    if (entry->next_entry) entry->next_entry->prev_entry = entry;
    __jit_debug_descriptor.first_entry = entry;
    __jit_debug_descriptor.relevant_entry = entry;
    __jit_debug_descriptor.action_flag = 1;
    __jit_debug_register_code();
    __jit_debug_descriptor.action_flag = 0;
}

}  // namespace liveprobe::os
