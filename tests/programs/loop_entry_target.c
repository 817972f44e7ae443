/* Functions whose first instruction is also a loop's head (issue 31): built at -O2, each turn
 * of drain's do-while jumps back to its entry, and a probe there is hit once a turn, not once a
 * call. The tracer counts calls: the program says how many it made.
 *
 *   loop_entry_target [CALLS [TURNS]]   (1000 calls of drain, 1000 turns each) */
#include <stdio.h>
#include <stdlib.h>

static long drains;

__attribute__((noinline)) void drain(volatile int *q)
{
    do {
        *q = *q - 1;
    } while (*q > 0);
}

int main(int argc, char **argv)
{
    const int calls = argc > 1 ? atoi(argv[1]) : 1000;
    const int turns = argc > 2 ? atoi(argv[2]) : 1000;
    volatile int q;
    for (int i = 0; i < calls; ++i) {
        q = turns;
        drain(&q);
        ++drains;
    }
    printf("drain %ld\n", drains);
    return 0;
}
