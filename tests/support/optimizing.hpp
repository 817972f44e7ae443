// Whether this test process runs with jump optimization on: ctest runs every behaviour test
// again under the "noopt." prefix with LIVEPROBE_OPTIMIZE=0 (tests/CMakeLists.txt).
#pragma once

#include <cstdlib>
#include <cstring>

inline bool optimizing()
{
    const char *e = std::getenv("LIVEPROBE_OPTIMIZE");
    return !(e && std::strcmp(e, "0") == 0);
}
