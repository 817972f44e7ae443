/* swapcontext between two stacks while probed calls are in flight on both (issue 31, part 3):
 * main's `step` (probed) switches to a coroutine whose `body` (probed, entered once, never
 * returns) calls `leaf` (probed) and switches back, so that `step` returns on the main stack
 * while `body` is in flight on the other, every round. Each call must be traced as the program
 * counts it (siglongjmp_test.sh).
 *
 *   swapcontext_target [ROUNDS]   (100000) */
#include <stdio.h>
#include <stdlib.h>
#include <ucontext.h>

static ucontext_t main_ctx, co_ctx;
static volatile long steps, leaves, bodies;

__attribute__((noinline)) void leaf(void) { leaves++; }

__attribute__((noinline)) void body(void)
{
    bodies++;
    for (;;) {
        leaf();
        swapcontext(&co_ctx, &main_ctx);
    }
}

__attribute__((noinline)) void step(void)
{
    steps++;
    swapcontext(&main_ctx, &co_ctx);
}

int main(int argc, char **argv)
{
    const int rounds = argc > 1 ? atoi(argv[1]) : 100000;
    static char stack[1 << 16];
    getcontext(&co_ctx);
    co_ctx.uc_stack.ss_sp = stack;
    co_ctx.uc_stack.ss_size = sizeof stack;
    co_ctx.uc_link = &main_ctx;
    makecontext(&co_ctx, body, 0);
    for (int i = 0; i < rounds; ++i) step();
    printf("step %ld leaf %ld body %ld\n", (long)steps, (long)leaves, (long)bodies);
    return 0;
}
