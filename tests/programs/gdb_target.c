/* A program a debugger attaches to while it is stopped (tests/scripts/gdb_backtrace.sh):
 *   below:  in lp_gdb_inner, below two frames whose return addresses liveprobe replaced;
 *   pre:    in a kprobe's pre handler at lp_gdb_inner's entry (and the two return probes);
 *   return: in lp_gdb_middle's return handler.
 * Once continued, it prints what the handlers counted. */
#include <liveprobe/kprobes.h>

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>

static int returns, pres;
static int stop_in_inner, stop_in_pre, stop_in_return;

static int on_return(struct kretprobe_instance *ri, struct pt_regs *regs)
{
    (void)regs;
    returns++;
    if (stop_in_return && ri->rp->kp.addr != NULL && returns == 1) raise(SIGSTOP);
    return 0;
}

static int on_pre(struct kprobe *p, struct pt_regs *regs)
{
    (void)p;
    (void)regs;
    pres++;
    if (stop_in_pre) raise(SIGSTOP);
    return 0;
}

__attribute__((noipa)) int lp_gdb_inner(void)
{
    if (stop_in_inner) raise(SIGSTOP);
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

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "below";
    stop_in_inner = strcmp(mode, "below") == 0;
    stop_in_pre = strcmp(mode, "pre") == 0;
    stop_in_return = strcmp(mode, "return") == 0;
    if (!stop_in_inner && !stop_in_pre && !stop_in_return) {
        fprintf(stderr, "usage: %s [below|pre|return]\n", argv[0]);
        return 2;
    }
    prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0); /* any debugger may attach */
    struct kretprobe middle = {0}, outer = {0};
    middle.kp.addr = (kprobe_opcode_t *)lp_gdb_middle;
    middle.handler = on_return;
    outer.kp.addr = (kprobe_opcode_t *)lp_gdb_outer;
    outer.handler = on_return;
    struct kretprobe *rps[] = {&middle, &outer};
    struct kprobe inner = {0};
    inner.addr = (kprobe_opcode_t *)lp_gdb_inner;
    inner.pre_handler = on_pre;
    if (register_kretprobes(rps, 2) != 0 || register_kprobe(&inner) != 0) {
        fprintf(stderr, "register: %s\n", liveprobe_strerror(-1));
        return 1;
    }
    int r = lp_gdb_outer();
    unregister_kprobe(&inner);
    unregister_kretprobes(rps, 2);
    printf("lp_gdb_outer returned %d, return handlers %d, pre handlers %d\n", r, returns, pres);
    return 0;
}
