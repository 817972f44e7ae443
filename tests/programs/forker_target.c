/* A prefork server's shape, for trace --serve's test (scripts/metrics_serve_test.sh): the parent
 * forks a worker every 0.5 s and never calls op itself; each worker waits 3 s, calls op 100 times,
 * then lives 2 s more and exits. Each worker prints "worker PID done" after its calls. An
 * ordinary program: no liveprobe. */
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

__attribute__((noipa)) long op(long i) { return i + 1; }

static void nap(long ms)
{
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGCHLD, SIG_DFL);
    printf("ready\n");
    for (;;) {
        pid_t p = fork();
        if (p == 0) {
            nap(3000);
            long sum = 0;
            for (long i = 0; i < 100; ++i) sum += op(i);
            printf("worker %d done %ld\n", (int)getpid(), sum);
            nap(2000);
            _exit(0);
        }
        nap(500);
        while (waitpid(-1, NULL, WNOHANG) > 0) {
        }
    }
}
