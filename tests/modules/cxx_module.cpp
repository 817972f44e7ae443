// A probe module in C++: the compatibility headers among libstdc++'s (in either order), `current`
// as an object, std::min rather than the kernel's min macro.
#include <climits>
#include <linux/module.h>
#include <linux/kprobes.h>
#include <algorithm>
#include <map>
#include <string>
#include <vector>

static int pre(struct kprobe *, struct pt_regs *)
{
    static int once;
    if (!once++) pr_info("cxx_module: sys_open hit in %s (pid %d)\n", current->comm, current->pid);
    return 0;
}

static struct kprobe kp = [] {
    struct kprobe k{};
    k.symbol_name = "sys_open";
    k.pre_handler = pre;
    return k;
}();

static int __init cxx_init(void)
{
    std::vector<int> v{3, 1, 2};
    std::sort(v.begin(), v.end());
    struct task_struct *t = current;
    pr_info("cxx_module: sorted %d %d %d, min %d, mm %s\n", v[0], v[1], v[2], std::min(v[1], v[2]),
            t->mm ? "set" : "NULL");
    return register_kprobe(&kp);
}

static void __exit cxx_exit(void) { unregister_kprobe(&kp); }

module_init(cxx_init);
module_exit(cxx_exit);
MODULE_LICENSE("GPL");
