// A value's type as the tracer prints it: read from DWARF by the target's agent
// (symbols/dwarf_types.hpp), carried in a spec's text as a fetch's :{TYPE} (so the `liveprobe`
// tool, which prints the values, and a trace file know it), and parsed back here by both.
//
// The descriptor is one word (no space, no colon), a letter and the size in bytes, then what
// the kind needs:
//   v               void (no value)          b1            bool
//   c1              char                     iN, uN        an integer (1, 2, 4, 8, 16 bytes)
//   f4, f8, f16     float, double, long double (x87's 80 bits in 16)
//   p8              a pointer (hex)          s8            a char * (the string it points at)
//   eN{A=0,B=1}     an enum, unsigned        EN{...}       an enum with a negative value
//   r<TYPE>         a C++ reference: the value it refers to (its image is that value's bytes)
//   SN{x@0=i4,...}  a struct, class or union: each member's name, offset and type
//   TN{...}         the same, of a C++ class passed by invisible reference (a non-trivial copy
//                   or destructor): returned in memory, passed as its address
//   aN[COUNT]<TYPE> an array                 xN            anything else: its bytes in hex
// Nesting is bounded (kMaxDepth), and so are a struct's members and an enum's names.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace liveprobe::trace {

enum class VKind : uint8_t { void_, boolean, character, sint, uint, floating, pointer, string, enumeration, reference, record, array, opaque };

struct VType {
    struct Field {
        std::string name;
        uint32_t offset = 0;
        std::shared_ptr<const VType> type;
    };
    VKind kind = VKind::opaque;
    uint32_t size = 0;  // bytes (a reference: its referent's)
    bool is_signed = false;  // an enum with a negative value
    bool by_reference = false;  // a record passed by invisible reference (T)
    std::vector<std::pair<std::string, int64_t>> enumerators;
    std::vector<Field> fields;         // record
    std::shared_ptr<const VType> of;   // reference, array: the referent, the element
    uint32_t count = 0;                // array
};

constexpr int kMaxDepth = 3;
constexpr size_t kMaxFields = 24;
constexpr size_t kMaxEnumerators = 256;

// Parses a descriptor: nullptr when it is not one (*at: where it went wrong).
std::shared_ptr<const VType> parse_vtype(const std::string &text, size_t *at = nullptr);

// The bytes of the value's image in an event: the value's own (a reference: its referent's),
// a string's kStringBytes.
uint32_t image_bytes(const VType &t);

// The image as text (bpftrace's style: { .x = 1, .y = 2 }), or as JSON. `n` bytes of it were
// captured (a large struct is cut: the members past it print as "?").
std::string format_image(const VType &t, const unsigned char *image, size_t n);
std::string format_image_json(const VType &t, const unsigned char *image, size_t n);

// A JSON string of the bytes s: valid UTF-8 kept as it is, controls escaped, a byte that is no
// part of valid UTF-8 as the text \xHH (JSON cannot hold it), as the text output shows it.
std::string json_string(const std::string &s);

// The last byte of a string's image says how it ended (trace/fetch.cpp writes it).
constexpr unsigned char kStringCut = 1;   // no NUL within: cut
constexpr unsigned char kStringNull = 2;  // the pointer was NULL

}  // namespace liveprobe::trace
