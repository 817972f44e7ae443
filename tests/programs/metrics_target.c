/* The target of trace --serve's test with a real Prometheus (scripts/metrics_prometheus_test.sh):
 * calls whose numbers and durations are known. `metrics_target FAST SLOW` waits; each SIGUSR1
 * runs one burst of FAST calls of op_fast (nanoseconds each) and SLOW calls of op_slow (each
 * spinning 1.5 ms on the monotonic clock: in the log2 bucket (2^20, 2^21] ns, near its middle),
 * then prints "burst N: FAST fast, SLOW slow, sum S", S a sum of what the calls returned, the
 * same traced or not. With REEXEC_SECONDS, it first waits that long and executes itself again
 * (the same pid), without it. -O2: the functions aligned, the padding after op_fast lets its return
 * probe take the jump path (nanoseconds). An ordinary program: no liveprobe. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t asked;
static void on_usr1(int sig) { (void)sig; asked++; }

__attribute__((noipa)) long op_fast(long i) { return i * 3 + 1; }

static long now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000L + t.tv_nsec;
}

__attribute__((noipa)) long op_slow(long i)
{
    const long end = now_ns() + 1500000;
    long spins = 0;
    while (now_ns() < end) ++spins;
    return i + (spins > 0);
}

/* Never called: a third spec for the test's restarted tool. */
__attribute__((noipa)) long op_idle(long i) { return i - 1; }

int main(int argc, char **argv)
{
    if (argc != 3 && argc != 4) {
        fprintf(stderr, "usage: metrics_target FAST SLOW [REEXEC_SECONDS]\n");
        return 2;
    }
    if (argc == 4) { /* a server that executes itself again, the same pid (HAProxy's reload) */
        char self[4096];
        const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        if (n <= 0) return 1;
        self[n] = 0;
        sleep((unsigned)atoi(argv[3]));
        execl(self, argv[0], argv[1], argv[2], (char *)NULL); /* its name (comm) is its file's */
        return 1;
    }
    const long fast = atol(argv[1]), slow = atol(argv[2]);
    struct sigaction sa = {0};
    sa.sa_handler = on_usr1;
    sigaction(SIGUSR1, &sa, NULL);
    setvbuf(stdout, NULL, _IOLBF, 0);
    printf("ready\n");
    int done = 0;
    for (;;) {
        while (done == asked) {
            struct timespec t = {0, 10000000};
            nanosleep(&t, NULL);
        }
        long sum = 0;
        for (long i = 0; i < fast; ++i) sum += op_fast(i);
        for (long i = 0; i < slow; ++i) sum += op_slow(i);
        ++done;
        printf("burst %d: %ld fast, %ld slow, sum %ld\n", done, fast, slow, sum + (argc > 4 ? op_idle(0) : 0));
    }
}
