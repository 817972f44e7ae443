// The kernel-style formatter behind printk: vsnprintf with the format rules of the Linux kernel's
// lib/vsprintf.c, as probe modules written for the kernel expect them.
//
// Standard conversions (d i u o x X c s % and e f g a, with flags, width, precision and the
// length modifiers hh h l ll z Z t j L q), `%n` refused (its pointer consumed, nothing written),
// an unknown conversion printed literally, and the kernel's %p extensions: symbols (%pS %ps %pF
// %pf %pB %pSR), %px %pK, %pa, hex dumps (%ph %phC %phD %phN), IPv4 (%pI4 %pi4), MAC addresses
// (%pM %pm, with R and F), escaped strings (%pE). Plain %p prints the address unhashed, as old
// kernels did: 16 hex digits, no "0x".
//
// Async-signal-safe: no allocation, no lock, nothing but the stack (floating point conversions go
// through snprintf of one conversion into a stack buffer).
#pragma once

#include <cstdarg>
#include <cstddef>
#include <cstdint>

namespace liveprobe::agent {

// Writes the symbol text for a %p symbol extension into buf (at most n bytes, no NUL needed),
// returns the number of bytes written, or 0 when the address has no known symbol.
// `with_offset`: "name+0xOFF/0xSIZE" (as the kernel's %pS), else "name" (as %ps).
using Symbolizer = size_t (*)(uint64_t addr, bool with_offset, char *buf, size_t n);

// Formats like the kernel's vsnprintf: always NUL-terminates when size > 0, returns the length the
// whole output would have. `sym` may be nullptr: symbol extensions then print as for an unknown
// address ("0x" and the hex address).
size_t kernel_vsnprintf(char *buf, size_t size, const char *fmt, va_list ap, Symbolizer sym) noexcept;
size_t kernel_snprintf(Symbolizer sym, char *buf, size_t size, const char *fmt, ...) noexcept
    __attribute__((format(printf, 4, 5)));

}  // namespace liveprobe::agent
