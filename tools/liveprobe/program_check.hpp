// Whether a program the tool is to start (run, trace -- CMD, insmod -- CMD) can load the agent:
// it must be dynamically linked against glibc's loader, for LD_PRELOAD to load libliveprobe.so.
// A static program, or one on musl's loader, ran without an agent, and nothing said so.
#pragma once

#include <string>

namespace liveprobe::tool {

// 0 when `command` (a path, or a name looked up in PATH as execvp does) can load the agent, or
// is nothing the tool can tell (a script, a file it cannot read: exec will say); -ENOEXEC with
// *why when it cannot (statically linked, musl, not x86-64).
int check_loadable(const std::string &command, std::string *why);

// The file execvp would run for `command`, or "" when none is found.
std::string resolve_command(const std::string &command);

}  // namespace liveprobe::tool
