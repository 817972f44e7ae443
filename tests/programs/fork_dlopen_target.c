/* Forks while another thread calls dlopen again and again (exec_follow_test.sh): with a trace
 * whose spec waits for a library not loaded, each dlopen's return takes the sessions' lock to
 * look for it; a child forked meanwhile inherited that lock held, and its exit() (liveprobe's
 * exit handler takes it) blocked for ever. Each child exit()s at once; the parent
 * waits for each at most 10 s, and says how many hung.
 *
 *   fork_dlopen_target LIBRARY [FORKS]   (200) */
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *library;
static volatile int stop;

static void *opener(void *x)
{
    (void)x;
    while (!stop) {
        /* Never closed: dlclose takes libc's exit-handlers lock, which a child forked then
         * inherits held (its exit() would hang without liveprobe as well). */
        (void)dlopen(library, RTLD_NOW);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 2) return 2;
    library = argv[1];
    const int forks = argc > 2 ? atoi(argv[2]) : 200;
    pthread_t t;
    pthread_create(&t, NULL, opener, NULL);
    int hung = 0;
    for (int i = 0; i < forks; ++i) {
        pid_t c = fork();
        if (c == 0) exit(0); /* exit handlers run, liveprobe's among them */
        int waited = 0;
        while (waitpid(c, NULL, WNOHANG) == 0) {
            if (++waited > 10000) { /* 10 s */
                ++hung;
                kill(c, SIGKILL);
                waitpid(c, NULL, 0);
                break;
            }
            usleep(1000);
        }
    }
    stop = 1;
    pthread_join(t, NULL);
    printf("forks %d hung %d\n", forks, hung);
    return hung != 0;
}
