// Fuzzing printk's formatter (agent/printk_format.hpp, what modules' printk runs inside a
// handler; issue 32 item 4): any format, its arguments pointers to memory of the harness's (a
// module passes its own), is formatted into the buffer in bounded time, never past it. The
// input: the format (up to a NUL, if any).
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "agent/printk_format.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    using liveprobe::agent::kernel_snprintf;
    const auto *nul = static_cast<const uint8_t *>(std::memchr(data, 0, size));
    const std::string fmt(reinterpret_cast<const char *>(data), nul ? static_cast<size_t>(nul - data) : size);
    // %s and %p take pointers: every argument is a valid string, whose address is the number.
    // A conversion takes up to 3 (a * width, a * precision, the value): a format with more of
    // them than 40 arguments serve (34 on the stack, shared with the doubles %f takes past the
    // 8 in registers) reads past them, as printk would, and is not tried.
    size_t percents = 0;
    for (char c : fmt) percents += c == '%';
    if (percents > 10) return 0;
    // Each points into 16 MiB of the harness's, a short string at its start: %*pE and %*ph read
    // as many bytes as the width says (up to the kernel's bound, 8 MiB), as a module's buffer.
    static char *const memory = [] {
        char *m = static_cast<char *>(std::calloc(size_t{16} << 20, 1));
        std::memcpy(m, "abc\0de\0fghij", 13);
        return m;
    }();
    uintptr_t a[8];
    for (int i = 0; i < 8; ++i) a[i] = reinterpret_cast<uintptr_t>(memory + (i % 3) * 4);
    char buf[512];
    std::memset(buf, 0x5a, sizeof buf);
    const size_t room = 256;
    kernel_snprintf(nullptr, buf, room, fmt.c_str(), a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[0], a[1], a[2],
                    a[3], a[4], a[5], a[6], a[7], a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[0], a[1], a[2], a[3],
                    a[4], a[5], a[6], a[7], a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]);
    for (size_t i = room; i < sizeof buf; ++i)
        if (buf[i] != 0x5a) std::abort();  // written past the buffer
    return 0;
}
