// liveprobe status -p PID: what the agent of a process reports.
#include <CLI/CLI.hpp>

#include <cstdio>

#include <fmt/format.h>

#include "agent/channel.hpp"
#include "commands.hpp"
#include "process.hpp"

namespace liveprobe::tool {

Runner add_status(CLI::App &app)
{
    auto *cmd = app.add_subcommand("status", "Show the agent of a process: version, probes, modules, log");
    auto pid = std::make_shared<int>(0);
    cmd->add_option("-p,--pid", *pid, "The process")->required();
    return [pid] { return print_agent_reply(*pid, "status", fmt::format("liveprobe attach -p {} loads one", *pid)); };
}

int print_agent_reply(pid_t pid, const std::string &verb, const std::string &no_agent_hint)
{
    std::string why;
    auto info = process_info(pid, &why);
    if (!info) {
        complain(why);
        return kExitFailure;
    }
    agent::Reply reply;
    if (int r = agent::request(pid, verb, {}, &reply, &why); r < 0) {
        complain(r == -ENOENT ? fmt::format("{} ({})", why, no_agent_hint) : why);
        return kExitFailure;
    }
    if (!reply.ok) {
        complain(fmt::format("the agent of process {} refused: {}", pid, reply.reason));
        return kExitFailure;
    }
    for (const std::string &l : reply.lines) std::printf("%s\n", l.c_str());
    return 0;
}

}  // namespace liveprobe::tool
