/* A module whose init dereferences NULL: insmod fails with the fault, the process lives on. */
#include <linux/module.h>

static volatile int *volatile bad = (volatile int *)16; /* not NULL: UBSan would stop there first */

/* The faulting access itself is left uninstrumented: in a sanitizer build it would fault inside
 * the sanitizer's runtime, which does not survive being abandoned there (the process would not
 * either, without liveprobe). */
__attribute__((no_sanitize("address", "thread", "undefined"))) static int __init faulting_init(void)
{
	printk("faulting_init: about to fault\n");
	return *bad;
}
static void __exit faulting_exit(void) {}
module_init(faulting_init);
module_exit(faulting_exit);
MODULE_LICENSE("GPL");
