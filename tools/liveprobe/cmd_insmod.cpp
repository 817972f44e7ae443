// liveprobe insmod [-p PID] FILE.so [name=value ...] [-- CMD [ARGS]]: loads a probe module into a
// running process (attaching first when it has no agent), or into a program it starts (and then
// stays its parent, as `liveprobe run`). The agent checks the parameters against the module's
// declarations and runs its init; a failing init unloads it and the command fails with its error.
#include <CLI/CLI.hpp>

#include <limits.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "agent/channel.hpp"
#include "agent_library.hpp"
#include "commands.hpp"
#include "injector.hpp"
#include "process.hpp"

namespace liveprobe::tool {
namespace {

// Loads the module into pid, whose agent runs: 0, or the tool's failure status.
int load(pid_t pid, const std::string &path, const std::vector<std::string> &params)
{
    std::vector<std::string> args{path};
    args.insert(args.end(), params.begin(), params.end());
    agent::Reply reply;
    std::string why;
    int r = agent::request(pid, "insmod", args, &reply, &why, 60000);
    std::string file = path.substr(path.rfind('/') + 1);
    if (r < 0) {
        // A process that died under the request may take a moment to show it.
        for (int i = 0; i < 50; ++i) {
            std::string ignored;
            auto info = process_info(pid, &ignored);
            if (!info || info->state == 'Z' || info->state == 'X') {
                why = fmt::format("process {} exited during insmod", pid);
                break;
            }
            usleep(10000);
        }
        complain(fmt::format("insmod {} into process {}: {}", file, pid, why));
        return kExitFailure;
    }
    if (!reply.ok) {
        complain(fmt::format("insmod {} into process {}: {}", file, pid, reply.reason));
        return kExitFailure;
    }
    for (const std::string &l : reply.lines) std::fprintf(stderr, "liveprobe: process %d: %s\n", pid, l.c_str());
    return 0;
}

}  // namespace

Runner add_insmod(CLI::App &app)
{
    auto *cmd = app.add_subcommand("insmod", "Load a probe module into a process (attaching first if needed), or "
                                             "into a program it starts");
    struct Opts {
        int pid = 0;
        std::string file;
        std::vector<std::string> params;
    };
    auto o = std::make_shared<Opts>();
    cmd->add_option("-p,--pid", o->pid, "The process (without it: the program given after --)");
    cmd->add_option("module", o->file, "The module: a shared object built with `liveprobe build-module`")
        ->required();
    cmd->add_option("params", o->params, "Its parameters: name=value ...");
    cmd->footer("Examples:\n  liveprobe insmod -p 1234 kretprobe_example.so func=do_sys_open\n"
                "  liveprobe insmod kprobe_example.so -- ./samples/liveprobe-target");
    return [o] {
        const std::vector<std::string> &params = o->params;
        const std::vector<std::string> &command = insmod_command();
        for (const std::string &p : params)
            if (p.empty() || p[0] == '=') {
                complain(fmt::format("insmod: '{}' is not a parameter: write name=value", p));
                return kExitUsage;
            }
        char real[PATH_MAX];
        if (!realpath(o->file.c_str(), real)) {
            complain(fmt::format("insmod: {}: {}", o->file, std::strerror(errno)));
            return kExitFailure;
        }
        std::string path = real;
        if ((o->pid != 0) == !command.empty()) {
            complain("insmod: give either -p PID or a program to start after --");
            return kExitUsage;
        }
        if (o->pid != 0) {
            std::string why;
            auto info = process_info(o->pid, &why);
            if (!info) {
                complain(why);
                return kExitFailure;
            }
            AttachReport rep;
            if (attach_agent(o->pid, &rep, &why) < 0) {
                complain(fmt::format("insmod: attach {}: {}", o->pid, why));
                return kExitFailure;
            }
            if (!rep.already_running)
                std::fprintf(stderr, "liveprobe: agent loaded into process %d in %.1f ms\n", o->pid, rep.ms);
            return load(o->pid, path, params);
        }
        // A program to start: libliveprobe-start.so, preloaded after the library, has the
        // module loaded before the program's main runs (src/preload/start_main.cpp), and the
        // library says so, or why not, on stderr.
        std::string why;
        std::string library = agent_library(&why);
        if (library.empty()) {
            complain(why);
            return kExitFailure;
        }
        std::string start = start_library(library, "insmod");
        if (start.empty()) return kExitFailure;
        std::string spec = agent::encode_arg(path);
        for (const std::string &p : params) spec += " " + agent::encode_arg(p);
        setenv("LIVEPROBE_INSMOD", spec.c_str(), 1);
        return run_program(command, nullptr, start);
    };
}

}  // namespace liveprobe::tool
