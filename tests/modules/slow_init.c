/* A module whose init takes 3 s: the target can be killed while `insmod` waits for it. */
#include <linux/module.h>
#include <unistd.h>

static int __init slow_init(void)
{
	sleep(3);
	return 0;
}
static void __exit slow_exit(void) {}
module_init(slow_init);
module_exit(slow_exit);
MODULE_LICENSE("GPL");
