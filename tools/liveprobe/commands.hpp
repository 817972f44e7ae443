// The sub-commands of `liveprobe`, one file each. Each adds itself to the app and, when it is
// the one given, runs and returns the tool's exit status.
//
// Exit status: 0 success; 1 the operation failed (the message says why); 2 bad usage;
// `run`: the program's own status (128 + N when a signal N killed it).
#pragma once

#include <signal.h>
#include <sys/signalfd.h>
#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

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
Runner add_insmod(CLI::App &app);
Runner add_rmmod(CLI::App &app);
Runner add_detach(CLI::App &app);
Runner add_lsmod(CLI::App &app);
Runner add_build_module(CLI::App &app);
Runner add_trace(CLI::App &app);
Runner add_report(CLI::App &app);
Runner add_replay(CLI::App &app);
Runner add_graph(CLI::App &app);

// `liveprobe insmod|trace ... -- CMD [ARGS]`: the words after "--", split off before parsing
// (main.cpp).
std::vector<std::string> &insmod_command();

// Starts argv with the agent preloaded (and `extra_preload` after it, if any) and stays its
// parent (`liveprobe run`); on_started (if any) runs once it has started: false kills the
// program and fails. Returns the tool's status.
int run_program(std::vector<std::string> argv, const std::function<bool(pid_t)> &on_started,
                const std::string &extra_preload = "");

// The signals `run` and `trace -- CMD` pass on to the program when someone sent them to the
// tool (not the terminal, whose signals reached the program's process group already).
void add_forwarded_signals(sigset_t *set);
void forward_signal(pid_t pid, const struct signalfd_siginfo &si);
// Waits for the program pid, passing on the signals read from sfd (a signalfd of SIGCHLD and
// the forwarded signals, blocked): its status as `run` returns it.
int wait_forwarding(pid_t pid, int sfd);

// In a child that is about to become `argv`: preloads the agent `library` (after the caller's
// LD_PRELOAD, and `extra_preload` after it, if any), starts it (LIVEPROBE_AGENT) and execs argv;
// on failure says why and exits 127 (not found) or 126.
[[noreturn]] void exec_with_agent(const std::vector<std::string> &argv, const std::string &library,
                                  const std::string &extra_preload);

// libliveprobe-start.so beside the agent `library` (it acts before the program's main: insmod's
// module, trace's session); empty with a message after `what` when it is missing.
std::string start_library(const std::string &library, const char *what);

// Sends VERB (no arguments) to the agent of pid and prints its data lines (`status`, `lsmod`):
// the tool's exit status. `no_agent_hint` follows the message when the process has no agent.
int print_agent_reply(pid_t pid, const std::string &verb, const std::string &no_agent_hint);

// "liveprobe: MESSAGE" on stderr.
void complain(const std::string &message);

}  // namespace liveprobe::tool
