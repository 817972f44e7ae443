// liveprobe lsmod -p PID: the modules loaded in a process, each with its probes as the kernel's
// /sys/kernel/debug/kprobes/list shows them (address, k/r/j, symbol+offset, [GONE] [DISABLED]
// [OPTIMIZED]) and their counters; then the probes the program registered itself.
#include <CLI/CLI.hpp>

#include "commands.hpp"

namespace liveprobe::tool {

Runner add_lsmod(CLI::App &app)
{
    auto *cmd = app.add_subcommand("lsmod", "List the probe modules loaded in a process, and their probes");
    auto pid = std::make_shared<int>(0);
    cmd->add_option("-p,--pid", *pid, "The process")->required();
    cmd->footer("Probe lines: ADDRESS KIND SYMBOL+OFFSET hits=N nmissed=N [FLAGS]; KIND is k (kprobe), r "
                "(kretprobe) or j (jprobe).");
    return [pid] { return print_agent_reply(*pid, "lsmod", "no module is loaded there"); };
}

}  // namespace liveprobe::tool
