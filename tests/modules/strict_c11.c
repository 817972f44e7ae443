/* Built with -std=c11, no GNU or POSIX names (tests/CMakeLists.txt): only <linux/module.h> and
 * <linux/kprobes.h>, and every name API.md lists is there, NAME_MAX included. */
#include <linux/module.h>
#include <linux/kprobes.h>

static char func[NAME_MAX] = "sys_open";
module_param_string(func, func, NAME_MAX, S_IRUGO);

static int __init strict_init(void)
{
	u64 a = 1;
	s64 b = -1;
	ktime_t t = ktime_get();
	pr_info("strict_c11: %s %llu %lld %d %lld\n", func, a, b, current->tgid,
		(long long)ktime_to_ns(ktime_sub(ktime_get(), t)) >= 0 ? 1LL : 0LL);
	return 0;
}
static void __exit strict_exit(void) {}
module_init(strict_init);
module_exit(strict_exit);
MODULE_LICENSE("GPL");
