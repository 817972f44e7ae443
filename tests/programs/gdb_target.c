/* A program a debugger attaches to while it is stopped below two frames whose return
 * addresses liveprobe replaced (tests/scripts/gdb_backtrace.sh): inner() stops the process;
 * once continued, it prints the return handlers' counts. */
#include <liveprobe/kprobes.h>

#include <signal.h>
#include <stdio.h>
#include <sys/prctl.h>

static int returns;

static int on_return(struct kretprobe_instance *ri, struct pt_regs *regs)
{
    (void)ri;
    (void)regs;
    returns++;
    return 0;
}

__attribute__((noipa)) int lp_gdb_inner(void)
{
    raise(SIGSTOP);
    return 1;
}

__attribute__((noipa)) int lp_gdb_middle(void)
{
    int r = lp_gdb_inner();
    __asm__ volatile("" : "+r"(r));
    return r + 1;
}

__attribute__((noipa)) int lp_gdb_outer(void)
{
    int r = lp_gdb_middle();
    __asm__ volatile("" : "+r"(r));
    return r + 1;
}

int main(void)
{
    prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0); /* any debugger may attach */
    struct kretprobe middle = {0}, outer = {0};
    middle.kp.addr = (kprobe_opcode_t *)lp_gdb_middle;
    middle.handler = on_return;
    outer.kp.addr = (kprobe_opcode_t *)lp_gdb_outer;
    outer.handler = on_return;
    struct kretprobe *rps[] = {&middle, &outer};
    if (register_kretprobes(rps, 2) != 0) {
        fprintf(stderr, "register_kretprobes: %s\n", liveprobe_strerror(-1));
        return 1;
    }
    int r = lp_gdb_outer();
    unregister_kretprobes(rps, 2);
    printf("lp_gdb_outer returned %d, return handlers %d\n", r, returns);
    return 0;
}
