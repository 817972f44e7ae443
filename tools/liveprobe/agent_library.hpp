// Where the agent (libliveprobe.so itself) is, to preload it or load it into a process.
#pragma once

#include <string>

namespace liveprobe::tool {

// $LIVEPROBE_LIBRARY; else the installed library next to this tool (../lib/...); else the one
// of the build tree this tool was built in. Empty with *why when none exists.
std::string agent_library(std::string *why);

}  // namespace liveprobe::tool
