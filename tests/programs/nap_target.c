/* The program of issue 30's reproducers (tests/scripts/detach_test.sh): a loop that calls
 * `nap`, which sleeps, so that a call is nearly always in flight when a trace stops or a module
 * is removed. Each call's value is checked. On SIGTERM it prints how many naps it took and how
 * many came back wrong, and exits 0.
 *   nap_target US   sleep US microseconds a nap (default 1000) */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static volatile sig_atomic_t stop;

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

int main(int argc, char **argv)
{
    int us = argc > 1 ? atoi(argv[1]) : 1000;
    signal(SIGTERM, on_term);
    printf("ready\n");
    fflush(stdout);
    long naps = 0, bad = 0;
    while (!stop) {
        if (nap(us) != us) bad++;
        naps++;
    }
    printf("naps %ld bad %ld\n", naps, bad);
    return 0;
}
