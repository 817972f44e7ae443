/* A program that forks while it is traced (sessions_test.sh): says "ready", waits DELAY
 * seconds (time to attach), forks, and then parent and child each call their function for
 * SECONDS, the child `in_child`, the parent `in_parent`, and say how many calls they made.
 *
 *   fork_target [DELAY [SECONDS [exec PROGRAM [ARG...]]]]   (1 and 4)
 * With exec, the parent then executes PROGRAM (exec_follow_test.sh: a -p trace across exec). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile long sink;
__attribute__((noinline)) void in_child(long x) { sink += x; }
__attribute__((noinline)) void in_parent(long x) { sink += x; }

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static long run(void (*fn)(long), double seconds)
{
    long calls = 0;
    for (double end = now() + seconds; now() < end; usleep(1000))
        for (int k = 0; k < 100; ++k, ++calls) fn(k);
    return calls;
}

int main(int argc, char **argv)
{
    const double delay = argc > 1 ? atof(argv[1]) : 1, seconds = argc > 2 ? atof(argv[2]) : 4;
    printf("ready\n");
    fflush(stdout);
    usleep((useconds_t)(delay * 1e6));
    pid_t child = fork();
    if (child == 0) {
        printf("child %d in_child %ld\n", (int)getpid(), run(in_child, seconds));
        fflush(stdout);
        _exit(0);
    }
    long n = run(in_parent, seconds);
    int status = 0;
    waitpid(child, &status, 0);
    printf("parent in_parent %ld child status %d\n", n, status);
    fflush(stdout);
    if (argc > 4 && strcmp(argv[3], "exec") == 0) {
        execvp(argv[4], argv + 4);
        perror("execvp");
        return 127;
    }
    return 0;
}
