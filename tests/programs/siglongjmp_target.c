/* siglongjmp out of a signal handler that interrupts probed calls (issue 31, part 3): a timer
 * signal every 200 us lands in a loop of `work` calls (often in liveprobe's hit path), and its
 * handler siglongjmps out, to a point that calls `after` once. The thread's later calls must
 * be traced exactly: `after` as many times as the program says.
 *
 * nested: the timer's handler calls `in_handler`, which raises SIGUSR1; that handler (nested on
 * top of the first) siglongjmps out of both, and out of the probed `in_handler` call.
 *
 * storm: a timer every 20 us whose handler siglongjmps back into the loop of `work` calls, so
 * that the thread's next hit sets its record back while the timer keeps landing (in that
 * reset too); ROUNDS jumps, then the timer stops and `after` is called 1000 times.
 *
 *   siglongjmp_target [alt|nested|storm] [ROUNDS]   (alt: the handler runs on a sigaltstack;
 *   1300 rounds, 20000 for storm) */
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

static int nested, storm;
static volatile long in_handlers, alarms;
/* Set while the thread runs the loop of work calls: the handlers jump only then, never out of
 * `after` (whose calls the test counts: a call left by a jump would be entered, not returned). */
static volatile sig_atomic_t in_loop;

static void on_usr1(int sig)
{
    (void)sig;
    ++jumps;
    siglongjmp(env, 1);
}

__attribute__((noinline)) void in_handler(void)
{
    in_handlers++;
    raise(SIGUSR1); /* delivered at once, on top of this handler */
}

static void on_alarm(int sig)
{
    (void)sig;
    ++alarms;
    if (storm) {
        if (in_loop && jumps < storm) {
            ++jumps;
            siglongjmp(env, 1);
        }
        return;
    }
    if (!in_loop) return;
    if (nested) {
        in_handler();
        return; /* never: on_usr1 jumps */
    }
    ++jumps;
    siglongjmp(env, 1);
}

/* Every jump lands back in the loop, whose next call of `work` is the thread's first hit since
 * the jump. The loop ends when the handler stops jumping (storm jumps done); a jump that lands
 * after that is still taken (sigsetjmp again). */
static int run_storm(int rounds)
{
    storm = rounds;
    struct itimerval it = {{0, 20}, {0, 20}};
    setitimer(ITIMER_REAL, &it, NULL);
    sigsetjmp(env, 1);
    in_loop = 1;
    while (jumps < storm) work();
    in_loop = 0;
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    for (int i = 0; i < 1000; ++i) after();
    printf("after %ld jumps %ld in_handler 0 on_alarm %ld\n", (long)afters, (long)jumps, (long)alarms);
    return 0;
}

int main(int argc, char **argv)
{
    int alt = argc > 1 && strcmp(argv[1], "alt") == 0;
    nested = argc > 1 && strcmp(argv[1], "nested") == 0;
    const int is_storm = argc > 1 && strcmp(argv[1], "storm") == 0;
    const int mode = alt || nested || is_storm;
    const int rounds = argc > 1 + mode ? atoi(argv[1 + mode]) : is_storm ? 20000 : 1300;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sigaction(SIGUSR1, &sa, NULL);
    sa.sa_handler = on_alarm;
    if (alt) {
        static char stack[1 << 16];
        stack_t ss = {.ss_sp = stack, .ss_size = sizeof stack};
        sigaltstack(&ss, NULL);
        sa.sa_flags = SA_ONSTACK;
    }
    sigaction(SIGALRM, &sa, NULL);
    if (is_storm) return run_storm(rounds);
    struct itimerval it = {{0, 200}, {0, 200}};
    setitimer(ITIMER_REAL, &it, NULL);
    for (int round = 0; round < rounds; ++round) {
        if (sigsetjmp(env, 1) == 0) {
            in_loop = 1;
            for (;;) work(); /* interrupted by the timer, left by siglongjmp */
        }
        in_loop = 0;
        after();
    }
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    printf("after %ld jumps %ld in_handler %ld on_alarm %ld\n", (long)afters, (long)jumps, (long)in_handlers,
           (long)alarms);
    return 0;
}
