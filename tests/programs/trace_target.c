/*
 * The target of tests/scripts/trace_test.sh: calls whose counts, return values and nesting are
 * known in advance, so the tracer's output can be checked exactly.
 *
 *   lp_tr_square(n)      n = 1..5, returns n * n                       5 calls
 *   lp_tr_leaf()         1000 calls from main                          1000 calls
 *   lp_tr_fib(n)         fib(10), recursive                            177 calls, returns 55
 *   lp_tr_step(i)        4 threads x 250                               1000 calls
 *   lp_tr_jump(depth)    longjmp out of the 3rd level, 10 times        30 entries, 0 returns
 *   lp_tr_slow()         sleeps 2 ms                                   1 call, >= 2 ms
 *   lp_tr_square(6)      in a forked child, which exits                 returns 36 there
 *
 * For the values a p: or r: probe fetches (lp_fa_*, lp_sg_*, outside the lp_tr_* glob):
 *   lp_fa_open(path, flags)  ("/etc/hostname", 2) returns 15, (NULL, 0) returns -2
 *   lp_fa_area(&point)       {x 3, y 4, label "box"} returns 12; {x -7, y 5, "a long label
 *                            of more than sixty-three characters, to be cut where it must"}
 *   lp_fa_asm(a, b)          lea 1(%rdi),%rax; add %rsi,%rax; ret: at +4, %ax is a + 1
 *                            called with (41, 100): returns 142
 *   lp_fa_counter            a global: 42, then 43 while lp_fa_open(NULL) runs
 *   lp_sg_handler(sig)       the SIGUSR1 handler, raised 3 times: returns the signal number
 *   lp_deep(n)               recursion 5000 deep (5001 calls, the outermost returns 5000): every
 *                            call followed with the default --maxactive
 *
 * Usage: trace_target [wait]   (wait: sleep 1 s first, then run; for -p)
 *        trace_target long     lp_tr_leaf() once, then lp_long_call(), which sleeps 1.9 s (more
 *                              TSC cycles than 32 bits hold), and nothing else
 */
#include <pthread.h>
#include <signal.h>
#include <setjmp.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#define TRACED __attribute__((noipa, used))

TRACED long lp_tr_square(long n) { return n * n; }
TRACED long lp_deep(long n) { return n == 0 ? 0 : lp_deep(n - 1) + 1; }
TRACED int lp_tr_leaf(void) { return 7; }
TRACED long lp_tr_fib(long n) { return n < 2 ? n : lp_tr_fib(n - 1) + lp_tr_fib(n - 2); }
TRACED long lp_tr_step(long i) { return i + 1; }

struct lp_fa_point {
    long x;
    long y;
    const char *label;
};
long lp_fa_counter = 42;
TRACED long lp_fa_open(const char *path, int flags)
{
    if (!path) return lp_fa_counter++, -2;
    return (long)strlen(path) + flags;
}
TRACED long lp_fa_area(const struct lp_fa_point *p) { return p->x * p->y; }
long lp_fa_asm(long a, long b);
__asm__(".text\n.globl lp_fa_asm\n.type lp_fa_asm,@function\nlp_fa_asm:\n"
        "  lea 1(%rdi),%rax\n  add %rsi,%rax\n  ret\n.size lp_fa_asm,.-lp_fa_asm\n");
static volatile sig_atomic_t g_signals;
TRACED void lp_sg_handler(int sig) { g_signals += sig; }

static jmp_buf g_jb;
TRACED long lp_tr_jump(long depth)
{
    if (depth == 3) longjmp(g_jb, 1);
    return lp_tr_jump(depth + 1) + 1;
}

TRACED void lp_tr_slow(void)
{
    struct timespec ts = {0, 2000000};
    nanosleep(&ts, NULL);
}

static void *worker(void *arg)
{
    long sum = 0;
    for (long i = 0; i < 250; i++) sum += lp_tr_step(i);
    return (void *)sum;
}

TRACED long lp_long_call(void)
{
    struct timespec ts = {1, 900000000};
    nanosleep(&ts, NULL);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "long") == 0) return lp_tr_leaf() + lp_long_call() == 7 ? 0 : 1;
    if (argc > 1 && strcmp(argv[1], "wait") == 0) sleep(1);
    long total = 0;
    for (long n = 1; n <= 5; n++) total += lp_tr_square(n);
    for (int i = 0; i < 1000; i++) total += lp_tr_leaf();
    total += lp_tr_fib(10);
    pthread_t t[4];
    for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, worker, NULL);
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    for (int k = 0; k < 10; k++)
        if (setjmp(g_jb) == 0) lp_tr_jump(1);
    lp_tr_slow();
    struct lp_fa_point box = {3, 4, "box"};
    struct lp_fa_point strip = {-7, 5, "a long label of more than sixty-three characters, to be cut where it must"};
    long fa = lp_fa_open("/etc/hostname", 2) + lp_fa_open(NULL, 0) + lp_fa_area(&box) + lp_fa_area(&strip) +
              lp_fa_asm(41, 100);
    printf("deep: %ld\n", lp_deep(5000));
    signal(SIGUSR1, lp_sg_handler);
    for (int i = 0; i < 3; i++) raise(SIGUSR1);
    printf("fetch values: %ld, signals %d\n", fa, (int)g_signals);
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) _exit(lp_tr_square(6) == 36 ? 0 : 1);
    int status = 0;
    waitpid(child, &status, 0);
    printf("trace_target done: %ld, child %s\n", total, WIFEXITED(status) && WEXITSTATUS(status) == 0 ? "ok" : "failed");
    return 0;
}
