/*
 * liveprobe: what a probe module is written against (API.md section 2).
 *
 * A probe module is a shared object built from kernel-style module source and loaded into a
 * running process by `liveprobe insmod`. Its source includes the kernel's header names
 * (<linux/module.h>, <linux/kprobes.h>, ...), found in the compatibility directory
 * `pkg-config --variable=compatdir liveprobe`; every one of them includes this header, which
 * gives the whole list below, as the kernel's own headers do through their includes (in C++,
 * `current` is an object and min/max/clamp are std's, not macros):
 *
 *   module_init, module_exit (or init_module()/cleanup_module() defined by the module),
 *   module_param (int uint long ulong short ushort byte ullong hexint bool invbool charp),
 *   module_param_named, module_param_string, module_param_array, MODULE_PARM_DESC,
 *   MODULE_LICENSE/AUTHOR/DESCRIPTION/VERSION/ALIAS, THIS_MODULE, __init, __exit, __user, ...;
 *   printk with KERN_* levels and the kernel's format rules, pr_emerg..pr_debug, pr_cont,
 *   dump_stack; current (pid, tgid, comm, mm); ktime_t and the ktime_* functions (TSC clock);
 *   u8..u64, s8..s64 (s64 is long long, u64 unsigned long long), kmalloc/kzalloc/kfree,
 *   NAME_MAX, KSYM_NAME_LEN, TASK_COMM_LEN, S_IRUGO and friends, the errno names, and the
 *   kprobes API of <liveprobe/kprobes.h>.
 *
 * Build a module with `liveprobe build-module FILE.c`, or
 *   cc -shared -fPIC -o NAME.so NAME.c $(pkg-config --cflags --libs liveprobe) \
 *      -I"$(pkg-config --variable=compatdir liveprobe)"
 * Its name is its file name without ".so".
 */
#ifndef LIVEPROBE_MODULE_H
#define LIVEPROBE_MODULE_H

/* Every system header this one needs comes first: `current` is a macro from here on. */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#ifndef __cplusplus
#include <stdbool.h>
#endif

#include <liveprobe/kprobes.h>
#include <liveprobe/kernel_types.h>
#include <liveprobe/ktime.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the machine, as a module's #ifdefs ask for it ------------------------------------------ */
#ifndef CONFIG_X86
#define CONFIG_X86 1
#endif
#ifndef CONFIG_X86_64
#define CONFIG_X86_64 1
#endif
#ifndef CONFIG_KPROBES
#define CONFIG_KPROBES 1
#endif
#ifndef CONFIG_KRETPROBES
#define CONFIG_KRETPROBES 1
#endif
#ifndef CONFIG_64BIT
#define CONFIG_64BIT 1
#endif

/* ---- types ---------------------------------------------------------------------------------- */
typedef unsigned int gfp_t;
typedef s64 ktime_t;

/* ---- annotations (meaningful to the kernel's build only) ---------------------------------- */
#define __init
#define __exit
#define __initdata
#define __exitdata
#define __initconst
#define __user
#define __kernel
#define __iomem
#define __rcu
#define __percpu
#define __force
#define __read_mostly
#define __always_unused __attribute__((unused))
#define __maybe_unused __attribute__((unused))
#define __used __attribute__((used))
#define __cold __attribute__((cold))
#define __must_check __attribute__((warn_unused_result))
#define __printf(a, b) __attribute__((format(printf, a, b)))
#define notrace
#define asmlinkage
#define noinline __attribute__((noinline))
#ifndef likely
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
#endif
/* liveprobe never probes its own code; a module's handlers are not probed by the module. */
#define NOKPROBE_SYMBOL(fname)
#define EXPORT_SYMBOL(sym)
#define EXPORT_SYMBOL_GPL(sym)

/* ---- small helpers of <linux/kernel.h> ---------------------------------------------------- */
#ifndef ARRAY_SIZE
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#endif
#ifndef container_of
#define container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))
#endif
#ifndef __cplusplus /* C++ has std::min, std::max, std::clamp: macros would break its headers */
#ifndef min
#define min(a, b)                                                                              \
    __extension__({                                                                            \
        __typeof__(a) __lp_a = (a);                                                            \
        __typeof__(b) __lp_b = (b);                                                            \
        __lp_a < __lp_b ? __lp_a : __lp_b;                                                     \
    })
#define max(a, b)                                                                              \
    __extension__({                                                                            \
        __typeof__(a) __lp_a = (a);                                                            \
        __typeof__(b) __lp_b = (b);                                                            \
        __lp_a > __lp_b ? __lp_a : __lp_b;                                                     \
    })
#endif
#define clamp(v, lo, hi) min(max(v, lo), hi)
#endif
#define min_t(type, a, b) ((type)(a) < (type)(b) ? (type)(a) : (type)(b))
#define max_t(type, a, b) ((type)(a) > (type)(b) ? (type)(a) : (type)(b))
#ifndef NAME_MAX /* <limits.h> gives it only with POSIX names; strict C11 has none */
#define NAME_MAX 255
#endif
#ifndef PATH_MAX
#define PATH_MAX 4096
#endif
#define KSYM_NAME_LEN 512
#define KSYM_SYMBOL_LEN 640
#define TASK_COMM_LEN 16
#define NSEC_PER_USEC 1000L
#define NSEC_PER_MSEC 1000000L
#define NSEC_PER_SEC 1000000000L
#define USEC_PER_SEC 1000000L
#define MSEC_PER_SEC 1000L

/* Permission bits of module parameters (the kernel's sysfs modes; kept, not enforced). */
#ifndef S_IRUGO
#define S_IRWXUGO (S_IRWXU | S_IRWXG | S_IRWXO)
#define S_IALLUGO (S_ISUID | S_ISGID | S_ISVTX | S_IRWXUGO)
#define S_IRUGO (S_IRUSR | S_IRGRP | S_IROTH)
#define S_IWUGO (S_IWUSR | S_IWGRP | S_IWOTH)
#define S_IXUGO (S_IXUSR | S_IXGRP | S_IXOTH)
#endif

/* ---- printk --------------------------------------------------------------------------------
 * printk writes into the process's log (a ring of 1 MiB that overwrites its oldest lines and
 * never blocks), read with `liveprobe dmesg -p PID`. Format rules are the kernel's: %p prints
 * the pointer in hex without 0x (16 digits), %px and %pK the same, %pS/%pF/%pB "symbol+0xOFF/0xSIZE"
 * (and " [object]" outside the main program), %ps/%pf the symbol alone, %pa, %ph, %pI4, %pM,
 * %pE; %n writes nothing. A line without a KERN_* level is logged at KERN_DEFAULT (4). Each call
 * writes its text as one line per '\n' (a last part without '\n' is a line too); KERN_CONT
 * (pr_cont) text continues the line before it. Callable from any handler and any thread; it
 * takes no lock but the symbol tables' (%pS, dump_stack: with a 50 ms timeout, then raw hex). */
#define KERN_SOH "\001"
#define KERN_EMERG KERN_SOH "0"
#define KERN_ALERT KERN_SOH "1"
#define KERN_CRIT KERN_SOH "2"
#define KERN_ERR KERN_SOH "3"
#define KERN_WARNING KERN_SOH "4"
#define KERN_NOTICE KERN_SOH "5"
#define KERN_INFO KERN_SOH "6"
#define KERN_DEBUG KERN_SOH "7"
#define KERN_DEFAULT ""
#define KERN_CONT KERN_SOH "c"

LIVEPROBE_API int liveprobe_printk(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
LIVEPROBE_API int liveprobe_vprintk(const char *fmt, va_list ap) __attribute__((format(printf, 1, 0)));
/* "CPU: N PID: TID Comm: COMM" and the calling thread's stack, one frame a line, into the log.
 * In a handler, the frames are the handler's, then the probed function's and its callers'. */
LIVEPROBE_API void liveprobe_dump_stack(void);
#define printk liveprobe_printk
#define vprintk liveprobe_vprintk
#define dump_stack liveprobe_dump_stack

#ifndef pr_fmt
#define pr_fmt(fmt) fmt
#endif
#define pr_emerg(fmt, ...) printk(KERN_EMERG pr_fmt(fmt), ##__VA_ARGS__)
#define pr_alert(fmt, ...) printk(KERN_ALERT pr_fmt(fmt), ##__VA_ARGS__)
#define pr_crit(fmt, ...) printk(KERN_CRIT pr_fmt(fmt), ##__VA_ARGS__)
#define pr_err(fmt, ...) printk(KERN_ERR pr_fmt(fmt), ##__VA_ARGS__)
#define pr_warn(fmt, ...) printk(KERN_WARNING pr_fmt(fmt), ##__VA_ARGS__)
#define pr_warning pr_warn
#define pr_notice(fmt, ...) printk(KERN_NOTICE pr_fmt(fmt), ##__VA_ARGS__)
#define pr_info(fmt, ...) printk(KERN_INFO pr_fmt(fmt), ##__VA_ARGS__)
#define pr_cont(fmt, ...) printk(KERN_CONT fmt, ##__VA_ARGS__)
#define no_printk(fmt, ...) ({ if (0) printk(fmt, ##__VA_ARGS__); 0; })
#ifdef DEBUG
#define pr_debug(fmt, ...) printk(KERN_DEBUG pr_fmt(fmt), ##__VA_ARGS__)
#else
#define pr_debug(fmt, ...) no_printk(KERN_DEBUG pr_fmt(fmt), ##__VA_ARGS__)
#endif
#define WARN_ON(cond)                                                                          \
    ({                                                                                         \
        int __lp_warn = !!(cond);                                                              \
        if (__lp_warn) {                                                                       \
            printk(KERN_WARNING "WARNING: %s:%d: %s\n", __FILE__, __LINE__, #cond);            \
            dump_stack();                                                                      \
        }                                                                                      \
        __lp_warn;                                                                             \
    })
#define WARN_ON_ONCE(cond) WARN_ON(cond)

/* ---- current ---------------------------------------------------------------------------------
 * The calling thread: pid is its thread id (as the kernel's task pid), tgid the process id,
 * comm its name (read when the thread first uses `current`, and again after fork), mm non-NULL
 * for every thread of the process (a user-space process has no kernel threads). */
struct mm_struct {
    int users;
};
struct task_struct {
    pid_t pid;
    pid_t tgid;
    char comm[TASK_COMM_LEN];
    struct mm_struct *mm;
    struct mm_struct *active_mm;
    unsigned int flags;
};
LIVEPROBE_API struct task_struct *liveprobe_current(void);
#ifndef __cplusplus
#define current (liveprobe_current())
#endif
extern int sched_getcpu(void);
static inline int smp_processor_id(void) { return sched_getcpu(); }
#define raw_smp_processor_id() smp_processor_id()
#define get_cpu() smp_processor_id()
#define put_cpu()
#define in_interrupt() 0
#define in_atomic() 0
#define preempt_disable()
#define preempt_enable()

/* ---- time (<linux/ktime.h>): nanoseconds on liveprobe's TSC clock, see <liveprobe/ktime.h> ---- */
static inline ktime_t ktime_get(void) { return (ktime_t)liveprobe_ktime_ns(); }
static inline u64 ktime_get_ns(void) { return liveprobe_ktime_ns(); }
static inline ktime_t ktime_sub(ktime_t a, ktime_t b) { return a - b; }
static inline ktime_t ktime_add(ktime_t a, ktime_t b) { return a + b; }
static inline ktime_t ktime_add_ns(ktime_t a, u64 ns) { return a + (s64)ns; }
static inline s64 ktime_to_ns(ktime_t t) { return t; }
static inline s64 ktime_to_us(ktime_t t) { return t / 1000; }
static inline s64 ktime_to_ms(ktime_t t) { return t / 1000000; }
static inline ktime_t ns_to_ktime(u64 ns) { return (ktime_t)ns; }
static inline s64 ktime_us_delta(ktime_t later, ktime_t earlier) { return ktime_to_us(later - earlier); }
static inline int ktime_compare(ktime_t a, ktime_t b) { return a < b ? -1 : a > b ? 1 : 0; }
static inline bool ktime_after(ktime_t a, ktime_t b) { return a > b; }
static inline bool ktime_before(ktime_t a, ktime_t b) { return a < b; }
#define ktime_get_raw ktime_get
#define ktime_get_mono_fast_ns ktime_get_ns

/* ---- memory (<linux/slab.h>) ------------------------------------------------------------- */
#define GFP_KERNEL 0u
#define GFP_ATOMIC 1u
#define GFP_NOWAIT 2u
#define __GFP_ZERO 0x100u
static inline void *kmalloc(size_t n, gfp_t flags)
{
    return (flags & __GFP_ZERO) ? calloc(1, n) : malloc(n);
}
static inline void *kzalloc(size_t n, gfp_t flags) { return kmalloc(n, flags | __GFP_ZERO); }
static inline void *kcalloc(size_t n, size_t size, gfp_t flags)
{
    (void)flags;
    return calloc(n, size);
}
static inline void kfree(const void *p) { free((void *)p); }
static inline char *kstrdup(const char *s, gfp_t flags)
{
    size_t n = s ? strlen(s) + 1 : 0;
    char *d = s ? (char *)kmalloc(n, flags) : NULL;
    return d ? (char *)memcpy(d, s, n) : NULL;
}
#define vmalloc(n) malloc(n)
#define vzalloc(n) calloc(1, n)
#define vfree(p) free(p)

/* ---- modules ------------------------------------------------------------------------------ */
struct module {
    const char *name;
};
/* The module itself (its name is its file's, without ".so"); a placeholder for the kernel's. */
static struct module __this_module __attribute__((unused)) = {0};
#define THIS_MODULE (&__this_module)
#define try_module_get(m) 1
#define module_put(m)

/* Marks a shared object as a probe module: `liveprobe insmod` loads nothing else. */
#ifdef __cplusplus
#define __lp_extern_c extern "C"
#else
#define __lp_extern_c
#endif
#ifndef LIVEPROBE_MODULE_NO_MARKER /* liveprobe's own sources */
#ifdef __cplusplus
extern
#endif
__attribute__((weak, visibility("default"))) const int liveprobe_module_abi_1 = 1;
#endif

/*
 * module_init(fn) and module_exit(fn) name the module's init and exit; a module may instead
 * define `int init_module(void)` and `void cleanup_module(void)` itself. As in the kernel, an
 * init that returns non-zero fails the load (the module is unloaded, its error reported), and a
 * module with an init but no exit cannot be unloaded.
 */
#define module_init(fn)                                                                        \
    __lp_extern_c __attribute__((visibility("default"), used)) int init_module(void) { return fn(); }
#define module_exit(fn)                                                                        \
    __lp_extern_c __attribute__((visibility("default"), used)) void cleanup_module(void) { fn(); }
#define late_initcall(fn) module_init(fn)

/* Module parameters: declarations the loader checks `name=value` arguments against, before the
 * module's init runs. Declared by a constructor of the module, found by the agent after it
 * loads the module (nothing of the module runs before that but its constructors). */
enum liveprobe_param_type {
    LIVEPROBE_PARAM_INT = 1,
    LIVEPROBE_PARAM_UINT,
    LIVEPROBE_PARAM_LONG,
    LIVEPROBE_PARAM_ULONG,
    LIVEPROBE_PARAM_SHORT,
    LIVEPROBE_PARAM_USHORT,
    LIVEPROBE_PARAM_BYTE,
    LIVEPROBE_PARAM_ULLONG,
    LIVEPROBE_PARAM_HEXINT,
    LIVEPROBE_PARAM_BOOL,
    LIVEPROBE_PARAM_INVBOOL,
    LIVEPROBE_PARAM_CHARP,
    LIVEPROBE_PARAM_STRING
};
struct liveprobe_module_param {
    unsigned int size;   /* sizeof(struct liveprobe_module_param): the layout's version */
    const char *name;
    int type;            /* enum liveprobe_param_type (of one element, for an array) */
    void *var;           /* the variable (string: its buffer; array: its first element) */
    size_t len;          /* string: the buffer's size; array: the most elements it takes */
    unsigned int *nump;  /* array: set to the number of elements given (may be NULL) */
    int is_array;
    unsigned int perm;
};
LIVEPROBE_API void liveprobe_module_param_declare(const struct liveprobe_module_param *p);
/* key: "parmdesc" (name: the parameter), "license", "author", "description", "version", "alias". */
LIVEPROBE_API void liveprobe_module_info_declare(const char *key, const char *name, const char *value);

#define __lp_ctype_int int
#define __lp_ctype_uint unsigned int
#define __lp_ctype_long long
#define __lp_ctype_ulong unsigned long
#define __lp_ctype_short short
#define __lp_ctype_ushort unsigned short
#define __lp_ctype_byte unsigned char
#define __lp_ctype_ullong unsigned long long
#define __lp_ctype_hexint unsigned int
#define __lp_ctype_bool bool
#define __lp_ctype_invbool bool
#define __lp_ctype__Bool bool /* `bool` once <stdbool.h>'s macro expanded it */
#define __lp_ctype_charp char *
#define __lp_ptag_int LIVEPROBE_PARAM_INT
#define __lp_ptag_uint LIVEPROBE_PARAM_UINT
#define __lp_ptag_long LIVEPROBE_PARAM_LONG
#define __lp_ptag_ulong LIVEPROBE_PARAM_ULONG
#define __lp_ptag_short LIVEPROBE_PARAM_SHORT
#define __lp_ptag_ushort LIVEPROBE_PARAM_USHORT
#define __lp_ptag_byte LIVEPROBE_PARAM_BYTE
#define __lp_ptag_ullong LIVEPROBE_PARAM_ULLONG
#define __lp_ptag_hexint LIVEPROBE_PARAM_HEXINT
#define __lp_ptag_bool LIVEPROBE_PARAM_BOOL
#define __lp_ptag__Bool LIVEPROBE_PARAM_BOOL
#define __lp_ptag_invbool LIVEPROBE_PARAM_INVBOOL
#define __lp_ptag_charp LIVEPROBE_PARAM_CHARP

#define __lp_param(name, tag, varp, len, nump, is_array, perm)                                 \
    static const struct liveprobe_module_param __lp_param_##name = {                           \
        sizeof(struct liveprobe_module_param), #name, tag, (void *)(varp), len, nump, is_array, perm}; \
    static void __attribute__((constructor)) __lp_param_ctor_##name(void)                      \
    {                                                                                          \
        liveprobe_module_param_declare(&__lp_param_##name);                                    \
    }

/* module_param_named(name, value, type, perm): parameter `name` sets the variable `value`,
 * whose C type must match `type` (checked at compile time, as in the kernel). */
#define module_param_named(name, value, type, perm)                                            \
    static inline __attribute__((unused)) __lp_ctype_##type *__lp_check_##name(void) { return &(value); } \
    __lp_param(name, __lp_ptag_##type, &(value), sizeof(value), (unsigned int *)0, 0, perm)
#define module_param(name, type, perm) module_param_named(name, name, type, perm)
/* A string copied into a char array of `len` bytes (NUL included): longer values are refused. */
#define module_param_string(name, string, len, perm)                                           \
    __lp_param(name, LIVEPROBE_PARAM_STRING, string, len, (unsigned int *)0, 0, perm)
/* A comma-separated list into an array of `type`; *nump (if not NULL) gets the count. */
#define module_param_array_named(name, array, type, nump, perm)                                \
    static inline __attribute__((unused)) __lp_ctype_##type *__lp_check_##name(void) { return &(array)[0]; } \
    __lp_param(name, __lp_ptag_##type, &(array)[0], ARRAY_SIZE(array), (unsigned int *)(nump), 1, perm)
#define module_param_array(name, type, nump, perm) module_param_array_named(name, name, type, nump, perm)

#define __lp_info(key, name, id, value)                                                        \
    static void __attribute__((constructor)) id(void) { liveprobe_module_info_declare(key, name, value); }
#define __lp_cat2(a, b) a##b
#define __lp_cat(a, b) __lp_cat2(a, b)
#define MODULE_PARM_DESC(name, desc) __lp_info("parmdesc", #name, __lp_parmdesc_##name, desc)
#define MODULE_LICENSE(s) __lp_info("license", "", __lp_cat(__lp_info_, __COUNTER__), s)
#define MODULE_AUTHOR(s) __lp_info("author", "", __lp_cat(__lp_info_, __COUNTER__), s)
#define MODULE_DESCRIPTION(s) __lp_info("description", "", __lp_cat(__lp_info_, __COUNTER__), s)
#define MODULE_VERSION(s) __lp_info("version", "", __lp_cat(__lp_info_, __COUNTER__), s)
#define MODULE_ALIAS(s) __lp_info("alias", "", __lp_cat(__lp_info_, __COUNTER__), s)
#define MODULE_INFO(tag, s) __lp_info(#tag, "", __lp_cat(__lp_info_, __COUNTER__), s)

#ifdef __cplusplus
} /* extern "C" */

/* In C++, `current` is an object, not a macro (libstdc++ has members named current): the same
 * current->pid, !current->mm and `struct task_struct *t = current`. */
struct liveprobe_current_task {
    struct task_struct *operator->() const { return liveprobe_current(); }
    operator struct task_struct *() const { return liveprobe_current(); }
};
static const liveprobe_current_task current __attribute__((unused)) = {};
#endif

#endif /* LIVEPROBE_MODULE_H */
