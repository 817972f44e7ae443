/* A library of the typed target's (scripts/typed_test.sh), linked by it and built -O2 -g with a
 * soname that is not its file's name (liblp_typed_lib.so.1, file liblp_typed_lib.so.1.0.0): a
 * source line in a library, a line inlined into two functions, and a function GCC splits into a
 * hot and a cold part. */
#include <stdio.h>
#include <stdlib.h>

/* Inlined into both callers: line 11 has a copy in each. */
static inline int lp_tl_step(int acc, int v)
{
    int sq = v * v;
    return acc + sq;
}

__attribute__((noinline)) int lp_tl_sum(const int *v, int n)
{
    int acc = 0;
    for (int i = 0; i < n; ++i) acc = lp_tl_step(acc, v[i]);
    return acc;
}

__attribute__((noinline)) int lp_tl_sum_odd(const int *v, int n)
{
    int acc = 0;
    for (int i = 1; i < n; i += 2) acc = lp_tl_step(acc, v[i]);
    return acc;
}

__attribute__((cold, noinline)) void lp_tl_complain(int v, int limit) { fprintf(stderr, "%d is over %d\n", v, limit); }

/* The path to abort() goes to lp_tl_checked.cold: the function's DWARF has two ranges. */
__attribute__((noinline)) int lp_tl_checked(const int *v, int n, int limit)
{
    int total = 0;
    for (int i = 0; i < n; ++i) {
        if (v[i] > limit) {
            lp_tl_complain(v[i], limit);
            abort();
        }
        total += v[i] * 2;
    }
    return total;
}
