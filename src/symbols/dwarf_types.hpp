// DWARF types, for the tracer's values: the C spelling a user reads (`list --params`), and the
// descriptor (trace/value_type.hpp) by which the tool prints a value of the type.
#pragma once

#include <elfutils/libdw.h>

#include <string>

namespace liveprobe::symbols {

// The type a DIE's DW_AT_type names, through typedefs and qualifiers, into *out; `text` gets its
// C spelling. False (and "void") when the DIE names no type.
bool type_of(Dwarf_Die *die, Dwarf_Die *out, std::string *text);

// DW_AT_byte_size of a type, 0 when it has none.
Dwarf_Word size_of(Dwarf_Die *type);

// The descriptor of the type that DIE's DW_AT_type names ("v" when none): a struct's members,
// an enum's names, a reference's referent, bounded in depth and size. "" when nothing is known
// of it (a type without a size: what the DWARF of assembly functions gives).
std::string describe_type(Dwarf_Die *die);

}  // namespace liveprobe::symbols
