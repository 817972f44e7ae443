// A function's parameters from its DWARF (the object's .debug_info, or its separate debug file):
// names, types, and where the SysV x86-64 calling convention puts each at the entry, for the
// tracer's fetch-args by name (`p:open path flags`).
#pragma once

#include <elfutils/libdw.h>

#include <cstdint>
#include <string>
#include <vector>

namespace liveprobe::symbols {

struct Param {
    std::string name;
    std::string type;      // as C writes it: "const char *", "int", "struct point *"
    std::string desc;      // its descriptor (trace/value_type.hpp)
    uint32_t slot = 0;     // 1-based integer argument ($argN) it starts at, 0 when not passed in one
    uint32_t xmm = 0;      // 1-based vector register (%xmm0 is 1) it starts at, 0 when none
    uint32_t size = 0;     // bytes
    bool is_signed = false;
    bool is_pointer = false;
    bool is_char_pointer = false;  // char *, const char *, unsigned char *...
    std::string why_no_slot;       // when slot and xmm are 0: on the stack, split between registers...
};

// The parameters of the function whose entry is at runtime address `entry`, in order, and the
// descriptor of its return type (ret: may be null). 0, or -ENOENT with *why (no DWARF for its
// object, no subprogram there).
int function_params(uint64_t entry, std::vector<Param> *out, std::string *why, std::string *ret = nullptr);


// The parameters of the function whose DIE is fn, and its return type's descriptor (ret: may
// be null): function_params's, for a DIE found otherwise (symbols/dwarf_lines.hpp).
void params_of_die(Dwarf_Die *fn, std::vector<Param> *out, std::string *ret);

// Closes the object file whose DWARF function_params keeps open (the next call opens one again):
// for `liveprobe detach`, which leaves no descriptor of liveprobe's in the program.
void close_dwarf();

}  // namespace liveprobe::symbols
