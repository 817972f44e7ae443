// A function's parameters from its DWARF (the object's .debug_info, or its separate debug file):
// names, types, and where the SysV x86-64 calling convention puts each at the entry, for the
// tracer's fetch-args by name (`p:open path flags`).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace liveprobe::symbols {

struct Param {
    std::string name;
    std::string type;      // as C writes it: "const char *", "int", "struct point *"
    uint32_t slot = 0;     // 1-based integer argument ($argN), 0 when not passed in one
    uint32_t size = 0;     // bytes
    bool is_signed = false;
    bool is_pointer = false;
    bool is_char_pointer = false;  // char *, const char *, unsigned char *...
    std::string why_no_slot;       // when slot is 0: a float, a struct by value...
};

// The parameters of the function whose entry is at runtime address `entry`, in order. 0, or
// -ENOENT with *why (no DWARF for its object, no subprogram there).
int function_params(uint64_t entry, std::vector<Param> *out, std::string *why);

// Closes the object file whose DWARF function_params keeps open (the next call opens one again):
// for `liveprobe detach`, which leaves no descriptor of liveprobe's in the program.
void close_dwarf();

}  // namespace liveprobe::symbols
