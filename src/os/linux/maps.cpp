#include "os/linux/maps.hpp"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include <sys/sysmacros.h>

namespace liveprobe::os {

std::vector<Mapping> read_maps(int pid)
{
    std::vector<Mapping> out;
    char file[64];
    if (pid > 0)
        std::snprintf(file, sizeof file, "/proc/%d/maps", pid);
    else
        std::snprintf(file, sizeof file, "/proc/self/maps");
    FILE *f = std::fopen(file, "re");
    if (!f) return out;
    char line[4096 + 256];
    while (std::fgets(line, sizeof line, f)) {
        Mapping m;
        char perms[8] = {};
        int path_off = 0;
        unsigned major = 0, minor = 0;
        if (std::sscanf(line, "%" SCNx64 "-%" SCNx64 " %7s %" SCNx64 " %x:%x %" SCNu64 " %n", &m.start, &m.end, perms,
                        &m.offset, &major, &minor, &m.inode, &path_off) < 7)
            continue;
        m.dev = makedev(major, minor);
        m.r = perms[0] == 'r';
        m.w = perms[1] == 'w';
        m.x = perms[2] == 'x';
        if (path_off > 0) {
            m.path = line + path_off;
            while (!m.path.empty() && (m.path.back() == '\n' || m.path.back() == ' '))
                m.path.pop_back();
        }
        out.push_back(std::move(m));
    }
    std::fclose(f);
    return out;
}

std::optional<Mapping> mapping_at(uint64_t addr)
{
    for (auto &m : read_maps())
        if (addr >= m.start && addr < m.end) return m;
    return std::nullopt;
}

MapsSnapshot::MapsSnapshot() : maps_(read_maps())
{
    std::sort(maps_.begin(), maps_.end(), [](const Mapping &a, const Mapping &b) { return a.start < b.start; });
}

const Mapping *MapsSnapshot::at(uint64_t addr) const
{
    auto it = std::upper_bound(maps_.begin(), maps_.end(), addr,
                               [](uint64_t a, const Mapping &m) { return a < m.start; });
    if (it == maps_.begin()) return nullptr;
    --it;
    return addr < it->end ? &*it : nullptr;
}

}  // namespace liveprobe::os
