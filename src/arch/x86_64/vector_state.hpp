// Saving the extended (vector) state around handlers that may use it, on the jump path.
// (The breakpoint path needs none of this: the kernel saves it in the signal frame.)
//
// XSAVE/XRSTOR of every component enabled in XCR0 (x87, SSE, AVX, AVX-512 zmm and k
// registers...), into a 64-byte aligned area on the caller's stack. Built into code compiled
// without vector instructions, so nothing touches vector state before it is saved.
#pragma once

#include <cstddef>
#include <cstdint>

namespace liveprobe::arch {

// Bytes an XSAVE area needs for XCR0's components (CPUID 0xD.0 EBX), plus alignment slack.
// Computed once at load; 0 when the CPU has no XSAVE (then FXSAVE's 512 bytes are used).
size_t vector_area_size() noexcept;

inline void vector_save(void *area) noexcept
{
    auto *a = static_cast<uint8_t *>(area);
    // The XSAVE header (bytes 512..575) must be clean for XRSTOR; XSAVE writes only its first
    // 8 bytes.
    for (int i = 512; i < 576; i += 8) *reinterpret_cast<volatile uint64_t *>(a + i) = 0;
    if (vector_area_size() > 512)
        asm volatile("xsave64 (%0)" ::"r"(a), "a"(~0u), "d"(~0u) : "memory");
    else
        asm volatile("fxsave64 (%0)" ::"r"(a) : "memory");
}

inline void vector_restore(const void *area) noexcept
{
    if (vector_area_size() > 512)
        asm volatile("xrstor64 (%0)" ::"r"(area), "a"(~0u), "d"(~0u) : "memory");
    else
        asm volatile("fxrstor64 (%0)" ::"r"(area) : "memory");
}

}  // namespace liveprobe::arch
