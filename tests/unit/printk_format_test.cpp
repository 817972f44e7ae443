// The kernel-style formatter behind printk (src/agent/printk_format.hpp): standard conversions
// with their flags, widths, precisions and sizes, the kernel's %p extensions, %n refused, unknown
// conversions printed as written, and vsnprintf's truncation and return value.
#include <gtest/gtest.h>

#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "agent/printk_format.hpp"

using liveprobe::agent::kernel_snprintf;
using liveprobe::agent::kernel_vsnprintf;
using liveprobe::agent::Symbolizer;

namespace {

constexpr uint64_t kDoFork = 0xffffffff81084e30;

// Knows one symbol, do_fork, at kDoFork + 4.
size_t fake_symbolizer(uint64_t addr, bool with_offset, char *buf, size_t n)
{
    if (addr != kDoFork + 4) return 0;
    const char *text = with_offset ? "do_fork+0x4/0x2a" : "do_fork";
    size_t len = strlen(text) < n ? strlen(text) : n;
    memcpy(buf, text, len);
    return len;
}

// Formats with `sym` through kernel_vsnprintf, checking that the returned length is the output's.
// Not declared printf-like: the kernel's formats (%pS, %y, a trailing %) are not standard.
std::string kfmt_with(Symbolizer sym, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    size_t n = kernel_vsnprintf(buf, sizeof buf, fmt, ap, sym);
    va_end(ap);
    EXPECT_EQ(n, strlen(buf)) << fmt;
    return std::string(buf);
}

template <typename... Args>
std::string kfmt(const char *fmt, Args... args)
{
    return kfmt_with(fake_symbolizer, fmt, args...);
}

void *as_ptr(uint64_t v) { return reinterpret_cast<void *>(static_cast<uintptr_t>(v)); }

}  // namespace

TEST(PrintkFormat, StandardConversions)
{
    char buf[128];
    size_t n = kernel_snprintf(nullptr, buf, sizeof buf, "%d %i %u %x %X %o %c %s %%", -42, 7, 3000000000u,
                               0xbeefu, 0xbeefu, 8u, 'z', "hi");
    EXPECT_STREQ(buf, "-42 7 3000000000 beef BEEF 10 z hi %");
    EXPECT_EQ(n, strlen(buf));
    EXPECT_EQ(kfmt("plain text"), "plain text");
    EXPECT_EQ(kfmt(""), "");
    EXPECT_EQ(kfmt("%d|%d", 0, -2147483647 - 1), "0|-2147483648");
}

TEST(PrintkFormat, FlagsWidthPrecision)
{
    EXPECT_EQ(kfmt("%5d|%-5d|%05d|%+d|% d", 42, 42, 42, 42, 42), "   42|42   |00042|+42| 42");
    EXPECT_EQ(kfmt("%05d|%+05d|%-05d|", -42, 42, 42), "-0042|+0042|42   |");
    EXPECT_EQ(kfmt("%.5d|%8.5d|%-+6d|", 42, -42, 5), "00042|  -00042|+5    |");
    EXPECT_EQ(kfmt("%.3s", "abcdef"), "abc");
    EXPECT_EQ(kfmt("%5s|%-5s|%.0s|", "ab", "ab", "ab"), "   ab|ab   ||");
    EXPECT_EQ(kfmt("%3c|%-3c|", 'x', 'y'), "  x|y  |");
    EXPECT_EQ(kfmt("%#x|%#X|%#o|%#x|%#o", 255u, 255u, 8u, 0u, 0u), "0xff|0XFF|010|0x0|0");
    EXPECT_EQ(kfmt("%#010x|%08x", 255u, 0xabcu), "0x000000ff|00000abc");
}

TEST(PrintkFormat, StarWidthAndPrecision)
{
    EXPECT_EQ(kfmt("%*d", 6, 42), "    42");
    EXPECT_EQ(kfmt("%-*.*s|", 6, 2, "abcdef"), "ab    |");
    EXPECT_EQ(kfmt("%*d|", -4, 7), "7   |");           // a negative width: left-justified
    EXPECT_EQ(kfmt("%.*s|", -1, "abc"), "abc|");       // a negative precision: none
    EXPECT_EQ(kfmt("%0*d", 5, 42), "00042");
}

TEST(PrintkFormat, LengthModifiers)
{
    EXPECT_EQ(kfmt("%lld", (long long)1 << 40), "1099511627776");
    EXPECT_EQ(kfmt("%llx|%qx", (long long)1 << 40, (long long)1 << 36), "10000000000|1000000000");
    EXPECT_EQ(kfmt("%qd", -((long long)1 << 40)), "-1099511627776");
    EXPECT_EQ(kfmt("%ld|%lu", -((long)1 << 40), ~0UL), "-1099511627776|18446744073709551615");
    EXPECT_EQ(kfmt("%hhu|%hhd|%hhx", (signed char)-1, 257, 0x1ff), "255|1|ff");
    EXPECT_EQ(kfmt("%hu|%hd|%hx", (short)-1, 65537, 0x12345), "65535|1|2345");
    EXPECT_EQ(kfmt("%zu|%zd|%Zu", SIZE_MAX, (ssize_t)-5, (size_t)1 << 40),
              "18446744073709551615|-5|1099511627776");
    EXPECT_EQ(kfmt("%td|%tx", (ptrdiff_t)-((ptrdiff_t)1 << 40), (ptrdiff_t)1 << 40), "-1099511627776|10000000000");
    EXPECT_EQ(kfmt("%jd|%ju", INTMAX_MIN, UINTMAX_MAX), "-9223372036854775808|18446744073709551615");
    // Without a size, only the int is read: the next argument still comes out right.
    EXPECT_EQ(kfmt("%d %s", 5, "next"), "5 next");
}

TEST(PrintkFormat, NullString)
{
    EXPECT_EQ(kfmt("%s", (const char *)nullptr), "(null)");
    EXPECT_EQ(kfmt("%8s|%.3s", (const char *)nullptr, (const char *)nullptr), "  (null)|(nu");
}

TEST(PrintkFormat, PlainPointer)
{
    EXPECT_EQ(kfmt("0x%p", as_ptr(0x401136)), "0x0000000000401136");
    EXPECT_EQ(kfmt("%p", (void *)nullptr), "0000000000000000");
    EXPECT_EQ(kfmt("%p", as_ptr(0xffffffff81084e30)), "ffffffff81084e30");
    EXPECT_EQ(kfmt("%8p|%-8p|%08p", as_ptr(0x401136), as_ptr(0x401136), as_ptr(0x401136)),
              "  401136|401136  |00401136");
}

TEST(PrintkFormat, SymbolExtensions)
{
    void *known = as_ptr(kDoFork + 4);
    EXPECT_EQ(kfmt("%pS", known), "do_fork+0x4/0x2a");
    EXPECT_EQ(kfmt("%pF", known), "do_fork+0x4/0x2a");
    EXPECT_EQ(kfmt("%pB", known), "do_fork+0x4/0x2a");
    EXPECT_EQ(kfmt("%pSR", known), "do_fork+0x4/0x2a");
    EXPECT_EQ(kfmt("%ps", known), "do_fork");
    EXPECT_EQ(kfmt("%pf", known), "do_fork");
    EXPECT_EQ(kfmt("[%10ps|%-10ps]", known, known), "[   do_fork|do_fork   ]");
    // An address no symbol names: 0x and its hex digits, no padding.
    EXPECT_EQ(kfmt("%pS|%ps|%pB", as_ptr(0x1234), as_ptr(0x1234), as_ptr(0x1234)), "0x1234|0x1234|0x1234");
    EXPECT_EQ(kfmt("%pS", (void *)nullptr), "0x0");
    // Without a symbolizer, every address is unknown.
    EXPECT_EQ(kfmt_with(nullptr, "%pS %ps", known, known), "0xffffffff81084e34 0xffffffff81084e34");
    // Every alphanumeric after %p is taken: "%pfoo" is %pf, "oo" swallowed.
    EXPECT_EQ(kfmt("%pfoo bar", known), "do_fork bar");
}

TEST(PrintkFormat, UnhashedAndPhysAddr)
{
    EXPECT_EQ(kfmt("%px", as_ptr(0x401136)), "0000000000401136");
    EXPECT_EQ(kfmt("%pK", as_ptr(0x401136)), "0000000000401136");
    EXPECT_EQ(kfmt("%px|%pK", (void *)nullptr, (void *)nullptr), "0000000000000000|0000000000000000");
    unsigned long phys = 0xfee00000;
    EXPECT_EQ(kfmt("%pa", &phys), "0x00000000fee00000");
    EXPECT_EQ(kfmt("%pap", &phys), "0x00000000fee00000");
    EXPECT_EQ(kfmt("%pad", &phys), "0x00000000fee00000");
    EXPECT_EQ(kfmt("%pa", (void *)nullptr), "(null)");
}

TEST(PrintkFormat, HexDump)
{
    const unsigned char bytes[] = {0x01, 0xab, 0xff, 0x10};
    EXPECT_EQ(kfmt("%ph", bytes), "01");
    EXPECT_EQ(kfmt("%*ph", 4, bytes), "01 ab ff 10");
    EXPECT_EQ(kfmt("%4ph", bytes), "01 ab ff 10");
    EXPECT_EQ(kfmt("%*phC", 4, bytes), "01:ab:ff:10");
    EXPECT_EQ(kfmt("%*phN", 4, bytes), "01abff10");
    EXPECT_EQ(kfmt("%*phD", 4, bytes), "01-ab-ff-10");
    EXPECT_EQ(kfmt("[%*ph]", 0, bytes), "[]");
    unsigned char big[100];
    memset(big, 0x5a, sizeof big);
    std::string dump;
    for (int i = 0; i < 64; ++i) dump += "5a";
    EXPECT_EQ(kfmt("%*phN", 100, big), dump);  // at most 64 bytes
    EXPECT_EQ(kfmt("%*ph", 4, (void *)nullptr), "(null)");
}

TEST(PrintkFormat, Ipv4)
{
    const unsigned char a[] = {1, 2, 3, 4};
    const unsigned char b[] = {192, 168, 10, 255};
    EXPECT_EQ(kfmt("%pI4", a), "1.2.3.4");
    EXPECT_EQ(kfmt("%pI4", b), "192.168.10.255");
    EXPECT_EQ(kfmt("%pi4", a), "001.002.003.004");
    EXPECT_EQ(kfmt("%pi4", b), "192.168.010.255");
    EXPECT_EQ(kfmt("%pI4", (void *)nullptr), "(null)");
    EXPECT_EQ(kfmt("%10pI4|%-10pI4|", (void *)nullptr, a), "    (null)|1.2.3.4   |");
}

TEST(PrintkFormat, MacAddress)
{
    const unsigned char mac[] = {0x00, 0x1a, 0x2b, 0x3c, 0x4d, 0xff};
    EXPECT_EQ(kfmt("%pM", mac), "00:1a:2b:3c:4d:ff");
    EXPECT_EQ(kfmt("%pm", mac), "001a2b3c4dff");
    EXPECT_EQ(kfmt("%pMR", mac), "ff:4d:3c:2b:1a:00");
    EXPECT_EQ(kfmt("%pMF", mac), "00-1a-2b-3c-4d-ff");
    EXPECT_EQ(kfmt("%pM", (void *)nullptr), "(null)");
}

TEST(PrintkFormat, EscapedString)
{
    EXPECT_EQ(kfmt("%pE", "plain"), "plain");
    EXPECT_EQ(kfmt("%pE", "a\tb\x01" "c\\d\n\x7f\xff"), "a\\tb\\001c\\d\\n\\177\\377");
    EXPECT_EQ(kfmt("%*pE|", 2, "\x02xyz"), "\\002x|");  // with a width: a buffer of that length
    EXPECT_EQ(kfmt("%pE", (void *)nullptr), "(null)");
}

TEST(PrintkFormat, OtherExtensionsArePlainPointers)
{
    EXPECT_EQ(kfmt("%pZ", as_ptr(0x401136)), "0000000000401136");
    EXPECT_EQ(kfmt("%pI6", as_ptr(0x401136)), "0000000000401136");
    EXPECT_EQ(kfmt("%pZ", (void *)nullptr), "(null)");
    EXPECT_EQ(kfmt("%p-%p.", as_ptr(1), as_ptr(2)), "0000000000000001-0000000000000002.");
}

TEST(PrintkFormat, PercentNWritesNothing)
{
    int n = 77;
    EXPECT_EQ(kfmt("ab%ncd%d", &n, 5), "abcd5");
    EXPECT_EQ(n, 77);
    long ln = 78;
    EXPECT_EQ(kfmt("x%lny", &ln), "xy");
    EXPECT_EQ(ln, 78);
}

TEST(PrintkFormat, Truncation)
{
    char buf[16];
    memset(buf, 'X', sizeof buf);
    EXPECT_EQ(kernel_snprintf(nullptr, buf, 8, "%s %d", "hello world", 12345), 17u);
    EXPECT_STREQ(buf, "hello w");
    EXPECT_EQ(buf[8], 'X');
    // Size 1: only the NUL.
    memset(buf, 'X', sizeof buf);
    EXPECT_EQ(kernel_snprintf(nullptr, buf, 1, "%pS", as_ptr(0x1234)), 6u);
    EXPECT_EQ(buf[0], '\0');
    EXPECT_EQ(buf[1], 'X');
    // Size 0: nothing written, the length still returned.
    memset(buf, 'X', sizeof buf);
    EXPECT_EQ(kernel_snprintf(nullptr, buf, 0, "abc%d", 42), 5u);
    EXPECT_EQ(buf[0], 'X');
    EXPECT_EQ(kernel_snprintf(nullptr, nullptr, 0, "%*d", 40, 1), 40u);
    // Exactly fitting.
    EXPECT_EQ(kernel_snprintf(nullptr, buf, 4, "abc"), 3u);
    EXPECT_STREQ(buf, "abc");
}

TEST(PrintkFormat, FloatingPoint)
{
    EXPECT_EQ(kfmt("%f", 1.5), "1.500000");
    EXPECT_EQ(kfmt("%Lf", 2.25L), "2.250000");
    EXPECT_EQ(kfmt("%.2f|%08.2f|%-8.1f|%+.1f", 3.14159, -3.14159, 1.5, 2.0), "3.14|-0003.14|1.5     |+2.0");
    EXPECT_EQ(kfmt("%e|%E|%g|%G", 12345.678, 12345.678, 0.0001, 1e-10), "1.234568e+04|1.234568E+04|0.0001|1E-10");
    EXPECT_EQ(kfmt("%a|%A|%010a", 1.0, 1.0, 1.0), "0x1p+0|0X1P+0|0x00001p+0");
    EXPECT_EQ(kfmt("%8f|%08f", __builtin_inf(), -__builtin_inf()), "     inf|    -inf");
    EXPECT_EQ(kfmt("%.1f %d", 0.25, 7), "0.2 7");  // the next argument still read right
    // Too long for %f: the exponent form.
    EXPECT_EQ(kfmt("%Lf", 1e400L), "1.000000e+400");
}

TEST(PrintkFormat, UnknownAndTrailing)
{
    EXPECT_EQ(kfmt("%y"), "%y");
    EXPECT_EQ(kfmt("a%yb%d", 3), "a%yb3");      // consumes no argument
    EXPECT_EQ(kfmt("%5y|%*y %d", 9), "%5y|%*y 9");
    EXPECT_EQ(kfmt("abc%"), "abc");
    EXPECT_EQ(kfmt("abc%-5"), "abc");
    EXPECT_EQ(kfmt("%"), "");
    EXPECT_EQ(kfmt("100%%"), "100%");
}

// Widths and precisions past the kernel's bound (issue 32: a 10-digit width overflowed an int,
// and %2147483647d padded 2^31 times inside a handler): cut to (1 << 23) - 1, as the kernel
// cuts them, and the padding past the buffer counted, not written byte by byte.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-overflow"  // the point: widths no printf would take
TEST(PrintkFormat, HugeWidthsAreCutAndCheap)
{
    char buf[16];
    const size_t cap = (size_t{1} << 23) - 1;
    EXPECT_EQ(kernel_snprintf(nullptr, buf, sizeof buf, "%2147483647d", 5), cap);
    EXPECT_STREQ(buf, "               ");
    EXPECT_EQ(kernel_snprintf(nullptr, buf, sizeof buf, "%09999999999d|", 5), cap + 1);
    EXPECT_STREQ(buf, "000000000000000");
    EXPECT_EQ(kernel_snprintf(nullptr, buf, sizeof buf, "%.99999999999d", 5), cap);
    EXPECT_EQ(kernel_snprintf(nullptr, buf, sizeof buf, "%*d", -2147483647 - 1, 5), cap);
    EXPECT_STREQ(buf, "5              ");
}
#pragma GCC diagnostic pop
