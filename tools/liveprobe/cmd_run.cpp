// liveprobe run [OPTIONS] -- CMD [ARGS]: starts a program with the agent preloaded. The tool
// stays its parent, says "liveprobe: started PID N" on stderr, passes on the signals sent to it,
// and exits with the program's status (128 + N when signal N killed it). The program's
// children inherit the agent (LD_PRELOAD and LIVEPROBE_AGENT stay in their environment).
#include <CLI/CLI.hpp>

#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "agent_library.hpp"
#include "commands.hpp"
#include "program_check.hpp"

namespace liveprobe::tool {
namespace {

// Signals sent to the tool go to the program. Those the kernel sent for the terminal (Ctrl-C,
// window size) reached the program's process group already: not twice. They are taken
// through a signalfd, with SIGCHLD, by the tool's one loop (no work in a signal handler).
const int kForwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH, SIGALRM, SIGCONT};

}  // namespace

Runner add_run(CLI::App &app)
{
    auto *cmd = app.add_subcommand("run", "Start a program with the agent loaded; exit with its status");
    auto argv = std::make_shared<std::vector<std::string>>();
    cmd->add_option("command", *argv, "The program and its arguments (after --)")->required();
    cmd->footer("Example: liveprobe run -- ./server --port 8080");
    return [argv] { return run_program(*argv, nullptr); };
}

void exec_with_agent(const std::vector<std::string> &argv, const std::string &library, const std::string &extra_preload)
{
    const char *pre = std::getenv("LD_PRELOAD");
    std::string preload = pre && *pre ? std::string(pre) + ":" + library : library;  // theirs first
    if (!extra_preload.empty()) preload += ":" + extra_preload;
    setenv("LD_PRELOAD", preload.c_str(), 1);
    setenv("LIVEPROBE_AGENT", "1", 1);
    std::vector<char *> args;
    for (const std::string &a : argv) args.push_back(const_cast<char *>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    int e = errno;
    std::fprintf(stderr, "liveprobe: cannot run %s: %s\n", args[0], std::strerror(e));
    _exit(e == ENOENT ? 127 : 126);
}

std::string start_library(const std::string &library, const char *what)
{
    std::string start = library.substr(0, library.rfind('/')) + "/libliveprobe-start.so";
    if (access(start.c_str(), R_OK) == 0) return start;
    complain(fmt::format("{}: {} is missing (it acts before the program's main)", what, start));
    return {};
}

int run_program(std::vector<std::string> argv, const std::function<bool(pid_t)> &on_started,
                const std::string &extra_preload)
{
    std::string why;
    std::string library = agent_library(&why);
    if (library.empty()) {
        complain(why);
        return kExitFailure;
    }
    if (!argv.empty() && check_loadable(argv[0], &why) < 0) {
        complain(why);
        return kExitFailure;
    }
    // Blocked before the fork, so that no signal sent right after "started" is lost.
    sigset_t set, old;
    sigemptyset(&set);
    add_forwarded_signals(&set);
    sigaddset(&set, SIGCHLD);
    sigprocmask(SIG_BLOCK, &set, &old);
    int sfd = signalfd(-1, &set, SFD_CLOEXEC);
    if (sfd < 0) {
        complain(fmt::format("signalfd: {}", std::strerror(errno)));
        return kExitFailure;
    }
    pid_t pid = fork();
    if (pid < 0) {
        complain(fmt::format("fork: {}", std::strerror(errno)));
        return kExitFailure;
    }
    if (pid == 0) {
        sigprocmask(SIG_SETMASK, &old, nullptr);
        exec_with_agent(argv, library, extra_preload);
    }
    std::fprintf(stderr, "liveprobe: started PID %d\n", pid);
    if (on_started && !on_started(pid)) {
        kill(pid, SIGTERM);
        waitpid(pid, nullptr, 0);
        return kExitFailure;
    }
    return wait_forwarding(pid, sfd);
}

void add_forwarded_signals(sigset_t *set)
{
    for (int s : kForwarded) sigaddset(set, s);
}

void forward_signal(pid_t pid, const struct signalfd_siginfo &si)
{
    const int sig = static_cast<int>(si.ssi_signo);
    if (sig != SIGCHLD && si.ssi_code <= 0) kill(pid, sig);  // sent by someone, not the tty
}

int wait_forwarding(pid_t pid, int sfd)
{
    int status = 0;
    for (;;) {
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid) break;
        if (w < 0 && errno != EINTR) {
            complain(fmt::format("waitpid: {}", std::strerror(errno)));
            return kExitFailure;
        }
        struct pollfd p = {sfd, POLLIN, 0};
        poll(&p, 1, 1000);  // a SIGCHLD before the signalfd was read: the next waitpid sees it
        struct signalfd_siginfo si {};
        if (read(sfd, &si, sizeof si) == static_cast<ssize_t>(sizeof si)) forward_signal(pid, si);
    }
    if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
    return WEXITSTATUS(status);
}

}  // namespace liveprobe::tool
