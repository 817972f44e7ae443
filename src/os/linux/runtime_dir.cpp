#include "os/linux/runtime_dir.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

#include <fmt/format.h>

namespace liveprobe::os {

std::string runtime_dir(uid_t uid)
{
    if (const char *d = secure_getenv("LIVEPROBE_RUNTIME_DIR"); d && *d) return d;
    return fmt::format("/tmp/liveprobe-{}", uid);
}

bool is_private_dir(const std::string &dir)
{
    struct stat st {};
    return lstat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == getuid() && (st.st_mode & 077) == 0;
}

}  // namespace liveprobe::os
