// Pure string rules behind symbols::resolve (API.md "Symbol names"): splitting a spec into
// OBJECT, name and version, matching an object's file name, and reducing a demangled C++ name
// to the forms a user may type. No state, no locks; unit-tested directly.
#pragma once

#include <string>
#include <string_view>

namespace liveprobe::symbols::names {

struct Spec {
    std::string_view object;   // empty: every object (main program first)
    std::string_view name;     // the symbol, without any "@VERSION"
    std::string_view version;  // from "name@VERSION" or "name@@VERSION"; empty when not given
};

// Splits "OBJECT:name@VERSION". OBJECT ends at the first single ':' (not part of a C++ "::")
// that comes before any '(' , so "ns::Widget::spin" is a name, not OBJECT "ns". Returns false
// for a malformed spec (empty OBJECT before ':', empty name, empty version after '@') and sets
// *why.
bool parse_spec(std::string_view spec, Spec *out, std::string *why);

// The file's base name ("/usr/lib/libz.so.1" -> "libz.so.1").
std::string_view base_name(std::string_view path);

// OBJECT given by the user against an object's path: the base name exactly or with its
// version suffix cut at any dot ("libz.so.1.2.13" is matched by libz.so.1.2.13, libz.so.1.2,
// libz.so.1, libz.so and libz); an OBJECT containing '/' must equal the whole path.
bool object_matches(std::string_view object, std::string_view path);

// Splits a symbol table name "memcpy@@GLIBC_2.14" into base name and version. *hidden is true
// for a single '@' (a non-default version, as the static linker writes it in .symtab).
std::string_view split_version(std::string_view name, std::string_view *version, bool *hidden);

// abi::__cxa_demangle of a mangled ("_Z...") name; empty when it is not one or fails.
std::string demangle(const char *mangled);

// A demangled name in the form used for comparison: whitespace kept only between two
// identifier characters ("spin(int, char) const" -> "spin(int,char)const"), so users need not
// match the demangler's spacing.
std::string normalize(std::string_view demangled);

// Of a normalized demangled function name, the part before its parameter list
// ("ns::Widget::spin(int)const" -> "ns::Widget::spin", "S::operator()(int)" -> "S::operator()").
// Names without a parameter list (variables) are returned whole.
std::string_view strip_parameters(std::string_view normalized);

// A normalized demangled name without trailing qualifiers after its parameter list
// ("get()const" -> "get()", "f()&&" -> "f()"), so "get()" finds the const method too.
std::string_view strip_qualifiers(std::string_view normalized);

}  // namespace liveprobe::symbols::names
