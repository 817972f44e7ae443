/* A threaded program that asks the kernel for any child of any kind (waitpid with __WALL):
 * it has none, and must find none while liveprobe traces it (tests/scripts/own_children_test.sh).
 * liveprobe's thread-stop helper, a clone with no exit signal, was left a zombie after it ran,
 * and this found it. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

__attribute__((noinline)) int work(int i)
{
    usleep(50000);
    return i;
}

static void *thread_main(void *arg)
{
    (void)arg;
    work(1);
    return NULL;
}

int main(void)
{
    pthread_t t;
    pthread_create(&t, NULL, thread_main, NULL);
    work(0);
    work(2);
    int status = 0;
    const pid_t r = waitpid(-1, &status, __WALL | WNOHANG);
    printf("waitpid(-1, __WALL|WNOHANG) = %d (%s)\n", (int)r, r < 0 ? strerror(errno) : "a child");
    pthread_join(t, NULL);
    return r < 0 && errno == ECHILD ? 0 : 1;
}
