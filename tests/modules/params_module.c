/* A module with a parameter of every kernel type: its init prints what it was given. */
#include <linux/module.h>
#include <linux/kernel.h>

static int count = 1;
static unsigned int ucount = 2;
static long big = 3;
static unsigned long ubig = 4;
static short small = 5;
static unsigned short usmall = 6;
static unsigned char byte = 7;
static unsigned long long huge = 8;
static unsigned int mask = 0x10;
static bool verbose;
static bool quiet = true;
static char *label = "default";
static char name[8] = "none";
static int values[4];
static int nvalues;

module_param(count, int, 0644);
module_param(ucount, uint, 0644);
module_param(big, long, 0644);
module_param(ubig, ulong, 0644);
module_param(small, short, 0644);
module_param(usmall, ushort, 0644);
module_param(byte, byte, 0644);
module_param(huge, ullong, 0644);
module_param(mask, hexint, 0644);
module_param(verbose, bool, 0644);
module_param_named(loud, quiet, invbool, 0644);
module_param(label, charp, 0644);
module_param_string(name, name, sizeof(name), 0644);
module_param_array(values, int, &nvalues, 0644);
MODULE_PARM_DESC(count, "How many");
MODULE_DESCRIPTION("liveprobe test: parameters of every type");
MODULE_AUTHOR("liveprobe");
MODULE_LICENSE("GPL");

static int __init params_init(void)
{
	pr_info("count=%d ucount=%u big=%ld ubig=%lu small=%hd usmall=%hu byte=%u huge=%llu mask=%#x\n",
		count, ucount, big, ubig, small, usmall, byte, huge, mask);
	pr_info("verbose=%d quiet=%d label=%s name=%s nvalues=%d values=%d,%d,%d,%d\n", verbose, quiet,
		label, name, nvalues, values[0], values[1], values[2], values[3]);
	pr_info("values:");
	for (int i = 0; i < nvalues; i++)
		pr_cont(" %d", values[i]);
	pr_cont("\n");
	pr_info("current: pid=%d tgid=%d comm=%s mm=%s\n", current->pid, current->tgid, current->comm,
		current->mm ? "set" : "NULL");
	return 0;
}

static void __exit params_exit(void)
{
	pr_info("params_module: exit\n");
}

module_init(params_init);
module_exit(params_exit);
