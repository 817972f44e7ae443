/* The program of issue 30's reproducers (tests/scripts/detach_test.sh): a loop that calls
 * `nap`, which sleeps, so that a call is nearly always in flight when a trace stops or a module
 * is removed. Each call's value is checked. On SIGTERM, or after SECONDS, it prints how many naps
 * it took, how many came back wrong and how many SIGINTs it received (it counts them and goes
 * on, as a program that handles Ctrl-C does), and exits 0.
 *   nap_target [US [SECONDS [THREADS [DEPTH [BLOCK]]]]]
 *     naps of US microseconds (1000), for SECONDS (0: until SIGTERM); with THREADS, that many
 *     more threads each call nap_rec(DEPTH) in a loop: a recursion DEPTH deep whose innermost
 *     call naps, every frame's value checked (so a probe on nap_rec has DEPTH + 1 calls of each
 *     thread in flight nearly all the time). BLOCK 1: those threads block every signal, as
 *     jemalloc's background thread or a server's workers that leave signals to one thread. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t stop, sigints;
static int us = 1000, depth = 5, block_all;
static long worker_naps, worker_bad; /* under g_mu */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;

__attribute__((noipa)) int nap(int n)
{
    usleep((useconds_t)n);
    return n;
}

__attribute__((noipa)) long nap_rec(int d)
{
    if (d == 0) return nap(us);
    long r = nap_rec(d - 1);
    __asm__ volatile("" : "+r"(r));
    return r + 1;
}

static void *worker(void *arg)
{
    (void)arg;
    long naps = 0, bad = 0;
    if (block_all) {
        sigset_t all;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, NULL);
    }
    while (!stop) {
        if (nap_rec(depth) != us + depth) bad++;
        naps++;
    }
    pthread_mutex_lock(&g_mu);
    worker_naps += naps;
    worker_bad += bad;
    pthread_mutex_unlock(&g_mu);
    return NULL;
}

static void on_term(int sig)
{
    (void)sig;
    stop = 1;
}

static void on_int(int sig)
{
    (void)sig;
    sigints++;
}

static double since(const struct timespec *t0)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - t0->tv_sec) + (double)(now.tv_nsec - t0->tv_nsec) / 1e9;
}

int main(int argc, char **argv)
{
    us = argc > 1 ? atoi(argv[1]) : 1000;
    double seconds = argc > 2 ? atof(argv[2]) : 0;
    int threads = argc > 3 ? atoi(argv[3]) : 0;
    depth = argc > 4 ? atoi(argv[4]) : 5;
    block_all = argc > 5 ? atoi(argv[5]) : 0;
    signal(SIGTERM, on_term);
    signal(SIGINT, on_int);
    pthread_t t[64];
    if (threads > 64) threads = 64;
    for (int i = 0; i < threads; ++i) pthread_create(&t[i], NULL, worker, NULL);
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    printf("ready\n");
    fflush(stdout);
    long naps = 0, bad = 0;
    while (!stop) {
        if (nap(us) != us) bad++;
        naps++;
        if (seconds > 0 && since(&t0) >= seconds) break;
    }
    const int stopped = stop; /* by SIGTERM, not by the time */
    stop = 1;
    for (int i = 0; i < threads; ++i) pthread_join(t[i], NULL);
    naps += worker_naps;
    bad += worker_bad;
    printf("naps %ld bad %ld%s", naps, bad, seconds > 0 ? "" : "\n");
    if (seconds > 0) printf(" sigint %d %s\n", (int)sigints, stopped ? "stopped" : "ran its time");
    return 0;
}
