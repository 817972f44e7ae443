// Addresses of a traced process as the tool names them ("main+0x2a", "libc.so.6+0x1234"): for
// --by caller and stacks. The process's mappings are read from /proc/PID/maps while it runs
// (again when an address falls outside those read), its objects' symbols from their files,
// through /proc/PID/root (a process in a container sees its own files). An address of a
// process gone before it was asked about, or of no file, stays an address.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

namespace liveprobe::symbols {
class ElfObject;
}

namespace liveprobe::tool {

class TargetSymbols {
public:
    TargetSymbols();
    ~TargetSymbols();
    // "FUNC+0xOFF" (FUNC demangled; "FUNC" at its entry), "OBJECT+0xOFF", or "0xADDR". A
    // return address is named by its call, the byte before it: after a call that does not
    // return, it is the next function's first byte.
    std::string describe(int pid, uint64_t addr, bool return_address = false);
    // The mappings (/proc/PID/maps' lines) to take for a process whose own cannot be read (it is
    // gone; or the trace file's process, read later): its objects are read where it had them.
    void set_fallback_maps(const std::string &text) { fallback_ = parse(text); }

private:
    struct Map {
        uint64_t start, end, offset;
        std::string path;
    };
    const Map *map_of(int pid, uint64_t addr);
    static std::vector<Map> parse(const std::string &text);
    std::vector<Map> fallback_;
    std::map<int, std::vector<Map>> maps_;
    std::map<std::string, std::unique_ptr<symbols::ElfObject>> objects_;  // null: not ELF
    std::map<std::tuple<int, uint64_t, bool>, std::string> names_;      // answers, kept
};

}  // namespace liveprobe::tool
