// A process's memory map, read from /proc/PID/maps (this process's by default).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace liveprobe::os {

struct Mapping {
    uint64_t start = 0;
    uint64_t end = 0;
    bool r = false, w = false, x = false;
    uint64_t offset = 0;  // of the mapping in its file
    uint64_t dev = 0;     // its file's device (makedev of the major:minor shown) and inode, 0 for
    uint64_t inode = 0;   // anonymous memory: what identifies the file whatever root names it
    std::string path;  // file path, "[vdso]", "[stack]", ... or empty for anonymous memory
};

// The map of this process, or of process `pid` (> 0).
std::vector<Mapping> read_maps(int pid = 0);
std::optional<Mapping> mapping_at(uint64_t addr);

// One reading of the map, for a batch of look-ups (registering 10,000 probes must not read
// /proc/self/maps 10,000 times).
class MapsSnapshot {
public:
    MapsSnapshot();
    const Mapping *at(uint64_t addr) const;  // nullptr when unmapped

private:
    std::vector<Mapping> maps_;  // sorted by start
};

}  // namespace liveprobe::os
