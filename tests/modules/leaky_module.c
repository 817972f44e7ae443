/* Old-style module that forgets to unregister its kretprobe in cleanup_module: rmmod must
 * unregister it (and say so in the log) before unmapping the module. */
#include <linux/module.h>
#include <linux/kprobes.h>

static int ret_handler(struct kretprobe_instance *ri, struct pt_regs *regs) { return 0; }
static struct kretprobe rp = { .handler = ret_handler, .kp.symbol_name = "sys_open" };

int init_module(void) { return register_kretprobe(&rp); }
void cleanup_module(void) { printk("leaky_module: leaving my probe behind\n"); }
MODULE_LICENSE("GPL");
