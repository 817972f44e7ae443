/* Preloaded by lpw.sh into the program `liveprobe trace -- PROG` starts (and only there): gives
 * the program back the test's own stdout and stderr, which lpw.sh saved as descriptors 61 and 62,
 * so that liveprobe's output (its --count table, --hist histograms, messages and summary) goes to
 * lpw.sh's log files while the program writes where its test suite told it to, in order.
 *
 * The swap is made just before the program's main, by interposing __libc_start_main (as
 * liveprobe's own libliveprobe-start.so does, which comes after this library in LD_PRELOAD, so
 * its wrapper runs first): the agent's "liveprobe: placed N probes" lines, which it writes on the
 * program's stderr while placing the probes before main, then go to the log with the tool's.
 * It acts in the process whose parent is LPW_FDSHIM_PARENT (the tool), once: it removes the
 * variable, so the program's own children leave their descriptors alone. No liveprobe here. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>

extern char **environ;
typedef int (*main_fn)(int, char **, char **);
static main_fn program_main;

static int swap_then_main(int argc, char **argv, char **envp)
{
    (void)envp;
    const char *parent = getenv("LPW_FDSHIM_PARENT");
    if (parent && atol(parent) == (long)getppid()) {
        unsetenv("LPW_FDSHIM_PARENT");
        dup2(61, 1);
        dup2(62, 2);
        close(61);
        close(62);
    }
    return program_main(argc, argv, environ);
}

typedef int (*start_fn)(main_fn, int, char **, void (*)(void), void (*)(void), void (*)(void), void *);

__attribute__((visibility("default"))) int __libc_start_main(main_fn main, int argc, char **argv, void (*init)(void),
                                                             void (*fini)(void), void (*rtld_fini)(void), void *stack_end)
{
    start_fn real = (start_fn)dlsym(RTLD_NEXT, "__libc_start_main");
    program_main = main;
    return real(swap_then_main, argc, argv, init, fini, rtld_fini, stack_end);
}
