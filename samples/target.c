/*
 * target: a small program that keeps calling functions named and shaped like the kernel's, for
 * the sample modules to probe (samples/README.md):
 *
 *   long do_fork(unsigned long clone_flags, unsigned long stack_start, struct pt_regs *regs,
 *                unsigned long stack_size, int *parent_tidptr, int *child_tidptr)
 *       forks a child that exits at once, waits for it, returns its pid (or -errno);
 *   long do_sys_open(int dfd, const char *filename, int flags, int mode)
 *       opens the file, returns the descriptor or -errno;
 *   long sys_open(const char *filename, int flags, int mode)
 *       do_sys_open(AT_FDCWD, ...), as in the kernel.
 *
 * Each round: sys_open of a file that exists (then closed) and of one that does not, and every
 * tenth round a do_fork. It prints one line a round (what a user compares with and without
 * modules loaded): "round N: open ok, missing -2[, fork ok]".
 *
 * Usage: target [ROUNDS [INTERVAL_MS]]   (ROUNDS 0: forever; INTERVAL_MS default 100)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct pt_regs;

/* noipa: each stays a real function with its own symbol, its calls not folded away. */
#define PROBED __attribute__((noipa, used))

PROBED long do_fork(unsigned long clone_flags, unsigned long stack_start, struct pt_regs *regs,
                    unsigned long stack_size, int *parent_tidptr, int *child_tidptr)
{
    (void)clone_flags, (void)stack_start, (void)regs, (void)stack_size;
    pid_t pid = fork();
    if (pid < 0) return -errno;
    if (pid == 0) _exit(0);
    if (parent_tidptr) *parent_tidptr = pid;
    if (child_tidptr) *child_tidptr = pid;
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return pid;
}

PROBED long do_sys_open(int dfd, const char *filename, int flags, int mode)
{
    int fd = openat(dfd, filename, flags, mode);
    return fd < 0 ? -errno : fd;
}

PROBED long sys_open(const char *filename, int flags, int mode)
{
    return do_sys_open(AT_FDCWD, filename, flags, mode);
}

int main(int argc, char **argv)
{
    long rounds = argc > 1 ? atol(argv[1]) : 0;
    long interval_ms = argc > 2 ? atol(argv[2]) : 100;
    if (rounds < 0 || interval_ms < 0) {
        fprintf(stderr, "usage: %s [ROUNDS [INTERVAL_MS]]\n", argv[0]);
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGPIPE, SIG_IGN);
    for (long n = 0; rounds == 0 || n < rounds; ++n) {
        long fd = sys_open("/proc/self/status", O_RDONLY, 0);
        long missing = sys_open("/nonexistent/liveprobe-target", O_RDONLY, 0);
        if (fd >= 0) close((int)fd);
        const char *forked = "";
        if (n % 10 == 0) {
            int ptid = 0, ctid = 0;
            long child = do_fork(0x11 /* SIGCHLD */, 0, NULL, 0, &ptid, &ctid);
            forked = child > 0 && ptid == child ? ", fork ok" : ", fork failed";
        }
        /* One printf a round, after the fork: no half line in the buffer the child inherits. */
        printf("round %ld: open %s, missing %ld%s\n", n, fd >= 0 ? "ok" : "failed", missing, forked);
        struct timespec ts = {interval_ms / 1000, (interval_ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
        }
    }
    return 0;
}
