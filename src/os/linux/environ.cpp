#include "os/linux/environ.hpp"

#include <unistd.h>

#include <cstring>

namespace liveprobe::os {

void erase_env(const char *name) noexcept
{
    const size_t n = std::strlen(name);
    for (char **e = environ; e && *e;) {
        if (std::strncmp(*e, name, n) == 0 && (*e)[n] == '=') {
            for (char **d = e; *d; ++d) d[0] = d[1];  // the rest one place down, the null included
        } else {
            ++e;
        }
    }
}

}  // namespace liveprobe::os
