/* A program that makes itself non-dumpable when asked (issue 32), as ssh-agent and gpg-agent do
 * at their start: on SIGUSR1 it calls prctl(PR_SET_DUMPABLE, 0) and says so on stdout. It sleeps
 * otherwise, until SIGTERM (tests/scripts/trust_test.sh). */
#include <signal.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <unistd.h>

static volatile sig_atomic_t asked, stop;

static void on_usr1(int sig) { (void)sig, asked = 1; }
static void on_term(int sig) { (void)sig, stop = 1; }

__attribute__((noipa)) void nap(void) { usleep(10000); }

int main(void)
{
    signal(SIGUSR1, on_usr1);
    signal(SIGTERM, on_term);
    printf("ready\n");
    fflush(stdout);
    while (!stop) {
        nap();
        if (asked) {
            asked = 0;
            prctl(PR_SET_DUMPABLE, 0);
            printf("non-dumpable %d\n", prctl(PR_GET_DUMPABLE));
            fflush(stdout);
        }
    }
    return 0;
}
