// libliveprobe-start.so: preloaded after libliveprobe.so by `liveprobe insmod FILE.so ... -- CMD`
// and `liveprobe trace ... -- CMD`, so that the module is loaded, or the trace started, before the
// program's main() runs: they see it from its first call.
//
// The tool starts CMD with both libraries preloaded and LIVEPROBE_INSMOD set to the module's path
// and arguments (each encoded as the agent's protocol encodes arguments, space-separated). This
// library interposes __libc_start_main, which the program's entry point calls once every
// constructor has run (libliveprobe's own included: a constructor of the library would run before
// other parts of it are initialized). The wrapper hands libc a main that has libliveprobe load
// the module (liveprobe_insmod_from_environment), then calls the program's main. A module that
// fails to load ends the program with status 1 before its main runs, the reason on stderr.
//
// It is a library of its own: in libliveprobe.so, the definition would bind the entry point of
// every program linked with the library.
#include <dlfcn.h>
#include <unistd.h>

extern "C" int liveprobe_insmod_from_environment(void);
extern "C" int liveprobe_trace_from_environment(void);

namespace {
using MainFn = int (*)(int, char **, char **);
MainFn g_program_main = nullptr;

int load_then_main(int argc, char **argv, char **envp)
{
    liveprobe_trace_from_environment();   // exits with status 1 when the trace cannot start
    liveprobe_insmod_from_environment();  // exits with status 1 when the module does not load
    // The environment as it is now, without the LIVEPROBE_TRACE* and LIVEPROBE_INSMOD they
    // took out: once a constructor has set a variable, environ is a copy, and envp, the
    // original, still had them. A shell that builds its children's environment from envp
    // (bash) then started a session of the same specs in every program it ran, writing into
    // the tool's shared memory (garbage names in the counts), or ended them with status 1
    // before their main ("no function matches").
    (void)envp;
    return g_program_main(argc, argv, environ);
}
}  // namespace

using StartMain = int (*)(int (*)(int, char **, char **), int, char **, void (*)(), void (*)(), void (*)(), void *);

extern "C" __attribute__((visibility("default"))) int __libc_start_main(int (*main)(int, char **, char **), int argc,
                                                                        char **argv, void (*init)(), void (*fini)(),
                                                                        void (*rtld_fini)(), void *stack_end)
{
    auto real = reinterpret_cast<StartMain>(dlsym(RTLD_NEXT, "__libc_start_main"));
    g_program_main = main;
    return real(load_then_main, argc, argv, init, fini, rtld_fini, stack_end);
}
