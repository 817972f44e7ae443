/* siglongjmp out of a signal handler that interrupts probed calls (issue 31, part 3): a timer
 * signal every 200 us lands in a loop of `work` calls (often in liveprobe's hit path), and its
 * handler siglongjmps out, to a point that calls `after` once. The thread's later calls must
 * be traced exactly: `after` as many times as the program says.
 *
 *   siglongjmp_target [alt] [ROUNDS]   (alt: the handler runs on a sigaltstack; 1300 rounds) */
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

static sigjmp_buf env;
static volatile long jumps, works, afters;

__attribute__((noinline)) void work(void)
{
    for (int i = 0; i < 50; ++i) works++;
}
__attribute__((noinline)) void after(void) { afters++; }

static void on_alarm(int sig)
{
    (void)sig;
    ++jumps;
    siglongjmp(env, 1);
}

int main(int argc, char **argv)
{
    int alt = argc > 1 && strcmp(argv[1], "alt") == 0;
    const int rounds = argc > 1 + alt ? atoi(argv[1 + alt]) : 1300;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    if (alt) {
        static char stack[1 << 16];
        stack_t ss = {.ss_sp = stack, .ss_size = sizeof stack};
        sigaltstack(&ss, NULL);
        sa.sa_flags = SA_ONSTACK;
    }
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval it = {{0, 200}, {0, 200}};
    setitimer(ITIMER_REAL, &it, NULL);
    for (int round = 0; round < rounds; ++round) {
        if (sigsetjmp(env, 1) == 0)
            for (;;) work(); /* interrupted by the timer, left by siglongjmp */
        after();
    }
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    printf("after %ld jumps %ld\n", (long)afters, (long)jumps);
    return 0;
}
