#include "arch/x86_64/vector_state.hpp"

#include <cpuid.h>

#include <cstdlib>
#include <cstring>

// Read by vector_save.S: zmm16-31 and k0-7 exist.
extern "C" {
bool lp_vec_has_avx512 = false;
}

namespace liveprobe::arch {
namespace {

constexpr uint64_t kX87 = 1, kSse = 2, kAvx = 4, kAvx512 = 0xe0, kPkru = 0x200;
constexpr size_t kExplicitAreaSize = 2688;  // vector_save.S

uint64_t xcr0()
{
    uint32_t lo, hi;
    asm volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (uint64_t(hi) << 32) | lo;
}

VectorSave choose()
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_OSXSAVE)) return VectorSave::kFxsave;
    const char *env = secure_getenv("LIVEPROBE_VECTOR_SAVE");
    if (env && std::strcmp(env, "xsave") == 0) return VectorSave::kXsave;
    uint64_t x = xcr0();
    __cpuid_count(0xd, 1, a, b, c, d);
    bool xinuse = a & (1u << 2);  // XGETBV with ECX = 1
    // Components the explicit routine knows (PKRU: user code changes it only with WRPKRU).
    bool known = (x & ~(kX87 | kSse | kAvx | kAvx512 | kPkru)) == 0 && (x & (kX87 | kSse | kAvx)) == 7;
    if (!xinuse || !known) return VectorSave::kXsave;
    if (x & kAvx512) {
        __cpuid_count(7, 0, a, b, c, d);
        bool f = b & (1u << 16), bw = b & (1u << 30);
        if ((x & kAvx512) != kAvx512 || !f || !bw) return VectorSave::kXsave;
        lp_vec_has_avx512 = true;
    }
    return VectorSave::kExplicit;
}

size_t xsave_size()
{
    unsigned a, b, c, d;
    __cpuid_count(0xd, 0, a, b, c, d);
    return b > 512 ? b : 512;
}

}  // namespace

const VectorSave g_vector_save = choose();

namespace {
const size_t g_area_size = g_vector_save == VectorSave::kExplicit ? kExplicitAreaSize
                           : g_vector_save == VectorSave::kXsave  ? xsave_size()
                                                                  : 512;
}  // namespace

size_t vector_area_size() noexcept { return g_area_size; }

const char *vector_save_name() noexcept
{
    switch (g_vector_save) {
    case VectorSave::kExplicit: return "explicit";
    case VectorSave::kXsave: return "xsave";
    case VectorSave::kFxsave: return "fxsave";
    }
    return "?";
}

}  // namespace liveprobe::arch
