// The user's runtime directory: `$LIVEPROBE_RUNTIME_DIR`, or `/tmp/liveprobe-UID`, mode 0700,
// the user's only. The agents' control sockets live there (agent/channel.hpp), and liveprobe's
// caches (core/branch_cache.hpp).
#pragma once

#include <sys/types.h>

#include <string>

namespace liveprobe::os {

// The runtime directory of user `uid` (not created).
std::string runtime_dir(uid_t uid);

// Whether `dir` is a directory (not a link) owned by the calling process's real user that no one
// else may enter: the only kind liveprobe trusts what it finds in.
bool is_private_dir(const std::string &dir);

}  // namespace liveprobe::os
