// liveprobe run [OPTIONS] -- CMD [ARGS]: starts a program with the agent preloaded. The tool
// stays its parent, says "liveprobe: started PID N" on stderr, passes on the signals sent to it,
// and exits with the program's status (128 + N when signal N killed it). The program's
// children inherit the agent (LD_PRELOAD and LIVEPROBE_AGENT stay in their environment).
#include <CLI/CLI.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "agent_library.hpp"
#include "commands.hpp"

namespace liveprobe::tool {
namespace {

volatile sig_atomic_t g_child = 0;

// Signals sent to the tool go to the program. Those the kernel sent for the terminal (Ctrl-C,
// window size) reached the program's process group already: not twice.
void forward(int sig, siginfo_t *info, void *)
{
    if (g_child > 0 && info->si_code <= 0) kill(g_child, sig);
}

const int kForwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH, SIGALRM, SIGCONT};

}  // namespace

Runner add_run(CLI::App &app)
{
    auto *cmd = app.add_subcommand("run", "Start a program with the agent loaded; exit with its status");
    auto argv = std::make_shared<std::vector<std::string>>();
    cmd->add_option("command", *argv, "The program and its arguments (after --)")->required();
    cmd->footer("Example: liveprobe run -- ./server --port 8080");
    return [argv] {
        std::string why;
        std::string library = agent_library(&why);
        if (library.empty()) {
            complain(why);
            return kExitFailure;
        }
        // Installed before the fork, so that no signal sent right after "started" is lost.
        struct sigaction sa {};
        sa.sa_sigaction = forward;
        sa.sa_flags = SA_SIGINFO | SA_RESTART;
        sigemptyset(&sa.sa_mask);
        for (int s : kForwarded) sigaction(s, &sa, nullptr);
        pid_t pid = fork();
        if (pid < 0) {
            complain(fmt::format("fork: {}", std::strerror(errno)));
            return kExitFailure;
        }
        if (pid == 0) {
            struct sigaction dfl {};
            dfl.sa_handler = SIG_DFL;
            for (int s : kForwarded) sigaction(s, &dfl, nullptr);
            const char *pre = std::getenv("LD_PRELOAD");
            std::string preload = pre && *pre ? std::string(pre) + ":" + library : library;  // theirs first
            setenv("LD_PRELOAD", preload.c_str(), 1);
            setenv("LIVEPROBE_AGENT", "1", 1);
            std::vector<char *> args;
            for (std::string &a : *argv) args.push_back(a.data());
            args.push_back(nullptr);
            execvp(args[0], args.data());
            int e = errno;
            std::fprintf(stderr, "liveprobe: cannot run %s: %s\n", args[0], std::strerror(e));
            _exit(e == ENOENT ? 127 : 126);
        }
        g_child = pid;
        std::fprintf(stderr, "liveprobe: started PID %d\n", pid);
        int status = 0;
        while (waitpid(pid, &status, 0) < 0) {
            if (errno != EINTR) {
                complain(fmt::format("waitpid: {}", std::strerror(errno)));
                return kExitFailure;
            }
        }
        if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
        return WEXITSTATUS(status);
    };
}

}  // namespace liveprobe::tool
