/* Functions that jump through pointers (issue 31, item 7), built at -O2 as a user's would be:
 *   dispatch   a tail call through a pointer (`jmp *%rax` after loading it from memory), as
 *              every C++ virtual call in tail position and every callback wrapper has;
 *   run        an interpreter's loop by computed goto (GCC's labels as values: the labels'
 *              addresses in a table in the data, `jmp *%rax` after each instruction);
 *   twice      the table's callee, and step, what dispatch calls;
 *   peek       a function shorter than the jump (a load and a ret).
 * Each must take the jump path: no address the program stores or computes lands inside the
 * bytes a jmp replaces at their entries. The program prints its own counts of each call.
 *
 *   indirect_jump_target [CALLS]   (100000 by default) */
#include <stdio.h>
#include <stdlib.h>

struct op {
    long (*fn)(long);
    long arg;
};

static long steps, runs, dispatches;

/* Shorter than the jump: a load and a ret, then the alignment padding the jmp also covers. */
__attribute__((noinline)) long peek(const long *p)
{
    return *p;
}

__attribute__((noinline)) long step(long x)
{
    ++steps;
    return x * 3 + 1;
}

__attribute__((noinline)) long twice(long x)
{
    ++steps;
    return x * 2;
}

__attribute__((noinline)) long dispatch(const struct op *o)
{
    ++dispatches;
    return o->fn(o->arg);
}

/* 0: add, 1: double, 2: end */
__attribute__((noinline)) long run(const unsigned char *code, long acc)
{
    static const void *const labels[] = {&&op_add, &&op_double, &&op_end};
    ++runs;
    goto *labels[*code++];
op_add:
    acc += 7;
    goto *labels[*code++];
op_double:
    acc = twice(acc);
    goto *labels[*code++];
op_end:
    return acc;
}

int main(int argc, char **argv)
{
    const long calls = argc > 1 ? atol(argv[1]) : 100000;
    static const unsigned char program[] = {0, 1, 0, 1, 2};
    struct op ops[2] = {{step, 1}, {twice, 2}};
    long sum = 0;
    for (long i = 0; i < calls; ++i) {
        sum += dispatch(&ops[i & 1]);
        sum += run(program, i & 15);
        sum += peek(&sum) & 1;
    }
    printf("dispatch %ld\nrun %ld\nsteps %ld\nsum %ld\n", dispatches, runs, steps, sum);
    return 0;
}
