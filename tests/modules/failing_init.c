/* A module whose init registers a probe and then fails: the load must fail with its error, and
 * leave nothing behind (the probe unregistered, the module unmapped). */
#include <linux/module.h>
#include <linux/kprobes.h>

static int pre(struct kprobe *p, struct pt_regs *regs) { return 0; }
static struct kprobe kp = { .symbol_name = "do_sys_open", .pre_handler = pre };

static int __init failing_init(void)
{
	int ret = register_kprobe(&kp);
	printk(KERN_ERR "failing_init: registered: %d; now failing with -ENODEV\n", ret);
	return -ENODEV;
}

static void __exit failing_exit(void) { unregister_kprobe(&kp); }

module_init(failing_init);
module_exit(failing_exit);
MODULE_LICENSE("GPL");
