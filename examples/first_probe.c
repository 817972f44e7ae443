#include <liveprobe/kprobes.h>
#include <stdio.h>

__attribute__((noinline)) int add(int a, int b) { return a + b; }
static volatile int hits;
static int on_add(struct kprobe *p, struct pt_regs *regs) { (void)p; hits += regs->di == 2; return 0; }

int main(void) {
    struct kprobe kp = {.symbol_name = "add", .pre_handler = on_add};
    int err = register_kprobe(&kp);
    if (err) { fprintf(stderr, "register_kprobe: %s\n", liveprobe_strerror(err)); return 1; }
    int sum = add(2, 3);                 /* the handler runs first, with add's registers */
    unregister_kprobe(&kp);
    printf("add(2, 3) = %d; the handler ran %d time(s)\n", sum, hits);
    return !(sum == 5 && hits == 1);
}
