/* Every compatibility header, mixed with the C library's in both orders, builds warning-free:
 * the headers glibc includes itself (<linux/limits.h>, <linux/kernel.h>, <linux/types.h>) keep
 * glibc working, and each header gives the whole list of API.md section 2. */
#include <limits.h>
#include <stdio.h>
#include <sys/sysinfo.h>
#include <linux/kernel.h>
#include <linux/module.h>
#include <linux/init.h>
#include <linux/moduleparam.h>
#include <linux/printk.h>
#include <linux/kprobes.h>
#include <linux/ktime.h>
#include <linux/timekeeping.h>
#include <linux/sched.h>
#include <linux/limits.h>
#include <linux/fs.h>
#include <linux/uio.h>
#include <linux/slab.h>
#include <linux/kallsyms.h>
#include <linux/ptrace.h>
#include <linux/smp.h>
#include <linux/string.h>
#include <linux/types.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <errno.h>

static char buf[NAME_MAX + KSYM_NAME_LEN];
static char *s = "x";
module_param(s, charp, S_IRUGO);

static int __init all_init(void)
{
	struct sysinfo si;
	u64 a = 1; s64 b = -1; u32 c = 2; u8 d = 3;
	ktime_t t = ktime_get();
	void *p = kmalloc(16, GFP_KERNEL);
	kfree(p);
	(void)sysinfo(&si);
	pr_info("%s %llu %lld %u %u %lld %d %s %d %d\n", buf, a, b, c, d, (long long)ktime_to_ns(ktime_sub(ktime_get(), t)),
		current->pid, current->comm, smp_processor_id(), EINVAL + ENOENT + ENOSYS);
	return 0;
}
static void __exit all_exit(void) {}
module_init(all_init);
module_exit(all_exit);
MODULE_LICENSE("GPL");
MODULE_AUTHOR("liveprobe");
MODULE_DESCRIPTION("all headers");
