#include "agent/printk_format.hpp"

#include <sys/types.h>

#include <cstdio>
#include <cstring>

namespace liveprobe::agent {
namespace {

enum : unsigned { kLeft = 1, kPlus = 2, kSpace = 4, kSpecial = 8, kZeroPad = 16 };

struct Spec {
    unsigned flags = 0;
    int width = -1;      // -1: none given
    int precision = -1;  // -1: none given
};

// Where the output goes: bytes past size - 1 are counted, not written.
struct Out {
    char *buf;
    size_t size;
    size_t pos = 0;

    void put(char c) noexcept
    {
        if (pos + 1 < size) buf[pos] = c;
        ++pos;
    }
    void put(const char *s, size_t n) noexcept
    {
        for (size_t i = 0; i < n; ++i) put(s[i]);
    }
    // n bytes of c: those past the buffer counted at once (a width of 8 million took as many
    // steps, inside a probe's handler).
    void pad(char c, long n) noexcept
    {
        for (; n > 0 && pos + 1 < size; --n) buf[pos++] = c;
        if (n > 0) pos += static_cast<size_t>(n);
    }
};

// The kernel's bounds of a width and a precision (lib/vsprintf.c FIELD_WIDTH_MAX,
// PRECISION_MAX): larger ones are cut to them. Written digits past it cannot overflow an int.
constexpr int kFieldMax = (1 << 23) - 1;
int clamp_field(long v) { return v > kFieldMax ? kFieldMax : v < -kFieldMax ? -kFieldMax : static_cast<int>(v); }
int add_digit(int v, char c) { return v > (kFieldMax - (c - '0')) / 10 ? kFieldMax : v * 10 + (c - '0'); }

constexpr char kHexLower[] = "0123456789abcdef";
constexpr char kHexUpper[] = "0123456789ABCDEF";

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_alnum(char c) { return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

size_t str_len(const char *s)
{
    size_t n = 0;
    while (s[n] != '\0') ++n;
    return n;
}

// A string within the field: cut to the precision, padded with spaces to the width.
void emit_string(Out &out, const char *s, size_t len, const Spec &sp)
{
    if (sp.precision >= 0 && len > static_cast<size_t>(sp.precision)) len = static_cast<size_t>(sp.precision);
    long padding = sp.width - static_cast<long>(len);
    if (!(sp.flags & kLeft)) out.pad(' ', padding);
    out.put(s, len);
    if (sp.flags & kLeft) out.pad(' ', padding);
}

// A NUL-terminated string read no further than the precision allows (it need not be terminated).
void emit_cstring(Out &out, const char *s, const Spec &sp)
{
    if (s == nullptr) s = "(null)";
    size_t len = 0;
    while ((sp.precision < 0 || len < static_cast<size_t>(sp.precision)) && s[len] != '\0') ++len;
    emit_string(out, s, len, sp);
}

// An integer (magnitude `v`, sign `negative`), as the kernel's number(): at least one digit, the
// precision as minimum digits, '#' adding 0x/0X (even to zero) or a leading octal 0.
void emit_number(Out &out, unsigned long long v, bool negative, bool is_signed, unsigned base, bool upper,
                 const Spec &sp)
{
    const char *digits = upper ? kHexUpper : kHexLower;
    char tmp[24];  // 64-bit octal: 22 digits
    int nd = 0;
    do {
        tmp[nd++] = digits[v % base];
        v /= base;
    } while (v != 0);
    char sign = 0;
    if (is_signed) sign = negative ? '-' : (sp.flags & kPlus) ? '+' : (sp.flags & kSpace) ? ' ' : 0;
    const char *prefix = "";
    if (sp.flags & kSpecial) {
        if (base == 16) prefix = upper ? "0X" : "0x";
        else if (base == 8 && !(nd == 1 && tmp[0] == '0') && sp.precision <= nd) prefix = "0";
    }
    size_t plen = str_len(prefix);
    long zeros = sp.precision > nd ? sp.precision - nd : 0;
    long total = (sign ? 1 : 0) + static_cast<long>(plen) + zeros + nd;
    if ((sp.flags & kZeroPad) && !(sp.flags & kLeft) && sp.precision < 0 && sp.width > total) {
        zeros += sp.width - total;
        total = sp.width;
    }
    if (!(sp.flags & kLeft)) out.pad(' ', sp.width - total);
    if (sign) out.put(sign);
    out.put(prefix, plen);
    out.pad('0', zeros);
    while (nd > 0) out.put(tmp[--nd]);
    if (sp.flags & kLeft) out.pad(' ', sp.width - total);
}

// Floating point (the kernel has none): snprintf of the one conversion, padded here.
template <typename T>
void emit_float(Out &out, T value, char conv, bool is_long, const Spec &sp)
{
    char spec[16];
    char tmp[400];  // %f of DBL_MAX with 60 decimals fits
    int precision = sp.precision > 60 ? 60 : sp.precision;
    int n = 0;
    for (int attempt = 0; attempt < 2; ++attempt) {
        size_t k = 0;
        spec[k++] = '%';
        if (sp.flags & kPlus) spec[k++] = '+';
        if (sp.flags & kSpace) spec[k++] = ' ';
        if (sp.flags & kSpecial) spec[k++] = '#';
        if (precision >= 0) {
            spec[k++] = '.';
            spec[k++] = '*';
        }
        if (is_long) spec[k++] = 'L';
        spec[k++] = conv;
        spec[k] = '\0';
        n = precision >= 0 ? snprintf(tmp, sizeof tmp, spec, precision, value) : snprintf(tmp, sizeof tmp, spec, value);
        if (n >= 0 && static_cast<size_t>(n) < sizeof tmp) break;
        conv = (conv == 'F') ? 'E' : 'e';  // a long double too large for %f: exponent form
    }
    size_t len = n < 0 ? 0 : static_cast<size_t>(n) < sizeof tmp ? static_cast<size_t>(n) : sizeof tmp - 1;
    long padding = sp.width - static_cast<long>(len);
    if (sp.flags & kLeft) {
        out.put(tmp, len);
        out.pad(' ', padding);
        return;
    }
    size_t head = (len > 0 && (tmp[0] == '-' || tmp[0] == '+' || tmp[0] == ' ')) ? 1 : 0;
    if ((sp.flags & kZeroPad) && head < len && is_digit(tmp[head])) {  // finite: zeros after sign and 0x
        if (head + 1 < len && tmp[head] == '0' && (tmp[head + 1] == 'x' || tmp[head + 1] == 'X')) head += 2;
        out.put(tmp, head);
        out.pad('0', padding);
        out.put(tmp + head, len - head);
        return;
    }
    out.pad(' ', padding);
    out.put(tmp, len);
}

// Writes `v` as exactly `digits` lowercase hex digits.
void put_hex(char *dst, uint64_t v, int digits)
{
    for (int i = digits - 1; i >= 0; --i, v >>= 4) dst[i] = kHexLower[v & 0xf];
}

// Plain %p: hex without 0x, 16 zero-padded digits unless a width is given.
void emit_plain_pointer(Out &out, const void *ptr, Spec sp)
{
    if (sp.width < 0) {
        sp.width = 16;
        sp.flags |= kZeroPad;
    }
    sp.flags &= ~kSpecial;
    emit_number(out, reinterpret_cast<uintptr_t>(ptr), false, false, 16, false, sp);
}

// %pE: non-printable bytes escaped (\n \r \t \v \f \a \e by name, others as \ooo).
void emit_escaped(Out &out, const unsigned char *s, long len)
{
    for (long i = 0; len < 0 ? s[i] != '\0' : i < len; ++i) {
        unsigned char c = s[i];
        if (c >= 0x20 && c < 0x7f) {
            out.put(static_cast<char>(c));
            continue;
        }
        const char *named = "\nn\rr\tt\vv\ff\aa\033e";
        char name = 0;
        for (const char *p = named; *p != '\0'; p += 2) {
            if (static_cast<unsigned char>(p[0]) == c) name = p[1];
        }
        out.put('\\');
        if (name != 0) {
            out.put(name);
        } else {
            out.put(static_cast<char>('0' + ((c >> 6) & 7)));
            out.put(static_cast<char>('0' + ((c >> 3) & 7)));
            out.put(static_cast<char>('0' + (c & 7)));
        }
    }
}

// A %p conversion with the extension at `ext` (the alphanumerics after 'p', already consumed).
void emit_pointer(Out &out, const char *ext, const void *ptr, const Spec &sp, Symbolizer sym)
{
    const uint64_t addr = reinterpret_cast<uintptr_t>(ptr);
    const char e = ext[0];
    char tmp[256];
    switch (e) {
    case 'S': case 's': case 'F': case 'f': case 'B': {
        size_t n = sym ? sym(addr, e == 'S' || e == 'F' || e == 'B', tmp, sizeof tmp) : 0;
        if (n > 0) return emit_string(out, tmp, n > sizeof tmp ? sizeof tmp : n, sp);
        // An address no symbol names: "0x" and its hex digits.
        return emit_number(out, addr, false, false, 16, false, Spec{kSpecial | (sp.flags & kLeft), sp.width, -1});
    }
    case 'x': case 'K':
        emit_plain_pointer(out, ptr, sp);
        return;
    default:
        break;
    }
    const bool known = e == 'a' || e == 'h' || e == 'E' || e == 'M' || e == 'm' ||
                       ((e == 'I' || e == 'i') && ext[1] == '4');
    if (e != 0 && ptr == nullptr) return emit_cstring(out, "(null)", sp);
    if (!known) return emit_plain_pointer(out, ptr, sp);

    const auto *bytes = static_cast<const unsigned char *>(ptr);
    size_t n = 0;
    switch (e) {
    case 'a':  // %pa %pap %pad: the value of a phys_addr_t / dma_addr_t
        tmp[0] = '0';
        tmp[1] = 'x';
        {
            unsigned long v;  // copied: a module's field need not be aligned (a packed struct)
            std::memcpy(&v, ptr, sizeof v);
            put_hex(tmp + 2, v, 16);
        }
        n = 18;
        break;
    case 'h': {  // hex dump: the width is the length
        char sep = ext[1] == 'C' ? ':' : ext[1] == 'D' ? '-' : ext[1] == 'N' ? 0 : ' ';
        int len = sp.width < 0 ? 1 : sp.width > 64 ? 64 : sp.width;
        for (int i = 0; i < len; ++i) {
            if (i > 0 && sep != 0) out.put(sep);
            out.put(kHexLower[bytes[i] >> 4]);
            out.put(kHexLower[bytes[i] & 0xf]);
        }
        return;
    }
    case 'E':  // a NUL-terminated string, or (%*pE) a buffer of the width's length
        emit_escaped(out, bytes, sp.width);
        return;
    case 'I': case 'i':
        for (int i = 0; i < 4; ++i) {
            if (i > 0) tmp[n++] = '.';
            unsigned v = bytes[i];
            if (e == 'i' || v >= 100) tmp[n++] = static_cast<char>('0' + v / 100);
            if (e == 'i' || v >= 10) tmp[n++] = static_cast<char>('0' + v / 10 % 10);
            tmp[n++] = static_cast<char>('0' + v % 10);
        }
        break;
    default: {  // 'M' / 'm': a MAC address; R reversed, F with '-'
        bool reversed = false;
        char sep = e == 'm' ? 0 : ':';
        for (const char *p = ext + 1; is_alnum(*p); ++p) {
            if (*p == 'R') reversed = true;
            if (*p == 'F' && e == 'M') sep = '-';
        }
        for (int i = 0; i < 6; ++i) {
            if (i > 0 && sep != 0) tmp[n++] = sep;
            unsigned char b = bytes[reversed ? 5 - i : i];
            tmp[n++] = kHexLower[b >> 4];
            tmp[n++] = kHexLower[b & 0xf];
        }
        break;
    }
    }
    emit_string(out, tmp, n, sp);
}

bool is_conversion(char c)
{
    for (const char *p = "diuoxXcspneEfFgGaA"; *p != '\0'; ++p) {
        if (*p == c) return true;
    }
    return false;
}

}  // namespace

size_t kernel_vsnprintf(char *buf, size_t size, const char *fmt, va_list ap, Symbolizer sym) noexcept
{
    Out out{buf, size};
    va_list args;
    va_copy(args, ap);
    while (*fmt != '\0') {
        if (*fmt != '%') {
            out.put(*fmt++);
            continue;
        }
        const char *start = fmt++;
        Spec sp;
        static constexpr char kFlagChars[] = "-+ #0";  // in the order of the flag bits
        for (const char *f; *fmt != '\0' && (f = strchr(kFlagChars, *fmt)) != nullptr; ++fmt) {
            sp.flags |= 1u << (f - kFlagChars);
        }
        bool star_width = false, star_precision = false;
        if (*fmt == '*') {
            star_width = true;
            ++fmt;
        } else if (is_digit(*fmt)) {
            sp.width = 0;
            while (is_digit(*fmt)) sp.width = add_digit(sp.width, *fmt++);
        }
        if (*fmt == '.') {
            ++fmt;
            sp.precision = 0;
            if (*fmt == '*') {
                star_precision = true;
                ++fmt;
            } else {
                while (is_digit(*fmt)) sp.precision = add_digit(sp.precision, *fmt++);
            }
        }
        // Length: 1 hh, 2 h, 3 l, 4 ll/q/L, 5 z/Z, 6 t, 7 j.
        int length = 0;
        switch (*fmt) {
        case 'h': length = fmt[1] == 'h' ? 1 : 2; fmt += fmt[1] == 'h' ? 2 : 1; break;
        case 'l': length = fmt[1] == 'l' ? 4 : 3; fmt += fmt[1] == 'l' ? 2 : 1; break;
        case 'q': case 'L': length = 4; ++fmt; break;
        case 'z': case 'Z': length = 5; ++fmt; break;
        case 't': length = 6; ++fmt; break;
        case 'j': length = 7; ++fmt; break;
        default: break;
        }
        const char conv = *fmt;
        if (conv == '\0') break;  // a lone '%' (or an unfinished spec) at the end: nothing more
        ++fmt;
        if (conv == '%') {
            out.put('%');
            continue;
        }
        if (!is_conversion(conv)) {  // printed as written, consuming nothing
            out.put(start, static_cast<size_t>(fmt - start));
            continue;
        }
        if (star_width) {
            sp.width = clamp_field(va_arg(args, int));
            if (sp.width < 0) {
                sp.flags |= kLeft;
                sp.width = -sp.width;
            }
        }
        if (star_precision) {
            sp.precision = clamp_field(va_arg(args, int));
            if (sp.precision < 0) sp.precision = -1;
        }
        if (sp.flags & kLeft) sp.flags &= ~kZeroPad;

        switch (conv) {
        case 'd': case 'i': {
            long long v;
            switch (length) {
            case 1: v = static_cast<signed char>(va_arg(args, int)); break;
            case 2: v = static_cast<short>(va_arg(args, int)); break;
            case 3: v = va_arg(args, long); break;
            case 4: v = va_arg(args, long long); break;
            case 5: v = va_arg(args, ssize_t); break;
            case 6: v = va_arg(args, ptrdiff_t); break;
            case 7: v = va_arg(args, intmax_t); break;
            default: v = va_arg(args, int); break;
            }
            auto mag = static_cast<unsigned long long>(v);
            if (v < 0) mag = 0ULL - mag;
            emit_number(out, mag, v < 0, true, 10, false, sp);
            break;
        }
        case 'u': case 'o': case 'x': case 'X': {
            unsigned long long v;
            switch (length) {
            case 1: v = static_cast<unsigned char>(va_arg(args, unsigned)); break;
            case 2: v = static_cast<unsigned short>(va_arg(args, unsigned)); break;
            case 3: v = va_arg(args, unsigned long); break;
            case 4: v = va_arg(args, unsigned long long); break;
            case 5: v = va_arg(args, size_t); break;
            case 6: v = static_cast<unsigned long long>(va_arg(args, ptrdiff_t)); break;
            case 7: v = va_arg(args, uintmax_t); break;
            default: v = va_arg(args, unsigned); break;
            }
            unsigned base = conv == 'u' ? 10 : conv == 'o' ? 8 : 16;
            emit_number(out, v, false, false, base, conv == 'X', sp);
            break;
        }
        case 'c': {
            char c = static_cast<char>(va_arg(args, int));
            Spec cs = sp;
            cs.precision = -1;
            emit_string(out, &c, 1, cs);
            break;
        }
        case 's':
            emit_cstring(out, va_arg(args, const char *), sp);
            break;
        case 'p': {
            const void *ptr = va_arg(args, const void *);
            const char *ext = fmt;
            while (is_alnum(*fmt)) ++fmt;  // the kernel takes every alphanumeric after %p
            emit_pointer(out, ext, ptr, sp, sym);
            break;
        }
        case 'n':  // refused, as by the kernel: the pointer is consumed, nothing is written
            (void)va_arg(args, void *);
            break;
        default:  // e E f F g G a A
            if (length == 4) emit_float(out, va_arg(args, long double), conv, true, sp);
            else emit_float(out, va_arg(args, double), conv, false, sp);
            break;
        }
    }
    va_end(args);
    if (size > 0) buf[out.pos < size ? out.pos : size - 1] = '\0';
    return out.pos;
}

size_t kernel_snprintf(Symbolizer sym, char *buf, size_t size, const char *fmt, ...) noexcept
{
    va_list ap;
    va_start(ap, fmt);
    size_t n = kernel_vsnprintf(buf, size, fmt, ap, sym);
    va_end(ap);
    return n;
}

}  // namespace liveprobe::agent
