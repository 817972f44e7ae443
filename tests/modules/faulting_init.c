/* A module whose init dereferences NULL: insmod fails with the fault, the process lives on. */
#include <linux/module.h>

static int __init faulting_init(void)
{
	volatile int *p = NULL;
	printk("faulting_init: about to fault\n");
	return *p;
}
static void __exit faulting_exit(void) {}
module_init(faulting_init);
module_exit(faulting_exit);
MODULE_LICENSE("GPL");
