// liveprobe attach -p PID: loads the agent into a running process and reports it.
#include <CLI/CLI.hpp>

#include <cstdio>

#include <fmt/format.h>

#include "commands.hpp"
#include "injector.hpp"

namespace liveprobe::tool {

Runner add_attach(CLI::App &app)
{
    auto *cmd = app.add_subcommand("attach", "Load the agent into a running process (by ptrace; the process keeps "
                                             "running) and report it");
    auto pid = std::make_shared<int>(0);
    cmd->add_option("-p,--pid", *pid, "The process")->required();
    return [pid] {
        AttachReport rep;
        std::string why;
        if (int r = attach_agent(*pid, &rep, &why); r < 0) {
            complain(fmt::format("attach {}: {}", *pid, why));
            return kExitFailure;
        }
        if (rep.already_running)
            std::printf("liveprobe: the agent is already running in process %d\n", *pid);
        else
            std::printf("liveprobe: agent %s in process %d through thread %d in %.1f ms\n",
                        rep.loaded_library ? "loaded and started" : "started", *pid, rep.thread, rep.ms);
        return 0;
    };
}

}  // namespace liveprobe::tool
