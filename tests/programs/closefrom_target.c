/* A program that closes every descriptor above 2 and opens files of its own while liveprobe is
 * in it, as a daemon does before it serves (closefrom, close_range): liveprobe's descriptors,
 * the ones it keeps between traces (/proc/self/mem, the objects it read), must not be among
 * the program's numbers, and one the program closed under liveprobe must never be written.
 *   closefrom_target DIR
 * Calls `work` in a loop. On SIGUSR1: closes every descriptor from 3 up, opens 16 files
 * DIR/f0..f15 (each gets the lowest free number, 3 to 18), writes "file N\n" in each and keeps
 * them open, then says "reopened" on stdout. On SIGTERM: prints its descriptors from 3 to 511
 * and the calls of work, and exits 0. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t reopen, stop;

static void on_usr1(int sig) { (void)sig; reopen = 1; }
static void on_term(int sig) { (void)sig; stop = 1; }

__attribute__((noipa)) long work(long x) { return x * 7 + 1; }

int main(int argc, char **argv)
{
    if (argc < 2) return 2;
    signal(SIGUSR1, on_usr1);
    signal(SIGTERM, on_term);
    long calls = 0, sum = 0;
    printf("ready\n");
    fflush(stdout);
    while (!stop) {
        sum += work(calls++);
        if (reopen) {
            reopen = 0;
            for (int fd = 3; fd < 1024; ++fd) close(fd);
            for (int i = 0; i < 16; ++i) {
                char path[4096], text[32];
                snprintf(path, sizeof path, "%s/f%d", argv[1], i);
                const int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
                const int n = snprintf(text, sizeof text, "file %d\n", i);
                if (fd < 0 || write(fd, text, (size_t)n) != n) return 3;
            }
            printf("reopened\n");
            fflush(stdout);
        }
        if ((calls & 0xffff) == 0) usleep(1000);
    }
    printf("fds:");
    for (int fd = 3; fd < 512; ++fd)
        if (fcntl(fd, F_GETFD) >= 0) printf(" %d", fd);
    printf("\nwork %ld sum %ld\n", calls, sum);
    return 0;
}
