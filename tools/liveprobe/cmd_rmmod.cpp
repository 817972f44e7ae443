// liveprobe rmmod -p PID NAME: runs the module's exit and unloads it once no thread is inside its
// code (API.md section 2). NAME may also be given as the module's file (NAME.so, a path).
#include <CLI/CLI.hpp>

#include <cstdio>

#include <fmt/format.h>

#include "agent/channel.hpp"
#include "commands.hpp"
#include "process.hpp"

namespace liveprobe::tool {

Runner add_rmmod(CLI::App &app)
{
    auto *cmd = app.add_subcommand("rmmod", "Unload a probe module from a process (its exit runs first)");
    auto pid = std::make_shared<int>(0);
    auto name = std::make_shared<std::string>();
    cmd->add_option("-p,--pid", *pid, "The process")->required();
    cmd->add_option("module", *name, "The module's name (its file name without .so)")->required();
    return [pid, name] {
        std::string why;
        auto info = process_info(*pid, &why);
        if (!info) {
            complain(why);
            return kExitFailure;
        }
        std::string n = name->substr(name->rfind('/') + 1);
        if (n.size() > 3 && n.compare(n.size() - 3, 3, ".so") == 0) n.resize(n.size() - 3);
        agent::Reply reply;
        int r = agent::request(*pid, "rmmod", {n}, &reply, &why, 60000);
        if (r < 0) {
            complain(r == -ENOENT ? fmt::format("rmmod {}: {} (no module is loaded there)", n, why)
                                  : fmt::format("rmmod {}: {}", n, why));
            return kExitFailure;
        }
        if (!reply.ok) {
            complain(fmt::format("rmmod {} from process {}: {}", n, *pid, reply.reason));
            return kExitFailure;
        }
        for (const std::string &l : reply.lines) complain(fmt::format("rmmod {} from process {}: {}", n, *pid, l));
        return 0;
    };
}

}  // namespace liveprobe::tool
