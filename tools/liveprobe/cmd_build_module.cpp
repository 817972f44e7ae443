// liveprobe build-module FILE.c [-o NAME.so] [-- CFLAGS]: builds a probe module from one
// kernel-style source file, with the flags of API.md section 2: the compatibility headers
// (<linux/module.h>, ...) first on the include path, position-independent, linked against
// libliveprobe. The compiler is $CC, else cc.
#include <CLI/CLI.hpp>

#include <limits.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include <fmt/format.h>

#include "agent_library.hpp"
#include "commands.hpp"

#ifndef LIVEPROBE_SOURCE_INCLUDE_DIR
#define LIVEPROBE_SOURCE_INCLUDE_DIR ""
#endif

namespace liveprobe::tool {
namespace {

bool exists(const std::string &p) { return access(p.c_str(), R_OK) == 0; }

// The directory holding liveprobe/module.h: the installed one next to the library
// (LIBDIR/../include), else the source tree's (a build tree's tool).
std::string include_dir(const std::string &library)
{
    std::string libdir = library.substr(0, library.rfind('/'));
    for (const char *rel : {"/../include", "/../../include"})
        if (exists(libdir + rel + "/liveprobe/module.h")) {
            char real[PATH_MAX];
            return realpath((libdir + rel).c_str(), real) ? real : libdir + rel;
        }
    return exists(std::string(LIVEPROBE_SOURCE_INCLUDE_DIR) + "/liveprobe/module.h") ? LIVEPROBE_SOURCE_INCLUDE_DIR : "";
}

}  // namespace

Runner add_build_module(CLI::App &app)
{
    auto *cmd = app.add_subcommand("build-module", "Build a probe module (NAME.so) from one kernel-style C file");
    struct Opts {
        std::string source, output;
        std::vector<std::string> cflags;
        bool verbose = false;
    };
    auto o = std::make_shared<Opts>();
    cmd->add_option("source", o->source, "The module's source, FILE.c")->required()->check(CLI::ExistingFile);
    cmd->add_option("-o,--output", o->output, "The module to write (default: FILE.so in the current directory)");
    cmd->add_option("cflags", o->cflags, "More compiler flags (after --)");
    cmd->add_flag("-v,--verbose", o->verbose, "Print the compiler's command line");
    cmd->footer("Example: liveprobe build-module kretprobe_example.c && liveprobe insmod -p PID "
                "kretprobe_example.so func=do_sys_open");
    return [o] {
        std::string why;
        std::string library = agent_library(&why);
        if (library.empty()) {
            complain(why);
            return kExitFailure;
        }
        std::string inc = include_dir(library);
        if (inc.empty()) {
            complain("build-module: cannot find liveprobe's headers (liveprobe/module.h)");
            return kExitFailure;
        }
        std::string base = o->source.substr(o->source.rfind('/') + 1);
        if (size_t dot = base.rfind('.'); dot != std::string::npos) base.resize(dot);
        std::string out = o->output.empty() ? base + ".so" : o->output;
        std::string libdir = library.substr(0, library.rfind('/'));
        // $CC may be a command with words ("ccache gcc"), as make takes it.
        std::vector<std::string> argv;
        const char *cc = std::getenv("CC");
        std::istringstream words(cc && *cc ? cc : "cc");
        for (std::string w; words >> w;) argv.push_back(w);
        if (argv.empty()) argv.push_back("cc");
        argv.insert(argv.end(), {"-shared", "-fPIC", "-O2", "-g", "-Wall", "-o", out, o->source,
                                 "-I" + inc + "/liveprobe/compat", "-I" + inc});
        argv.insert(argv.end(), o->cflags.begin(), o->cflags.end());
        // The library by its full path (the build tree has no unversioned name to -l), found again
        // at run time where it is.
        argv.insert(argv.end(), {library, "-Wl,-rpath," + libdir});
        if (o->verbose) {
            std::string line;
            for (const std::string &a : argv) line += (line.empty() ? "" : " ") + a;
            std::fprintf(stderr, "%s\n", line.c_str());
        }
        pid_t pid = fork();
        if (pid < 0) {
            complain(fmt::format("build-module: fork: {}", std::strerror(errno)));
            return kExitFailure;
        }
        if (pid == 0) {
            std::vector<char *> args;
            for (const std::string &a : argv) args.push_back(const_cast<char *>(a.c_str()));
            args.push_back(nullptr);
            execvp(args[0], args.data());
            std::fprintf(stderr, "liveprobe: build-module: cannot run %s: %s\n", args[0], std::strerror(errno));
            _exit(127);
        }
        int status = 0;
        while (waitpid(pid, &status, 0) < 0) {
            if (errno != EINTR) {
                complain(fmt::format("build-module: waitpid: {}", std::strerror(errno)));
                return kExitFailure;
            }
        }
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            complain(fmt::format("build-module: {} did not compile (the compiler's messages are above)", o->source));
            return kExitFailure;
        }
        std::fprintf(stderr, "liveprobe: built %s\n", out.c_str());
        return 0;
    };
}

}  // namespace liveprobe::tool
