// A probe module's parameters as insmod sets them, NAME=VALUE (the kernel's module_param rules:
// kstrtobool, kstrto* with base 0, comma-separated arrays, charp, string): agent/modules.cpp.
#pragma once

#include <string>
#include <vector>

struct liveprobe_module_param;  // <liveprobe/module.h>, which goes after the C++ headers: its
                                // kernel-style macros (noinline) clash with theirs

namespace liveprobe::agent {

// Sets one `name=value` (or a bare `name`, for a bool) among `params`, the module's declared
// parameters: "" on success, else the whole error message (which quotes `module`). A charp's
// copy goes to *owned, which the module frees at its unload.
std::string set_param(const std::vector<const struct liveprobe_module_param *> &params, const std::string &module,
                      const std::string &arg, std::vector<char *> *owned);

}  // namespace liveprobe::agent
