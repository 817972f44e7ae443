/* A program that dup2()s onto its lowest free descriptor again and again while liveprobe works
 * in it, as fmtlib's output-redirect tests do (the real-program suite's bug 3): each round, a
 * dup2 of a pipe's end onto that number, a check that the number now holds the pipe, and a
 * close. A descriptor liveprobe opens, even for an instant, at the lowest free number of the
 * program's table makes the program's dup2 fail with EBUSY (the number taken but not yet
 * filled), or is replaced by the program's file and later closed under it.
 *   dup2_target
 * Calls `work` each round. On SIGTERM: prints "rounds R ebusy B other O replaced P closed C"
 * and exits 0. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

static volatile sig_atomic_t stop;
static void on_term(int sig) { (void)sig; stop = 1; }

__attribute__((noipa)) long work(long x) { return x * 7 + 1; }

int main(void)
{
    signal(SIGTERM, on_term);
    int p[2];
    if (pipe(p) != 0) return 2;
    struct stat want;
    if (fstat(p[1], &want) != 0) return 2;
    const int low = p[1] + 1;  /* the lowest free number: nothing above the pipe is open */
    long rounds = 0, ebusy = 0, other = 0, replaced = 0, closed = 0, sum = 0;
    printf("ready %d\n", low);
    fflush(stdout);
    while (!stop) {
        sum += work(rounds++);
        if (dup2(p[1], low) != low) {
            if (errno == EBUSY) ++ebusy;
            else ++other;
            continue;
        }
        struct stat now;
        if (fstat(low, &now) != 0 || now.st_ino != want.st_ino || now.st_dev != want.st_dev) ++replaced;
        if (close(low) != 0) ++closed;
    }
    printf("rounds %ld ebusy %ld other %ld replaced %ld closed %ld\n", rounds, ebusy, other, replaced, closed);
    return sum == 42;  /* keeps the calls */
}
