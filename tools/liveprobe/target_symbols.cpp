// Addresses of a traced process, named (target_symbols.hpp).
#include "target_symbols.hpp"

#include <elf.h>

#include <fstream>
#include <iterator>
#include <sstream>

#include <fmt/format.h>

#include "symbols/elf_object.hpp"
#include "trace_output.hpp"

namespace liveprobe::tool {

TargetSymbols::TargetSymbols() = default;
TargetSymbols::~TargetSymbols() = default;

std::vector<TargetSymbols::Map> TargetSymbols::parse(const std::string &text)
{
    std::vector<Map> maps;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
        std::istringstream l(line);
        std::string range, perms, dev, path;
        uint64_t offset = 0, inode = 0;
        l >> range >> perms >> std::hex >> offset >> dev >> std::dec >> inode;
        std::getline(l >> std::ws, path);
        const size_t dash = range.find('-');
        if (dash == std::string::npos || path.empty() || path[0] != '/') continue;
        maps.push_back({std::stoull(range.substr(0, dash), nullptr, 16), std::stoull(range.substr(dash + 1), nullptr, 16),
                        offset, path});
    }
    return maps;
}

// The mapping holding addr: the process's, read again from /proc/PID/maps if none of those read
// does; else the fallback's.
const TargetSymbols::Map *TargetSymbols::map_of(int pid, uint64_t addr)
{
    for (int pass = 0; pass < 2; ++pass) {
        std::vector<Map> &maps = maps_[pid];
        for (const Map &m : maps)
            if (addr >= m.start && addr < m.end) return &m;
        if (pass) break;
        std::ifstream in(fmt::format("/proc/{}/maps", pid));
        if (!in) break;
        maps = parse(std::string(std::istreambuf_iterator<char>(in), {}));
    }
    for (const Map &m : fallback_)
        if (addr >= m.start && addr < m.end) return &m;
    return nullptr;
}

std::string TargetSymbols::describe(int pid, uint64_t addr, bool return_address)
{
    auto known = names_.find({pid, addr, return_address});
    if (known != names_.end()) return known->second;
    std::string name = fmt::format("{:#x}", addr);
    const uint64_t at = return_address && addr ? addr - 1 : addr;  // the call's last byte
    if (const Map *m = map_of(pid, at)) {
        auto [it, added] = objects_.try_emplace(m->path);
        if (added) {
            std::string why;
            it->second = symbols::ElfObject::load(fmt::format("/proc/{}/root{}", pid, m->path), true, &why);
            if (!it->second) it->second = symbols::ElfObject::load(m->path, true, &why);
        }
        const symbols::ElfObject *o = it->second.get();
        // A program not built position-independent is where its file says; anything else is
        // where the mapping put it (a segment's file offset is its address in GNU ld's output).
        const uint64_t file_addr = o && o->elf_type() == ET_EXEC ? addr : addr - m->start + m->offset;
        const uint64_t file_at = file_addr - (addr - at);
        const symbols::Symbol *s = o ? o->function_containing(file_at) : nullptr;
        const std::string base = m->path.substr(m->path.rfind('/') + 1);
        if (s) {
            const std::string fn = demangled(s->name.substr(0, s->name.find('@')));
            name = file_addr == s->value ? fn : fmt::format("{}+{:#x}", fn, file_addr - s->value);
        } else {
            name = fmt::format("{}+{:#x}", base, file_addr);
        }
    }
    names_[{pid, addr, return_address}] = name;
    return name;
}

}  // namespace liveprobe::tool
