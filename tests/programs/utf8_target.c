/* A program that hands its function paths in UTF-8, and bytes that are no UTF-8, for the
 * tracer's JSON output (tests/scripts/trace_test.sh, tests/golden/utf8_events.json): a path
 * "café.txt", one with two stray bytes, one with a C1 control (CSI, which a terminal acts on),
 * and two characters of 3 and 4 bytes. Prints "sum N". */
#include <stdio.h>

__attribute__((noinline)) int open_named(const char *path) { return path[0]; }

int main(void)
{
    const char *names[] = {"caf\xc3\xa9.txt", "bad\xff\xfe.txt", "c1\xc2\x9b[31m.txt", "\xe2\x82\xac\xf0\x9f\x98\x80"};
    int sum = 0;
    for (int i = 0; i < 4; i++) sum += open_named(names[i]);
    printf("sum %d\n", sum);
    return 0;
}
