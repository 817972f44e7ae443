// liveprobe dmesg -p PID [-f]: what the process's log holds (printk), oldest first; -f follows
// it as it grows. Lines the ring overwrote before they were read are gone, as in the kernel's.
#include <CLI/CLI.hpp>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include <fmt/format.h>

#include "agent/channel.hpp"
#include "commands.hpp"
#include "process.hpp"

namespace liveprobe::tool {

Runner add_dmesg(CLI::App &app)
{
    auto *cmd = app.add_subcommand("dmesg", "Print the log of a process (what printk wrote), oldest first");
    auto pid = std::make_shared<int>(0);
    auto follow = std::make_shared<bool>(false);
    auto notime = std::make_shared<bool>(false);
    cmd->add_option("-p,--pid", *pid, "The process")->required();
    cmd->add_flag("-f,--follow", *follow, "Keep printing new lines until the process exits (or Ctrl-C)");
    cmd->add_flag("-t,--notime", *notime, "Do not print the time stamps");
    cmd->footer("Each line starts with its time, [seconds.microseconds] of CLOCK_MONOTONIC, as the kernel's dmesg.");
    return [pid, follow, notime] {
        std::string why;
        auto info = process_info(*pid, &why);
        if (!info) {
            complain(why);
            return kExitFailure;
        }
        uint64_t next = 0;
        for (bool first = true;; first = false) {
            agent::Reply reply;
            int r = agent::request(*pid, "log", {std::to_string(next)}, &reply, &why);
            if (r < 0) {
                if (!first && *follow) return 0;  // the process is gone: done following
                complain(r == -ENOENT ? fmt::format("{} (liveprobe attach -p {} loads one)", why, *pid) : why);
                return kExitFailure;
            }
            if (!reply.ok) {
                complain(fmt::format("the agent of process {} refused: {}", *pid, reply.reason));
                return kExitFailure;
            }
            // The last line says where the next request goes on; the others are the log's.
            if (reply.lines.empty() || reply.lines.back().rfind("next ", 0) != 0) {
                complain(fmt::format("the agent of process {} sent a log reply without its end", *pid));
                return kExitFailure;
            }
            next = std::strtoull(reply.lines.back().c_str() + 5, nullptr, 10);
            reply.lines.pop_back();
            // "NANOSECONDS LEVEL TEXT" each.
            for (const std::string &l : reply.lines) {
                char *end = nullptr;
                unsigned long long ns = std::strtoull(l.c_str(), &end, 10);
                size_t sp = l.find(' ', static_cast<size_t>(end - l.c_str()) + 1);
                std::string text = sp == std::string::npos ? std::string() : l.substr(sp + 1);
                if (*notime) std::printf("%s\n", text.c_str());
                else std::printf("[%5llu.%06llu] %s\n", ns / 1000000000ull, ns / 1000ull % 1000000ull, text.c_str());
            }
            std::fflush(stdout);
            if (!*follow) return 0;
            usleep(200000);
        }
    };
}

}  // namespace liveprobe::tool
