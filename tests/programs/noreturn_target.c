/* The target of tests/scripts/stacks_test.sh's noreturn check: a program that ends at once, in a
 * call that never returns. nr_fail's call of nr_bail is its last instruction, so the return
 * address it leaves is the first byte of nr_next (built with -falign-functions=1: no padding
 * between them): a stack names that frame by the call, nr_fail, not by nr_next. */
#include <stdlib.h>

__attribute__((noinline, noreturn)) void nr_bail(int code) { exit(code); }
__attribute__((noinline)) void nr_fail(int x)
{
    if (x) nr_bail(0);
}
__attribute__((noinline)) int nr_next(int x) { return x + 1; }

int main(int argc, char **argv)
{
    (void)argv;
    nr_fail(argc);
    return nr_next(argc);
}
