/*jprobes-sample.c */
#include <linux/kernel.h>
#include <linux/module.h>
#include <linux/fs.h>
#include <linux/uio.h>
#include <linux/kprobes.h>

/* 
 * Jumper probe for do_fork. 
 * Mirror principle enables access to arguments of the probed routine 
 * from the probe handler.
 */

/* Proxy routine having the same arguments as that of actual do_fork() routine */

long jdo_fork(unsigned long clone_flags, unsigned long stack_start,
	      struct pt_regs *regs, unsigned long stack_size,
	      int __user * parent_tidptr, int __user * child_tidptr)
{
	printk("jprobe: clone_flags=0x%x,  stack_size=0x%x, pt_regs=0x%x",
	       clone_flags, stack_size, regs);
	/* dont forget to do a jprobe_return() */
	jprobe_return();
}

static struct jprobe my_jprobe = {
	.entry = (kprobe_opcode_t *) jdo_fork
};

int init_module(void)
{
	int ret;
	/* first time invokation to initialize probe handler */

	my_jprobe.kp.addr = (kprobe_opcode_t *) kallsyms_lookup_name("do_fork");
	if (!my_jprobe.kp.addr) {
		printk("couldn't find %s to plant jprobe\n", "do_fork");
		return -1;
	}

	/* now we are all set to register the probe */
	if ((ret = register_jprobe(&my_jprobe)) <0)
		return -ENOSYS;
	printk("plant jprobe at %p, handler addr %p\n",
	       my_jprobe.kp.addr, my_jprobe.entry);
	return 0;
}

void cleanup_module(void)
{
	unregister_jprobe(&my_jprobe);
	printk("jprobe unregistered\n");
}

MODULE_LICENSE("GPL");
