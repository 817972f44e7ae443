/* A first probe: the example of README.md. The install test builds it against an installed
 * liveprobe, with pkg-config and with CMake's find_package. Exit code 0: the handler ran once. */
#include <liveprobe/kprobes.h>
#include <signal.h>
#include <stdio.h>

__attribute__((noinline)) int add(int a, int b) { return a + b; }

static volatile sig_atomic_t hits;

static int on_add(struct kprobe *p, struct pt_regs *regs)
{
    (void)p;
    if (regs_get_kernel_argument(regs, 0) == 2) hits++; /* a = 2: the call below */
    return 0; /* run add as usual */
}

int main(void)
{
    struct kprobe kp = {.symbol_name = "add", .pre_handler = on_add};
    int err = register_kprobe(&kp);
    if (err) {
        fprintf(stderr, "register_kprobe: %s\n", liveprobe_strerror(err));
        return 1;
    }
    int sum = add(2, 3);
    unregister_kprobe(&kp);
    printf("add(2, 3) = %d; the handler ran %d time(s)\n", sum, (int)hits);
    return sum == 5 && hits == 1 ? 0 : 1;
}
