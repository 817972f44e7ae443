/* A program for the attach tests (tests/scripts/attach_test.sh): it does one thing that an
 * attach must not disturb, says "ready" on stdout when it is doing it, and reports at the end
 * what it saw, so that the test can compare it with what an unattached run reports.
 *
 *   busy SECONDS      main and 4 more threads compute in floating point and integer registers,
 *                     checking each round against the first: "busy ok ROUNDS" or "MISMATCH"
 *   blocked SECONDS   the same with every signal blocked in every thread
 *   workers SECONDS   4 threads compute, the main thread waits for them
 *   read FIFO         blocks in read() on FIFO: "read N bytes: DATA" or the error
 *   nanosleep MS      nanosleep(MS): "slept X ms rc R" (X >= MS, R 0)
 *   clock_nanosleep MS
 *   accept PATH       accept() on a Unix socket at PATH: "accepted" or the error
 *   connect PATH      (not a target) connects to the Unix socket at PATH and exits: 0 if it could
 *   epoll FIFO        epoll_wait(-1) on FIFO: "epoll_wait 1" or the error
 *   poll FIFO         poll(-1) on FIFO: "poll 1" or the error
 *   futex MS          FUTEX_WAIT with a timeout of MS on a word nobody changes:
 *                     "futex ETIMEDOUT after X ms" (X >= MS)
 *   exit MS           exits after MS milliseconds
 *   fork SECONDS      forks a child; both sleep SECONDS ("child PID" first)
 *   ticks SECONDS     the main thread loops on the clock alone for SECONDS: "ticks ok, longest
 *                     pause X ms" (how long an attach, or a tool killed during one, stopped it)
 *   waiter SECONDS    the main thread calls waitpid(-1, WNOHANG) in a loop, as a shell or a
 *                     server that reaps its workers does, though it has no child: "waiter: no
 *                     child seen" or "waiter: saw PID" (liveprobe's helper must stay invisible)
 *   log N             (under the agent) writes "hello 0".."hello N-1" to the process's log,
 *                     then "tick K" every 100 ms for 3 s
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/futex.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static void ready(void)
{
    printf("ready\n");
    fflush(stdout);
}

/* One round: values kept in xmm and general registers across a long loop. */
__attribute__((noipa)) static uint64_t round_of_work(uint64_t seed)
{
    double a = 1.0 + (double)(seed % 7), b = 0.5, c = 0.25;
    uint64_t x = seed * 0x9e3779b97f4a7c15ull, y = 0x1234;
    for (int i = 0; i < 2000000; i++) {
        a = a * 1.0000001 + b;
        b = b * 0.9999999 + c;
        c = c + a * 1e-9;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        y += x ^ (uint64_t)i;
    }
    uint64_t bits;
    double s = a + b * 3 + c * 7;
    memcpy(&bits, &s, 8);
    return bits ^ x ^ y;
}

static double g_until;
static volatile int g_mismatch;
static volatile long g_rounds;

static void *worker(void *arg)
{
    uint64_t seed = (uint64_t)(uintptr_t)arg;
    uint64_t want = round_of_work(seed);
    while (now_ms() < g_until) {
        if (round_of_work(seed) != want) g_mismatch = 1;
        __atomic_fetch_add(&g_rounds, 1, __ATOMIC_RELAXED);
    }
    return NULL;
}

static int busy(double seconds, int block_all, int main_works)
{
    if (block_all) {
        sigset_t all;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, NULL);  /* inherited by the threads */
    }
    g_until = now_ms() + seconds * 1e3;
    pthread_t t[4];
    for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)(i + 1));
    ready();
    if (main_works) worker((void *)(uintptr_t)99);
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    if (g_mismatch) {
        printf("MISMATCH\n");
        return 1;
    }
    printf("busy ok %ld\n", g_rounds);
    return 0;
}

static int do_read(const char *fifo)
{
    int fd = open(fifo, O_RDWR);
    if (fd < 0) return perror("open"), 2;
    ready();
    char buf[256];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    if (n < 0) {
        printf("read -1 %s\n", strerror(errno));
        return 1;
    }
    buf[n] = 0;
    printf("read %zd bytes: %s\n", n, buf);
    return 0;
}

static int do_sleep(long ms, int clock)
{
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    ready();
    double t0 = now_ms();
    int rc = clock ? clock_nanosleep(CLOCK_MONOTONIC, 0, &t, NULL) : nanosleep(&t, NULL);
    if (clock && rc) errno = rc, rc = -1;
    double took = now_ms() - t0;
    printf("slept %.0f ms rc %d%s%s\n", took, rc, rc ? " " : "", rc ? strerror(errno) : "");
    return rc == 0 && took >= ms ? 0 : 1;
}

static int do_accept(const char *path)
{
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    strncpy(sa.sun_path, path, sizeof sa.sun_path - 1);
    unlink(path);
    if (bind(s, (struct sockaddr *)&sa, sizeof sa) || listen(s, 1)) return perror("bind"), 2;
    ready();
    int c = accept(s, NULL, NULL);
    if (c < 0) {
        printf("accept -1 %s\n", strerror(errno));
        return 1;
    }
    printf("accepted\n");
    return 0;
}

static int do_epoll(const char *fifo)
{
    int fd = open(fifo, O_RDWR);
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
    ready();
    struct epoll_event out;
    int n = epoll_wait(ep, &out, 1, -1);
    if (n < 0) {
        printf("epoll_wait -1 %s\n", strerror(errno));
        return 1;
    }
    printf("epoll_wait %d\n", n);
    return 0;
}

static int do_poll(const char *fifo)
{
    int fd = open(fifo, O_RDWR);
    struct pollfd p = {.fd = fd, .events = POLLIN};
    ready();
    int n = poll(&p, 1, -1);
    if (n < 0) {
        printf("poll -1 %s\n", strerror(errno));
        return 1;
    }
    printf("poll %d\n", n);
    return 0;
}

static int do_futex(long ms)
{
    static int word = 0;
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    ready();
    double t0 = now_ms();
    long r = syscall(SYS_futex, &word, FUTEX_WAIT_PRIVATE, 0, &t, NULL, 0);
    double took = now_ms() - t0;
    if (r == -1 && errno == ETIMEDOUT) {
        printf("futex ETIMEDOUT after %.0f ms\n", took);
        return took >= ms ? 0 : 1;
    }
    printf("futex %ld %s after %.0f ms\n", r, strerror(errno), took);
    return 1;
}

static int ticks(double seconds)
{
    ready();
    double t0 = now_ms(), last = t0, longest = 0;
    for (double now; (now = now_ms()) - t0 < seconds * 1000; last = now)
        if (now - last > longest) longest = now - last;
    printf("ticks ok, longest pause %.0f ms\n", longest);
    return 0;
}

static int waiter(double seconds)
{
    ready();
    double t0 = now_ms();
    while (now_ms() - t0 < seconds * 1000) {
        int st = 0;
        pid_t w = waitpid(-1, &st, WNOHANG);
        if (w > 0 || (w < 0 && errno != ECHILD)) {
            printf("waiter: saw %d (%s)\n", (int)w, w < 0 ? strerror(errno) : "a child");
            return 1;
        }
        usleep(500);
    }
    printf("waiter: no child seen\n");
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODE ARG\n", argv[0]);
        return 2;
    }
    const char *mode = argv[1], *arg = argv[2];
    if (!strcmp(mode, "busy")) return busy(atof(arg), 0, 1);
    if (!strcmp(mode, "blocked")) return busy(atof(arg), 1, 1);
    if (!strcmp(mode, "workers")) return busy(atof(arg), 0, 0);
    if (!strcmp(mode, "ticks")) return ticks(atof(arg));
    if (!strcmp(mode, "waiter")) return waiter(atof(arg));
    if (!strcmp(mode, "read")) return do_read(arg);
    if (!strcmp(mode, "nanosleep")) return do_sleep(atol(arg), 0);
    if (!strcmp(mode, "clock_nanosleep")) return do_sleep(atol(arg), 1);
    if (!strcmp(mode, "accept")) return do_accept(arg);
    if (!strcmp(mode, "connect")) {
        int s = socket(AF_UNIX, SOCK_STREAM, 0);
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        strncpy(sa.sun_path, arg, sizeof sa.sun_path - 1);
        return connect(s, (struct sockaddr *)&sa, sizeof sa) == 0 ? 0 : (perror("connect"), 1);
    }
    if (!strcmp(mode, "epoll")) return do_epoll(arg);
    if (!strcmp(mode, "poll")) return do_poll(arg);
    if (!strcmp(mode, "futex")) return do_futex(atol(arg));
    if (!strcmp(mode, "exit")) {
        ready();
        usleep(atol(arg) * 1000);
        return 0;
    }
    if (!strcmp(mode, "log")) {
        void (*log)(const char *, size_t) = (void (*)(const char *, size_t))dlsym(RTLD_DEFAULT, "liveprobe_log_write");
        if (!log) return fprintf(stderr, "no liveprobe_log_write: not under the agent\n"), 2;
        char line[64];
        for (int i = 0; i < atoi(arg); i++) log(line, (size_t)snprintf(line, sizeof line, "hello %d", i));
        ready();
        for (int k = 0; k < 30; k++) {
            usleep(100000);
            log(line, (size_t)snprintf(line, sizeof line, "tick %d", k));
        }
        return 0;
    }
    if (!strcmp(mode, "fork")) {
        pid_t c = fork();
        if (c == 0) {
            sleep(atoi(arg));
            return 0;
        }
        printf("child %d\n", c);
        ready();
        sleep(atoi(arg));
        waitpid(c, NULL, 0);
        return 0;
    }
    fprintf(stderr, "unknown mode %s\n", mode);
    return 2;
}
