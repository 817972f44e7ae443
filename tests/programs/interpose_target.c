/* A program that interposes pthread_mutex_lock and memcpy, as allocators, tracers and sanitizers
 * do (issue 31, part 5): liveprobe's own locking (its atexit and fork handlers, its handlers'
 * machinery) then goes through the program's functions, and must never be traced as the
 * program's calls. The program counts its own calls where it makes them, forks (children that
 * _exit at once) and starts threads; it prints "locks N memcpys M": what a trace of '*' must
 * count for pthread_mutex_lock and memcpy.
 *
 *   interpose_target [ROUNDS]   (20000 a thread, 2 threads) */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static long own_locks, own_memcpys, rounds = 20000;

__attribute__((noinline)) void *memcpy(void *d, const void *s, size_t n)
{
    char *dd = d;
    const char *ss = s;
    for (size_t i = 0; i < n; ++i) {
        dd[i] = ss[i];
        __asm__ volatile("");
    }
    return d;
}

__attribute__((noinline)) int pthread_mutex_lock(pthread_mutex_t *m)
{
    static int (*real)(pthread_mutex_t *);
    if (!real) real = (int (*)(pthread_mutex_t *))dlsym(RTLD_NEXT, "pthread_mutex_lock");
    return real(m);
}

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static char a[64], b[64];
static void *volatile copy = memcpy; /* called through a pointer: not inlined */

__attribute__((noinline)) void work(int i)
{
    pthread_mutex_lock(&mu);
    own_locks++;
    ((void *(*)(void *, const void *, size_t))copy)(a, b, 16 + i % 8);
    own_memcpys++;
    pthread_mutex_unlock(&mu);
}

static void *run(void *x)
{
    (void)x;
    for (int i = 0; i < rounds; ++i) work(i);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc > 1) rounds = atol(argv[1]);
    for (int k = 0; k < 3; ++k) {
        pid_t c = fork();
        if (c == 0) _exit(0);
        waitpid(c, NULL, 0);
    }
    pthread_t t[2];
    for (int i = 0; i < 2; ++i) pthread_create(&t[i], NULL, run, NULL);
    for (int i = 0; i < 2; ++i) pthread_join(t[i], NULL);
    printf("locks %ld memcpys %ld\n", own_locks, own_memcpys);
    return 0;
}
