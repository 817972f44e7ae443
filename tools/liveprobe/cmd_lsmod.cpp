// liveprobe lsmod -p PID: the modules loaded in a process, each with its probes as the kernel's
// /sys/kernel/debug/kprobes/list shows them (address, k/r/j, symbol+offset, [GONE] [DISABLED]
// [OPTIMIZED]) and their counters; then the probes the program registered itself.
#include <CLI/CLI.hpp>

#include <cstdio>

#include <fmt/format.h>

#include "agent/channel.hpp"
#include "commands.hpp"
#include "process.hpp"

namespace liveprobe::tool {

Runner add_lsmod(CLI::App &app)
{
    auto *cmd = app.add_subcommand("lsmod", "List the probe modules loaded in a process, and their probes");
    auto pid = std::make_shared<int>(0);
    cmd->add_option("-p,--pid", *pid, "The process")->required();
    cmd->footer("Probe lines: ADDRESS KIND SYMBOL+OFFSET hits=N nmissed=N [FLAGS]; KIND is k (kprobe), r "
                "(kretprobe) or j (jprobe).");
    return [pid] {
        std::string why;
        auto info = process_info(*pid, &why);
        if (!info) {
            complain(why);
            return kExitFailure;
        }
        agent::Reply reply;
        int r = agent::request(info->uid, *pid, "lsmod", {}, &reply, &why);
        if (r < 0) {
            complain(r == -ENOENT ? fmt::format("{} (no module is loaded there)", why) : why);
            return kExitFailure;
        }
        if (!reply.ok) {
            complain(fmt::format("the agent of process {} refused: {}", *pid, reply.reason));
            return kExitFailure;
        }
        for (const std::string &l : reply.lines) std::printf("%s\n", l.c_str());
        return 0;
    };
}

}  // namespace liveprobe::tool
