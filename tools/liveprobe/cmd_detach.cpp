// liveprobe detach -p PID: removes what was placed in a process through its agent (the trace
// session, every module; probes the program registered itself stay), stops the agent's thread
// and removes its socket. The library stays loaded (its code may still be on threads' stacks):
// its interposed functions pass straight through, and `attach` starts a new agent.
#include <CLI/CLI.hpp>

#include <cstdio>

#include <fmt/format.h>

#include "agent/channel.hpp"
#include "commands.hpp"
#include "process.hpp"

namespace liveprobe::tool {

Runner add_detach(CLI::App &app)
{
    auto *cmd = app.add_subcommand("detach",
                                   "Remove every probe and module placed through the agent, and stop the agent "
                                   "(the process runs on; attach again at any time)");
    auto pid = std::make_shared<int>(0);
    auto force = std::make_shared<bool>(false);
    cmd->add_option("-p,--pid", *pid, "The process")->required();
    cmd->add_flag("--force", *force, "Also end a trace session another tool is still running");
    cmd->footer("Probes the program registered itself through the API stay. A live `liveprobe trace` session "
                 "is refused without --force (that tool then ends as if the process had stopped tracing).");
    return [pid, force] {
        std::string why;
        auto info = process_info(*pid, &why);
        if (!info) {
            complain(why);
            return kExitFailure;
        }
        agent::Reply reply;
        int r = agent::request(*pid, "detach", *force ? std::vector<std::string>{"force"}
                                                                 : std::vector<std::string>{},
                               &reply, &why, 60000);
        if (r < 0) {
            complain(fmt::format("detach {}: {}", *pid, why));
            return kExitFailure;
        }
        if (!reply.ok) {
            complain(fmt::format("detach {}: {}", *pid, reply.reason));
            return kExitFailure;
        }
        for (const std::string &l : reply.lines) std::printf("liveprobe: %s\n", l.c_str());
        return 0;
    };
}

}  // namespace liveprobe::tool
