/* Probes in every state lsmod shows: one registered disabled, one on a function of another
 * module (params_module, loaded first): [GONE] once that module is unloaded. */
#include <linux/module.h>
#include <linux/kprobes.h>

static int pre(struct kprobe *p, struct pt_regs *regs) { return 0; }
static struct kprobe disabled = { .symbol_name = "sys_open", .pre_handler = pre, .flags = KPROBE_FLAG_DISABLED };
static struct kprobe other = { .symbol_name = "params_module:cleanup_module", .pre_handler = pre };

static int __init states_init(void)
{
	int ret = register_kprobe(&disabled);
	if (ret < 0)
		return ret;
	ret = register_kprobe(&other);
	if (ret < 0)
		unregister_kprobe(&disabled);
	return ret;
}
static void __exit states_exit(void)
{
	unregister_kprobe(&other);
	unregister_kprobe(&disabled);
}
module_init(states_init);
module_exit(states_exit);
MODULE_LICENSE("GPL");
