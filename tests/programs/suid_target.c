/* A program linked with libliveprobe that the test installs set-uid (issue 32): with
 * LIVEPROBE_AGENT=1 in its environment an ordinary program starts the agent at load; a set-uid
 * one must not (secure_getenv), nor take any other LIVEPROBE_* variable from whoever ran it.
 * Says "ready", then sleeps until SIGTERM (tests/scripts/trust_test.sh). */
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

#include <liveprobe/kprobes.h>

static volatile sig_atomic_t stop;
static void on_term(int sig) { (void)sig, stop = 1; }

int main(void)
{
    signal(SIGTERM, on_term);
    printf("ready (%s)\n", liveprobe_strerror(0));
    fflush(stdout);
    while (!stop) usleep(10000);
    return 0;
}
