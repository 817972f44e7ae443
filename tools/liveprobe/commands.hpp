// The sub-commands of `liveprobe`, one file each. Each adds itself to the app and, when it is
// the one given, runs and returns the tool's exit status.
//
// Exit status: 0 success; 1 the operation failed (the message says why); 2 bad usage;
// `run`: the program's own status (128 + N when a signal N killed it).
#pragma once

#include <functional>

namespace CLI {
class App;
}

namespace liveprobe::tool {

inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

using Runner = std::function<int()>;

Runner add_run(CLI::App &app);
Runner add_attach(CLI::App &app);
Runner add_status(CLI::App &app);
Runner add_list(CLI::App &app);
Runner add_dmesg(CLI::App &app);

// "liveprobe: MESSAGE" on stderr.
void complain(const std::string &message);

}  // namespace liveprobe::tool
