// Saving and restoring the vector state around handlers that may use it (the jump path; the
// breakpoint path gets it from the kernel's signal frame).
//
// Two implementations, chosen once at load:
//   explicit: lp_vec_save/lp_vec_restore (vector_save.S), register moves guided by XINUSE,
//             a few dozen cycles;
//   XSAVE:    xsave64/xrstor64 of every component (fxsave64 without XSAVE), about 300
//             cycles, for CPUs or XCR0 settings the explicit routine does not cover.
// LIVEPROBE_VECTOR_SAVE=xsave in the environment forces the second (tests use it).
#pragma once

#include <alloca.h>

#include <cstddef>
#include <cstdint>

extern "C" void lp_vec_save(void *area) noexcept;
extern "C" void lp_vec_restore(const void *area) noexcept;

namespace liveprobe::arch {

enum class VectorSave : uint8_t { kExplicit, kXsave, kFxsave };

// The chosen implementation (set at load, before any probe exists).
extern const VectorSave g_vector_save;

// Bytes of the save area, which must be 64-aligned.
size_t vector_area_size() noexcept;

// Which implementation is in use, for diagnostics and tests: "explicit", "xsave", "fxsave".
const char *vector_save_name() noexcept;

// Where xmm0 lies in a save area, and the distance between xmm i and i + 1.
inline uint8_t *saved_xmm0(void *area, uint64_t *stride) noexcept
{
    auto *a = static_cast<uint8_t *>(area);
    if (g_vector_save == VectorSave::kExplicit) {
        *stride = 64;
        return a + 128;  // vector_save.S's layout
    }
    *stride = 16;
    return a + 160;  // the FXSAVE legacy region (XSAVE's too)
}

// Where st(0) lies in a save area (st(i) 16 bytes further each), or null when the x87 stack
// was empty and not saved (vector_save.S saves it only then; its flag is at byte 16).
inline uint8_t *saved_st0(void *area) noexcept
{
    auto *a = static_cast<uint8_t *>(area);
    if (g_vector_save == VectorSave::kExplicit) return a[16] ? a + 2176 + 32 : nullptr;
    return a + 32;  // the FXSAVE legacy region (XSAVE's too)
}

inline void vector_save(void *area) noexcept
{
    auto *a = static_cast<uint8_t *>(area);
    switch (g_vector_save) {
    case VectorSave::kExplicit:
        lp_vec_save(area);
        break;
    case VectorSave::kXsave:
        // The XSAVE header (bytes 512..575) must be clean for XRSTOR; XSAVE writes only its
        // first 8 bytes.
        for (int i = 512; i < 576; i += 8) *reinterpret_cast<volatile uint64_t *>(a + i) = 0;
        asm volatile("xsave64 (%0)" ::"r"(a), "a"(~0u), "d"(~0u) : "memory");
        break;
    case VectorSave::kFxsave:
        asm volatile("fxsave64 (%0)" ::"r"(a) : "memory");
        break;
    }
}

inline void vector_restore(const void *area) noexcept
{
    switch (g_vector_save) {
    case VectorSave::kExplicit:
        lp_vec_restore(area);
        break;
    case VectorSave::kXsave:
        asm volatile("xrstor64 (%0)" ::"r"(area), "a"(~0u), "d"(~0u) : "memory");
        break;
    case VectorSave::kFxsave:
        asm volatile("fxrstor64 (%0)" ::"r"(area) : "memory");
        break;
    }
}

// Runs body(area) with the vector state saved in `area` around it, and returns what it
// returns. The area is alloca'd (its size is the CPU's) in the caller's frame: always
// inlined, so callers keep it out of their common path (a function of its own).
template <typename Body>
[[gnu::always_inline]] inline auto with_vectors_saved(Body body) noexcept
{
    auto raw = reinterpret_cast<uintptr_t>(alloca(vector_area_size() + 64));
    void *area = reinterpret_cast<void *>((raw + 63) & ~uintptr_t(63));
    vector_save(area);
    struct Restore {
        void *area;
        ~Restore() { vector_restore(area); }
    } restore{area};
    return body(area);
}

// The same when `save`, else body(nullptr) directly.
template <typename Body>
inline auto maybe_with_vectors_saved(bool save, Body body) noexcept
{
    if (!save) return body(nullptr);
    return with_vectors_saved(body);
}

}  // namespace liveprobe::arch
