/* A module whose exit dereferences NULL after unregistering its probe: rmmod still unloads it,
 * says what happened, and the process lives on. */
#include <linux/module.h>
#include <linux/kprobes.h>

static int pre(struct kprobe *p, struct pt_regs *regs) { return 0; }
static struct kprobe kp = { .symbol_name = "sys_open", .pre_handler = pre };

static int __init faulting_init(void) { return register_kprobe(&kp); }
static volatile int *volatile bad = (volatile int *)16; /* not NULL: UBSan would stop there first */

/* The faulting access itself is left uninstrumented: in a sanitizer build it would fault inside
 * the sanitizer's runtime, which does not survive being abandoned there (the process would not
 * either, without liveprobe). */
__attribute__((no_sanitize("address", "thread", "undefined"))) static void __exit faulting_exit(void)
{
	unregister_kprobe(&kp);
	*bad = 1;
}
module_init(faulting_init);
module_exit(faulting_exit);
MODULE_LICENSE("GPL");
