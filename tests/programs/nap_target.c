/* The program of issue 30's reproducers (tests/scripts/detach_test.sh): a loop that calls
 * `nap`, which sleeps, so that a call is nearly always in flight when a trace stops or a module
 * is removed. Each call's value is checked. On SIGTERM, or after SECONDS, it prints how many naps
 * it took, how many came back wrong and how many SIGINTs it received (it counts them and goes
 * on, as a program that handles Ctrl-C does), and exits 0.
 *   nap_target [US [SECONDS]]   naps of US microseconds (1000), for SECONDS (0: until SIGTERM) */
#include <signal.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static volatile sig_atomic_t stop, sigints;

__attribute__((noipa)) int nap(int us)
{
    usleep((useconds_t)us);
    return us;
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

int main(int argc, char **argv)
{
    int us = argc > 1 ? atoi(argv[1]) : 1000;
    double seconds = argc > 2 ? atof(argv[2]) : 0;
    signal(SIGTERM, on_term);
    signal(SIGINT, on_int);
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    printf("ready\n");
    fflush(stdout);
    long naps = 0, bad = 0;
    while (!stop) {
        if (nap(us) != us) bad++;
        naps++;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (seconds > 0 && (double)(now.tv_sec - t0.tv_sec) + (double)(now.tv_nsec - t0.tv_nsec) / 1e9 >= seconds) break;
    }
    printf("naps %ld bad %ld%s", naps, bad, seconds > 0 ? "" : "\n");
    if (seconds > 0) printf(" sigint %d %s\n", (int)sigints, stop ? "stopped" : "ran its time");
    return 0;
}
