/* A program that forks, whose traced calls come in one order every run, for the golden-file
 * tests of the trace outputs (scripts/trace_fork_golden_test.sh): the parent calls before_fork
 * (which returns 1), forks and waits; the child calls in_child (2), then a thread of its own
 * calls in_thread (5), then the child calls in_child (4) and exits; the parent then calls
 * after_wait (5). No two calls overlap, so their order is their time order.
 *
 * Each thread and process stays alive a while after its first traced call: the tool names a
 * Chrome trace's processes and threads from /proc when it reads their first event (a few ms
 * later), and a name read after its owner was gone would be "thread N" instead. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile long sink;
__attribute__((noinline)) long before_fork(long x) { return sink += x; }
__attribute__((noinline)) long in_child(long x) { return sink += x; }
__attribute__((noinline)) long in_thread(long x) { return sink += x; }
__attribute__((noinline)) long after_wait(long x) { return sink += x; }

static const useconds_t kLinger = 300000; /* us */
static int release[2];

static void *worker(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "child-worker");  /* its name in Chrome's metadata */
    in_thread(3);
    char c;
    if (read(release[0], &c, 1) != 1) return NULL; /* alive until the child is done */
    return NULL;
}

int main(void)
{
    sink = 0;
    before_fork(1);
    usleep(kLinger);
    pid_t child = fork();
    if (child == 0) {
        in_child(1);  /* sink is 2 */
        usleep(kLinger);
        if (pipe(release) != 0) _exit(1);
        pthread_t t;
        pthread_create(&t, NULL, worker, NULL);
        while (sink != 5) usleep(1000);  /* in_thread returned */
        in_child(-1);  /* 4 */
        usleep(kLinger);
        if (write(release[1], "x", 1) != 1) _exit(1);
        pthread_join(t, NULL);
        printf("child done %ld\n", sink);
        fflush(stdout);
        _exit(0);
    }
    int status = 0;
    waitpid(child, &status, 0);
    after_wait(4);  /* 5 */
    printf("parent done %ld, child status %d\n", sink, status);
    return 0;
}
