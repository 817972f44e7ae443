// libliveprobe-start.so's exec interposers: before the program executes a file, the tracer that
// follows exec (`liveprobe trace -- CMD`, src/agent/follow.hpp) is told of a set-uid or set-gid
// program, which it cannot follow (the loader ignores LD_PRELOAD for it), so that the tool can
// say so instead of leaving the program out silently (liveprobe_trace_before_exec). Each
// interposer then calls the libc function it stands for, unchanged.
//
// The exec family (execve, execv, execvp, execvpe, execl, execlp, execle) and posix_spawn(p)
// as the program and its libraries call them. glibc's own callers (system, popen) run /bin/sh,
// which is not set-uid. In a vfork child, the exec family runs with the parent's memory: the
// path search below allocates nothing.
#include <dlfcn.h>
#include <limits.h>
#include <spawn.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdlib>
#include <cstring>

extern "C" void liveprobe_trace_before_exec(const char *path, char *const envp[]);

namespace {

template <class F>
F next(const char *name)
{
    return reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
}

// The file execvp runs for `file` (a name without '/': the first executable of PATH's
// directories), into buf; false when none.
bool on_path(const char *file, char (&buf)[PATH_MAX])
{
    const char *path = std::getenv("PATH");
    if (!path) path = "/bin:/usr/bin";
    for (const char *p = path;; ++p) {
        const char *end = std::strchr(p, ':');
        const size_t dir = end ? static_cast<size_t>(end - p) : std::strlen(p);
        const size_t name = std::strlen(file);
        if (dir + 1 + name < sizeof buf) {
            std::memcpy(buf, dir ? p : ".", dir ? dir : 1);
            size_t at = dir ? dir : 1;
            buf[at++] = '/';
            std::memcpy(buf + at, file, name + 1);
            if (access(buf, X_OK) == 0) return true;
        }
        if (!end) return false;
        p = end;
    }
}

void before(const char *path, char *const envp[]) { liveprobe_trace_before_exec(path, envp); }

void before_searched(const char *file, char *const envp[])
{
    if (!file) return;
    if (std::strchr(file, '/')) return before(file, envp);
    char buf[PATH_MAX];
    if (on_path(file, buf)) before(buf, envp);
}

// execl's arguments, up to the null one, into argv (room for `max`): how many, or -1.
int gather(const char *arg, va_list ap, char **argv, int max)
{
    int n = 0;
    for (const char *a = arg; n < max; a = va_arg(ap, const char *)) {
        argv[n++] = const_cast<char *>(a);
        if (!a) return n;
    }
    return -1;
}

using Execve = int (*)(const char *, char *const[], char *const[]);
using Execv = int (*)(const char *, char *const[]);
using Spawn = int (*)(pid_t *, const char *, const posix_spawn_file_actions_t *, const posix_spawnattr_t *,
                      char *const[], char *const[]);
constexpr int kMaxListArgs = 4096;  // execl's arguments; more: E2BIG, as the kernel would say

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int execve(const char *path, char *const argv[], char *const envp[])
{
    before(path, envp);
    return next<Execve>("execve")(path, argv, envp);
}

__attribute__((visibility("default"))) int execv(const char *path, char *const argv[])
{
    before(path, environ);
    return next<Execv>("execv")(path, argv);
}

__attribute__((visibility("default"))) int execvp(const char *file, char *const argv[])
{
    before_searched(file, environ);
    return next<Execv>("execvp")(file, argv);
}

__attribute__((visibility("default"))) int execvpe(const char *file, char *const argv[], char *const envp[])
{
    before_searched(file, envp);
    return next<Execve>("execvpe")(file, argv, envp);
}

__attribute__((visibility("default"))) int execl(const char *path, const char *arg, ...)
{
    char *argv[kMaxListArgs];
    va_list ap;
    va_start(ap, arg);
    const int n = gather(arg, ap, argv, kMaxListArgs);
    va_end(ap);
    if (n < 0) return errno = E2BIG, -1;
    return execv(path, argv);
}

__attribute__((visibility("default"))) int execlp(const char *file, const char *arg, ...)
{
    char *argv[kMaxListArgs];
    va_list ap;
    va_start(ap, arg);
    const int n = gather(arg, ap, argv, kMaxListArgs);
    va_end(ap);
    if (n < 0) return errno = E2BIG, -1;
    return execvp(file, argv);
}

__attribute__((visibility("default"))) int execle(const char *path, const char *arg, ...)
{
    char *argv[kMaxListArgs];
    va_list ap;
    va_start(ap, arg);
    const int n = gather(arg, ap, argv, kMaxListArgs);
    char *const *envp = n < 0 ? nullptr : va_arg(ap, char *const *);
    va_end(ap);
    if (n < 0) return errno = E2BIG, -1;
    return execve(path, argv, envp);
}

__attribute__((visibility("default"))) int posix_spawn(pid_t *pid, const char *path,
                                                       const posix_spawn_file_actions_t *actions,
                                                       const posix_spawnattr_t *attr, char *const argv[],
                                                       char *const envp[])
{
    before(path, envp);
    return next<Spawn>("posix_spawn")(pid, path, actions, attr, argv, envp);
}

__attribute__((visibility("default"))) int posix_spawnp(pid_t *pid, const char *file,
                                                        const posix_spawn_file_actions_t *actions,
                                                        const posix_spawnattr_t *attr, char *const argv[],
                                                        char *const envp[])
{
    before_searched(file, envp);
    return next<Spawn>("posix_spawnp")(pid, file, actions, attr, argv, envp);
}

}  // extern "C"
