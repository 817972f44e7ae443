/* A program the agent cannot be loaded into (issue 32, item 5): built static, and once more
 * with musl's loader named as its interpreter (never run: the tool refuses it first). `run` and
 * `trace --` started the static one without an agent and said nothing (scripts/attach_test.sh). */
#include <stdio.h>

int main(void)
{
    puts("ran");
    return 0;
}
