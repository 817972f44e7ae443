/* A module with an init and no exit: as in the kernel, it cannot be unloaded. */
#include <linux/module.h>

static int __init no_exit_init(void) { return 0; }
module_init(no_exit_init);
MODULE_LICENSE("GPL");
