#include "symbols/dwarf_types.hpp"

#include <dwarf.h>

#include <cctype>

#include <fmt/format.h>

#include "trace/value_type.hpp"

namespace liveprobe::symbols {
namespace {

// A name as a descriptor holds it: an identifier's characters only (C and C++ names are).
std::string ident(const char *name)
{
    std::string out;
    for (const char *p = name ? name : ""; *p; ++p)
        out += std::isalnum(static_cast<unsigned char>(*p)) || *p == '_' ? *p : '_';
    return out;
}

bool udata(Dwarf_Die *die, int at, Dwarf_Word *v)
{
    Dwarf_Attribute attr;
    return dwarf_attr_integrate(die, at, &attr) && dwarf_formudata(&attr, v) == 0;
}

std::string describe(Dwarf_Die *type, int depth);

// The referent of a pointer or reference type (through typedefs and qualifiers).
bool referent(Dwarf_Die *ptr, Dwarf_Die *out)
{
    std::string ignored;
    return type_of(ptr, out, &ignored);
}

std::string base_type(Dwarf_Die *type, Dwarf_Word size)
{
    Dwarf_Word enc = 0;
    udata(type, DW_AT_encoding, &enc);
    switch (enc) {
    case DW_ATE_boolean: return size == 1 ? "b1" : fmt::format("u{}", size);
    case DW_ATE_signed_char:
    case DW_ATE_unsigned_char: {
        // char is a character; signed char and unsigned char (int8_t, uint8_t) are numbers.
        const char *name = dwarf_diename(type);
        if (size != 1) return fmt::format("x{}", size);
        if (name && std::string(name) == "char") return "c1";
        return enc == DW_ATE_signed_char ? "i1" : "u1";
    }
    case DW_ATE_signed: return fmt::format("i{}", size);
    case DW_ATE_unsigned:
    case DW_ATE_UTF: return fmt::format("u{}", size);
    case DW_ATE_float: return size == 4 || size == 8 || size == 16 ? fmt::format("f{}", size) : fmt::format("x{}", size);
    default: return fmt::format("x{}", size);
    }
}

std::string enumeration(Dwarf_Die *type, Dwarf_Word size)
{
    std::string names;
    bool negative = false;
    size_t count = 0;
    Dwarf_Die child;
    if (dwarf_child(type, &child) == 0) {
        do {
            if (dwarf_tag(&child) != DW_TAG_enumerator || count == trace::kMaxEnumerators) continue;
            Dwarf_Attribute attr;
            Dwarf_Sword v = 0;
            if (!dwarf_attr(&child, DW_AT_const_value, &attr) || dwarf_formsdata(&attr, &v) != 0) continue;
            const std::string n = ident(dwarf_diename(&child));
            if (n.empty()) continue;
            negative = negative || v < 0;
            names += fmt::format("{}{}={}", count++ ? "," : "", n, v);
        } while (dwarf_siblingof(&child, &child) == 0);
    }
    return fmt::format("{}{}{{{}}}", negative ? 'E' : 'e', size, names);
}

// Whether a C++ class goes by invisible reference, whatever its size (the Itanium C++ ABI: a
// non-trivial copy or move constructor or destructor): as DWARF 5's DW_AT_calling_convention
// says when the compiler wrote it (GCC 12 does not), else by the special members it declares.
// A member or base that goes so makes its class go so too (the caller's fields check).
bool passed_by_reference(Dwarf_Die *type)
{
    Dwarf_Word cc = 0;
    if (udata(type, DW_AT_calling_convention, &cc)) return cc == DW_CC_pass_by_reference;
    const char *cls = dwarf_diename(type);
    Dwarf_Die child;
    if (!cls || dwarf_child(type, &child) != 0) return false;
    do {
        const char *name = dwarf_diename(&child);
        Dwarf_Word defaulted = 0;
        if (dwarf_tag(&child) != DW_TAG_subprogram || !name || dwarf_hasattr(&child, DW_AT_deleted) ||
            (udata(&child, DW_AT_defaulted, &defaulted) && defaulted == DW_DEFAULTED_in_class))
            continue;
        if (name[0] == '~') return true;  // a destructor the class declares (or a non-trivial implicit one)
        if (std::string(name) != cls) continue;
        // A constructor of one parameter (after `this`) that is a reference to the class.
        Dwarf_Die param;
        int params = 0;
        bool self_ref = false;
        if (dwarf_child(&child, &param) == 0) {
            do {
                if (dwarf_tag(&param) != DW_TAG_formal_parameter || dwarf_hasattr(&param, DW_AT_artificial)) continue;
                ++params;
                Dwarf_Die pt, to;
                std::string ignored;
                const int tag = type_of(&param, &pt, &ignored) ? dwarf_tag(&pt) : 0;
                self_ref = (tag == DW_TAG_reference_type || tag == DW_TAG_rvalue_reference_type) && referent(&pt, &to) &&
                           dwarf_diename(&to) && std::string(dwarf_diename(&to)) == cls;
            } while (dwarf_siblingof(&param, &param) == 0);
        }
        if (params == 1 && self_ref) return true;
    } while (dwarf_siblingof(&child, &child) == 0);
    return false;
}

// A struct, class or union: its data members at a constant offset (bit fields and static
// members left out; a base class's members under its name).
std::string record(Dwarf_Die *type, Dwarf_Word size, int depth)
{
    if (depth >= trace::kMaxDepth) return fmt::format("x{}", size);
    const bool is_union = dwarf_tag(type) == DW_TAG_union_type;
    std::string fields;
    size_t count = 0;
    Dwarf_Die child;
    if (dwarf_child(type, &child) == 0) {
        do {
            const int tag = dwarf_tag(&child);
            if ((tag != DW_TAG_member && tag != DW_TAG_inheritance) || count == trace::kMaxFields) continue;
            Dwarf_Word off = 0, bits = 0;
            if (udata(&child, DW_AT_bit_size, &bits) || dwarf_hasattr(&child, DW_AT_external)) continue;
            if (!udata(&child, DW_AT_data_member_location, &off) && !is_union) continue;
            std::string name = tag == DW_TAG_inheritance ? std::string() : ident(dwarf_diename(&child));
            Dwarf_Die ft;
            std::string ignored;
            if (!type_of(&child, &ft, &ignored)) continue;
            if (tag == DW_TAG_inheritance) name = ident(dwarf_diename(&ft));
            const std::string d = describe(&ft, depth + 1);
            const auto t = trace::parse_vtype(d);
            if (!t || off + t->size > size) continue;
            fields += fmt::format("{}{}@{}={}", count++ ? "," : "", name, off, d);
        } while (dwarf_siblingof(&child, &child) == 0);
    }
    const bool by_reference = passed_by_reference(type) || fields.find("=T") != std::string::npos;
    return fmt::format("{}{}{{{}}}", by_reference ? 'T' : 'S', size, fields);
}

std::string array(Dwarf_Die *type, int depth)
{
    Dwarf_Die elem;
    std::string ignored;
    if (!type_of(type, &elem, &ignored)) return "";
    Dwarf_Word count = 0;
    Dwarf_Die sub;
    if (dwarf_child(type, &sub) != 0 || dwarf_tag(&sub) != DW_TAG_subrange_type) return "";
    Dwarf_Word upper = 0;
    if (!udata(&sub, DW_AT_count, &count)) {
        if (!udata(&sub, DW_AT_upper_bound, &upper)) return "";
        count = upper + 1;
    }
    Dwarf_Die next = sub;
    if (dwarf_siblingof(&next, &next) == 0) return "";  // int a[2][3]: not followed
    // Past the depth, its bytes (an array type has no size of its own: its element's times
    // its count); but a char array, as cheap to show as its bytes, is still a string.
    if (depth >= trace::kMaxDepth && !(dwarf_tag(&elem) == DW_TAG_base_type && base_type(&elem, 1) == "c1"))
        return size_of(&elem) && count ? fmt::format("x{}", size_of(&elem) * count) : "";
    const std::string e = describe(&elem, depth + 1);
    const auto t = trace::parse_vtype(e);
    if (!t || t->kind == trace::VKind::void_ || t->size == 0) return "";
    return fmt::format("a{}[{}]{}", t->size * count, count, e);
}

std::string describe(Dwarf_Die *type, int depth)
{
    const Dwarf_Word size = size_of(type);
    switch (dwarf_tag(type)) {
    case DW_TAG_base_type: return base_type(type, size);
    case DW_TAG_enumeration_type: return size ? enumeration(type, size) : "";
    case DW_TAG_pointer_type: {
        Dwarf_Die to;
        Dwarf_Word enc = 0;
        if (referent(type, &to) && dwarf_tag(&to) == DW_TAG_base_type && size_of(&to) == 1 && udata(&to, DW_AT_encoding, &enc) &&
            (enc == DW_ATE_signed_char || enc == DW_ATE_unsigned_char))
            return "s8";
        return "p8";
    }
    case DW_TAG_reference_type:
    case DW_TAG_rvalue_reference_type: {
        // Its referent shown in its place: no level of nesting of its own.
        Dwarf_Die to;
        if (depth >= trace::kMaxDepth || !referent(type, &to)) return "p8";
        const std::string d = describe(&to, depth);
        const auto t = trace::parse_vtype(d);
        return t && t->kind != trace::VKind::void_ && t->size ? "r" + d : "p8";
    }
    case DW_TAG_structure_type:
    case DW_TAG_class_type:
    case DW_TAG_union_type: return size ? record(type, size, depth) : "";
    case DW_TAG_array_type: return array(type, depth);
    default: return size ? fmt::format("x{}", size) : "";  // nothing known of it, not even its size
    }
}

}  // namespace

bool type_of(Dwarf_Die *die, Dwarf_Die *out, std::string *text)
{
    Dwarf_Attribute attr;
    if (!dwarf_attr_integrate(die, DW_AT_type, &attr) || !dwarf_formref_die(&attr, out)) {
        *text = "void";
        return false;
    }
    std::string quals;
    for (int depth = 0; depth < 16; ++depth) {
        int tag = dwarf_tag(out);
        if (tag != DW_TAG_typedef && tag != DW_TAG_const_type && tag != DW_TAG_volatile_type &&
            tag != DW_TAG_restrict_type && tag != DW_TAG_atomic_type)
            break;
        if (tag == DW_TAG_typedef && text->empty() && dwarf_diename(out)) *text = dwarf_diename(out);
        if (tag == DW_TAG_const_type) quals = "const ";
        Dwarf_Die next;
        if (!dwarf_attr_integrate(out, DW_AT_type, &attr) || !dwarf_formref_die(&attr, &next)) {
            *text = quals + "void";
            return false;
        }
        *out = next;
    }
    if (text->empty()) {
        const char *name = dwarf_diename(out);
        switch (dwarf_tag(out)) {
        case DW_TAG_structure_type: *text = quals + "struct " + (name ? name : "?"); break;
        case DW_TAG_class_type: *text = quals + "class " + (name ? name : "?"); break;
        case DW_TAG_union_type: *text = quals + "union " + (name ? name : "?"); break;
        case DW_TAG_enumeration_type: *text = quals + "enum " + (name ? name : "?"); break;
        case DW_TAG_pointer_type: {
            Dwarf_Die to;
            std::string inner;
            type_of(out, &to, &inner);
            *text = inner + " *";
            break;
        }
        case DW_TAG_reference_type:
        case DW_TAG_rvalue_reference_type: {
            Dwarf_Die to;
            std::string inner;
            type_of(out, &to, &inner);
            *text = inner + (dwarf_tag(out) == DW_TAG_reference_type ? " &" : " &&");
            break;
        }
        default: *text = quals + (name ? name : "?");
        }
    }
    return true;
}

Dwarf_Word size_of(Dwarf_Die *type)
{
    Dwarf_Word size = 0;
    return udata(type, DW_AT_byte_size, &size) ? size : 0;
}

std::string describe_type(Dwarf_Die *die)
{
    Dwarf_Die type;
    std::string ignored;
    if (!type_of(die, &type, &ignored)) return "v";
    std::string d = describe(&type, 0);
    // A descriptor too long to carry in a spec's word: the value's bytes; none when even its
    // size is unknown (a function written in assembly says nothing of what it returns).
    if (d.size() > 2048 || !trace::parse_vtype(d)) d = size_of(&type) ? fmt::format("x{}", size_of(&type)) : "";
    return d;
}

}  // namespace liveprobe::symbols
