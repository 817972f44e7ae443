#include "arch/x86_64/vector_state.hpp"

#include <cpuid.h>

namespace liveprobe::arch {
namespace {

size_t compute_size()
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_OSXSAVE)) return 512;
    __cpuid_count(0xd, 0, a, b, c, d);
    return b > 512 ? b : 512;
}

const size_t g_size = compute_size();

}  // namespace

size_t vector_area_size() noexcept { return g_size; }

}  // namespace liveprobe::arch
