// `liveprobe insmod FILE.so [name=value ...] -- CMD`: the module is loaded into the program
// before its main() runs, so that it sees the program from its first call.
//
// The tool starts CMD with the library preloaded and LIVEPROBE_INSMOD set to the module's path
// and arguments (each encoded as the agent's protocol encodes arguments, space-separated). The
// library interposes __libc_start_main, which the program's entry point calls once every
// constructor has run (the library's own included: loading a module from a constructor would
// run before other parts of the library are initialized). The wrapper hands libc a main that
// loads the module, then calls the program's main. A module that fails to load ends the program
// with status 1 before its main runs, the reason on stderr.
//
// Without LIVEPROBE_INSMOD (a program linked with the library, or started by `liveprobe run`),
// the wrapper only passes the call on.
#include <dlfcn.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "agent/channel.hpp"
#include "agent/modules.hpp"

namespace liveprobe::agent {
namespace {

using MainFn = int (*)(int, char **, char **);
MainFn g_program_main = nullptr;

int load_then_main(int argc, char **argv, char **envp)
{
    if (const char *spec = std::getenv("LIVEPROBE_INSMOD")) {
        std::vector<std::string> words;
        std::istringstream in(spec);
        for (std::string w; in >> w;) words.push_back(decode_arg(w));
        unsetenv("LIVEPROBE_INSMOD");  // not again in the programs it runs
        if (words.empty()) {
            std::fprintf(stderr, "liveprobe: LIVEPROBE_INSMOD names no module\n");
            std::exit(1);
        }
        std::string name, why;
        auto t0 = std::chrono::steady_clock::now();
        int r = load_module(words[0], {words.begin() + 1, words.end()}, &name, &why);
        std::string file = words[0].substr(words[0].rfind('/') + 1);
        if (r < 0) {
            std::fprintf(stderr, "liveprobe: insmod %s into process %d: %s\n", file.c_str(), getpid(), why.c_str());
            std::exit(1);
        }
        std::fprintf(stderr, "liveprobe: process %d: loaded %s in %.2f ms, before main\n", getpid(), name.c_str(),
                     std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    return g_program_main(argc, argv, envp);
}

}  // namespace
}  // namespace liveprobe::agent

using StartMain = int (*)(int (*)(int, char **, char **), int, char **, void (*)(), void (*)(), void (*)(), void *);

extern "C" __attribute__((visibility("default"))) int __libc_start_main(int (*main)(int, char **, char **), int argc,
                                                                        char **argv, void (*init)(), void (*fini)(),
                                                                        void (*rtld_fini)(), void *stack_end)
{
    auto real = reinterpret_cast<StartMain>(dlsym(RTLD_NEXT, "__libc_start_main"));
    if (std::getenv("LIVEPROBE_INSMOD") == nullptr) return real(main, argc, argv, init, fini, rtld_fini, stack_end);
    liveprobe::agent::g_program_main = main;
    return real(liveprobe::agent::load_then_main, argc, argv, init, fini, rtld_fini, stack_end);
}
