#include "trace/value_type.hpp"

#include <cctype>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "trace/spec.hpp"

namespace liveprobe::trace {
namespace {

struct Reader {
    const std::string &s;
    size_t i = 0;

    bool eat(char c)
    {
        if (i < s.size() && s[i] == c) return ++i, true;
        return false;
    }
    bool number(uint64_t *v)
    {
        size_t start = i;
        uint64_t r = 0;
        while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i])) && i - start < 19) r = r * 10 + static_cast<uint64_t>(s[i++] - '0');
        *v = r;
        return i > start;
    }
    bool signed_number(int64_t *v)
    {
        bool neg = eat('-');
        uint64_t u = 0;
        if (!number(&u)) return false;
        *v = neg ? -static_cast<int64_t>(u) : static_cast<int64_t>(u);
        return true;
    }
    bool name(std::string *out)
    {
        size_t start = i;
        while (i < s.size() && (std::isalnum(static_cast<unsigned char>(s[i])) || s[i] == '_')) ++i;
        *out = s.substr(start, i - start);
        return true;  // may be empty: an anonymous member
    }

    std::shared_ptr<const VType> type(int depth)
    {
        if (depth > kMaxDepth + 3 || i >= s.size()) return nullptr;  // references and char arrays add levels
        auto t = std::make_shared<VType>();
        const char k = s[i++];
        if (k == 'v') {
            t->kind = VKind::void_;
            return t;
        }
        if (k == 'r') {  // r<TYPE>: no size of its own
            t->kind = VKind::reference;
            t->of = type(depth + 1);
            if (!t->of) return nullptr;
            t->size = t->of->size;
            return t;
        }
        uint64_t size = 0;
        if (!number(&size) || size > (1u << 20)) return nullptr;
        t->size = static_cast<uint32_t>(size);
        switch (k) {
        case 'b': t->kind = VKind::boolean; return size == 1 ? t : nullptr;
        case 'c': t->kind = VKind::character; return size == 1 ? t : nullptr;
        case 'i': t->kind = VKind::sint; return size == 1 || size == 2 || size == 4 || size == 8 || size == 16 ? t : nullptr;
        case 'u': t->kind = VKind::uint; return size == 1 || size == 2 || size == 4 || size == 8 || size == 16 ? t : nullptr;
        case 'f': t->kind = VKind::floating; return size == 4 || size == 8 || size == 16 ? t : nullptr;
        case 'p': t->kind = VKind::pointer; return size == 8 ? t : nullptr;
        case 's': t->kind = VKind::string; return size == 8 ? t : nullptr;
        case 'x': t->kind = VKind::opaque; return t;
        case 'e':
        case 'E': {
            t->kind = VKind::enumeration;
            t->is_signed = k == 'E';
            if (size != 1 && size != 2 && size != 4 && size != 8) return nullptr;
            if (!eat('{')) return nullptr;
            while (!eat('}')) {
                std::string n;
                int64_t v = 0;
                if (t->enumerators.size() >= kMaxEnumerators || !name(&n) || n.empty() || !eat('=') || !signed_number(&v)) return nullptr;
                t->enumerators.emplace_back(std::move(n), v);
                if (!eat(',') && (i >= s.size() || s[i] != '}')) return nullptr;
            }
            return t;
        }
        case 'S':
        case 'T': {
            t->kind = VKind::record;
            t->by_reference = k == 'T';
            if (!eat('{')) return nullptr;
            while (!eat('}')) {
                VType::Field f;
                uint64_t off = 0;
                if (t->fields.size() >= kMaxFields || !name(&f.name) || !eat('@') || !number(&off) || !eat('=')) return nullptr;
                f.offset = static_cast<uint32_t>(off);
                f.type = type(depth + 1);
                if (!f.type || off + f.type->size > size) return nullptr;
                t->fields.push_back(std::move(f));
                if (!eat(',') && (i >= s.size() || s[i] != '}')) return nullptr;
            }
            return t;
        }
        case 'a': {
            t->kind = VKind::array;
            uint64_t count = 0;
            if (!eat('[') || !number(&count) || !eat(']')) return nullptr;
            t->count = static_cast<uint32_t>(count);
            t->of = type(depth + 1);
            if (!t->of || (count && t->of->size * count != size)) return nullptr;
            return t;
        }
        default: return nullptr;
        }
    }
};

uint64_t load_uint(const unsigned char *p, size_t n)
{
    uint64_t v = 0;
    std::memcpy(&v, p, n < 8 ? n : 8);
    return v;
}

int64_t load_sint(const unsigned char *p, size_t n)
{
    uint64_t v = load_uint(p, n);
    if (n < 8) {
        const unsigned shift = 64 - 8 * static_cast<unsigned>(n);
        return static_cast<int64_t>(v << shift) >> shift;
    }
    return static_cast<int64_t>(v);
}

// The escaped text of a string's bytes (as format_value writes a :string), quoted.
std::string quoted(const unsigned char *p, size_t n)
{
    std::string out = "\"";
    for (size_t i = 0; i < n && p[i]; ++i) {
        const unsigned char c = p[i];
        if (c == '"' || c == '\\') out += '\\', out += static_cast<char>(c);
        else if (c == '\n') out += "\\n";
        else if (c == '\t') out += "\\t";
        else if (c < 0x20 || c >= 0x7f) out += fmt::format("\\x{:02x}", c);
        else out += static_cast<char>(c);
    }
    return out + "\"";
}

std::string character(unsigned char c)
{
    if (c == '\'' || c == '\\') return fmt::format("'\\{}'", static_cast<char>(c));
    if (c >= 0x20 && c < 0x7f) return fmt::format("'{}'", static_cast<char>(c));
    if (c == '\n') return "'\\n'";
    if (c == 0) return "'\\0'";
    return fmt::format("'\\x{:02x}'", c);
}

std::string floating(const unsigned char *p, uint32_t size)
{
    if (size == 4) {
        float f;
        std::memcpy(&f, p, 4);
        return fmt::format("{}", f);
    }
    if (size == 8) {
        double d;
        std::memcpy(&d, p, 8);
        return fmt::format("{}", d);
    }
    long double ld = 0;
    std::memcpy(&ld, p, 10);  // x87's 80 bits; the rest of the 16 is padding
    return fmt::format("{}", ld);
}

// An enum's value by its name (a JSON string), or its number when it has none.
std::string enum_name(const VType &t, const unsigned char *p, bool json)
{
    const int64_t v = t.is_signed ? load_sint(p, t.size) : static_cast<int64_t>(load_uint(p, t.size));
    for (const auto &[n, value] : t.enumerators)
        if (value == v) return json ? json_string(n) : n;
    return t.is_signed ? std::to_string(v) : std::to_string(static_cast<uint64_t>(v));
}

std::string integer(const VType &t, const unsigned char *p)
{
    if (t.size == 16) {  // __int128: shown in hex, high word first
        const uint64_t lo = load_uint(p, 8), hi = load_uint(p + 8, 8);
        return hi ? fmt::format("{:#x}{:016x}", hi, lo) : fmt::format("{:#x}", lo);
    }
    return t.kind == VKind::sint ? std::to_string(load_sint(p, t.size)) : std::to_string(load_uint(p, t.size));
}

bool is_char_array(const VType &t) { return t.kind == VKind::array && t.of->kind == VKind::character; }

// JSON numbers cannot be NaN or infinite: those go as strings.
std::string json_number(const std::string &text)
{
    return text.find_first_of("ni") != std::string::npos ? "\"" + text + "\"" : text;
}

// `top`: the value itself, not a member of it (whose string is a pointer in the image).
std::string format(const VType &t, const unsigned char *p, size_t n, bool json, bool top = true)
{
    if (t.kind == VKind::string && !top) {
        if (n < 8) return json ? "null" : "?";
        return json ? json_string(fmt::format("{:#x}", load_uint(p, 8))) : fmt::format("{:#x}", load_uint(p, 8));
    }
    if (t.kind != VKind::void_ && t.kind != VKind::string && n < (t.kind == VKind::reference ? t.of->size : t.size))
        return json ? "null" : "?";  // past what was captured
    switch (t.kind) {
    case VKind::void_: return json ? "null" : "";
    case VKind::boolean: return p[0] == 0 ? "false" : p[0] == 1 ? "true" : std::to_string(p[0]);
    case VKind::character: return json ? std::to_string(static_cast<int8_t>(p[0])) : character(p[0]);
    case VKind::sint:
    case VKind::uint: return json && t.size == 16 ? json_string(integer(t, p)) : integer(t, p);
    case VKind::floating: return json ? json_number(floating(p, t.size)) : floating(p, t.size);
    case VKind::pointer: return json ? json_string(fmt::format("{:#x}", load_uint(p, 8))) : fmt::format("{:#x}", load_uint(p, 8));
    case VKind::string: {
        if (n >= kStringBytes && p[kStringBytes - 1] == kStringNull) return json ? "null" : "NULL";
        const std::string q = quoted(p, n < kStringBytes - 1 ? n : kStringBytes - 1);
        const bool cut = n >= kStringBytes && p[kStringBytes - 1] == kStringCut;
        if (json) return json_string(std::string(reinterpret_cast<const char *>(p), strnlen(reinterpret_cast<const char *>(p), kStringBytes - 1)));
        return cut ? q + "..." : q;
    }
    case VKind::enumeration: return enum_name(t, p, json);
    case VKind::reference: return format(*t.of, p, n, json, false);
    case VKind::record: {
        std::string out = json ? "{" : "{ ";
        bool first = true;
        for (const VType::Field &f : t.fields) {
            const size_t left = f.offset < n ? n - f.offset : 0;
            std::string v = format(*f.type, p + f.offset, left, json, false);
            if (json) out += fmt::format("{}{}:{}", first ? "" : ",", json_string(f.name), v);
            else out += fmt::format("{}.{} = {}", first ? "" : ", ", f.name.empty() ? "?" : f.name, v);
            first = false;
        }
        return out + (json ? "}" : first ? "}" : " }");
    }
    case VKind::array: {
        if (is_char_array(t)) {
            const size_t len = n < t.size ? n : t.size;
            if (json) return json_string(std::string(reinterpret_cast<const char *>(p), strnlen(reinterpret_cast<const char *>(p), len)));
            return quoted(p, len);
        }
        std::string out = "[";
        const uint32_t shown = t.count < 16 ? t.count : 16;
        for (uint32_t k = 0; k < shown; ++k) {
            const size_t at = size_t{k} * t.of->size;
            out += (k ? ", " : "") + format(*t.of, p + at, at < n ? n - at : 0, json, false);
        }
        if (shown < t.count) out += json ? "" : ", ...";
        return out + "]";
    }
    case VKind::opaque: {
        std::string out = "0x";
        for (uint32_t k = t.size; k-- > 0;) out += fmt::format("{:02x}", p[k]);
        return json ? json_string(out) : out;
    }
    }
    return "?";
}

// The length of the valid UTF-8 sequence at s[i] (1 to 4), 0 when there is none: a stray or
// missing continuation byte, an overlong form, a surrogate, or past U+10FFFF.
size_t utf8_length(const std::string &s, size_t i)
{
    const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
    const unsigned char c = byte(i);
    if (c < 0x80) return 1;
    size_t n = 0;
    uint32_t cp = 0;
    if (c >= 0xc2 && c <= 0xdf) n = 2, cp = c & 0x1fu;
    else if (c >= 0xe0 && c <= 0xef) n = 3, cp = c & 0x0fu;
    else if (c >= 0xf0 && c <= 0xf4) n = 4, cp = c & 0x07u;
    else return 0;
    if (i + n > s.size()) return 0;
    for (size_t k = 1; k < n; ++k) {
        if ((byte(i + k) & 0xc0) != 0x80) return 0;
        cp = cp << 6 | (byte(i + k) & 0x3fu);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
    return n;
}

}  // namespace

// A JSON string of the bytes s: valid UTF-8 as it is (a path "café.txt" stays so), but for the
// controls, ASCII's and the C1 ones (U+0080 to U+009F), escaped as \uXXXX; a byte that is no
// part of valid UTF-8, which a JSON string cannot hold, as the text \xHH (its backslash
// escaped), as the text output shows it.
std::string json_string(const std::string &s)
{
    std::string out = "\"";
    for (size_t i = 0; i < s.size();) {
        const auto c = static_cast<unsigned char>(s[i]);
        const size_t n = utf8_length(s, i);
        if (n == 0) {
            out += fmt::format("\\\\x{:02x}", c);
            i += 1;
            continue;
        }
        if (n == 1 && (c == '"' || c == '\\')) out += '\\', out += static_cast<char>(c);
        else if (n == 1 && (c < 0x20 || c == 0x7f)) out += fmt::format("\\u{:04x}", c);
        else if (n == 2 && c == 0xc2 && static_cast<unsigned char>(s[i + 1]) < 0xa0)
            out += fmt::format("\\u{:04x}", static_cast<unsigned char>(s[i + 1]));  // C1
        else out.append(s, i, n);
        i += n;
    }
    return out + "\"";
}

std::shared_ptr<const VType> parse_vtype(const std::string &text, size_t *at)
{
    Reader r{text};
    std::shared_ptr<const VType> t = r.type(0);
    if (t && r.i != text.size()) t = nullptr;
    if (at) *at = r.i;
    return t;
}

uint32_t image_bytes(const VType &t)
{
    switch (t.kind) {
    case VKind::void_: return 0;
    case VKind::string: return static_cast<uint32_t>(kStringBytes);
    case VKind::reference: return t.of->size;
    default: return t.size;
    }
}

std::string format_image(const VType &t, const unsigned char *image, size_t n) { return format(t, image, n, false); }

std::string format_image_json(const VType &t, const unsigned char *image, size_t n) { return format(t, image, n, true); }

}  // namespace liveprobe::trace
