/* Functions that return twice to their caller, called as programs call them: setjmp (again
 * after each longjmp) and vfork (first in the child, on the parent's stack, then in the
 * parent). A return probe on either took the first return's record, and the second found none:
 * "a function returned through the kretprobe trampoline with no record of where it returns
 * to; aborting" (tests/scripts/siglongjmp_test.sh).
 *   returns_twice_target
 * Prints "setjmp returned 3 times, vfork child 0, jumps 3" and exits 0. */
#include <setjmp.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

static jmp_buf jb;

__attribute__((noinline)) void jump(int i) { longjmp(jb, i); }

int main(void)
{
    volatile int jumps = 0;
    int r = setjmp(jb);
    if (r < 3) {
        jumps = jumps + 1;
        jump(r + 1);
    }
    int status = -1;
    pid_t p = vfork();
    if (p == 0) _exit(0);
    waitpid(p, &status, 0);
    printf("setjmp returned %d times, vfork child %d, jumps %d\n", r, WEXITSTATUS(status), jumps);
    return 0;
}
