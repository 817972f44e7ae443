/*
 * liveprobe: the Linux kprobes API for user-space processes.
 *
 * #include <liveprobe/kprobes.h>, link with -lliveprobe (pkg-config liveprobe).
 *
 * This header is the kernel-compatible C API (usable from C11 and C++). Its names, signatures
 * and semantics follow the kernel's Documentation/trace/kprobes.rst, read as "the process"
 * where it says "the kernel" and "thread" where it says "CPU". Every function may be called
 * from any thread while other threads run through the probed code, with one exception: a
 * probe's own handlers must not unregister it (unregistering waits until no other thread is
 * running that probe's handlers, because the caller may free the struct once it returns).
 *
 * Errors are negative errno values; liveprobe_strerror() gives the precise reason of the
 * calling thread's last failure.
 */
#ifndef LIVEPROBE_KPROBES_H
#define LIVEPROBE_KPROBES_H

#include <stddef.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define LIVEPROBE_API __attribute__((visibility("default")))
#else
#define LIVEPROBE_API
#endif

/* ---------------------------------------------------------------------------------------------
 * Registers
 * ------------------------------------------------------------------------------------------- */

/*
 * The registers of the probed thread, in the field order of Linux x86-64's struct pt_regs.
 *
 * In a pre_handler, ip is the probed address (not address + 1 as on the kernel's x86) and sp
 * the stack pointer before the probed instruction. In a post_handler, ip is where execution
 * continues: the next original instruction or the branch target. Every register a handler
 * changes (ip, sp and flags included) takes effect when the thread resumes. orig_ax is
 * always -1 (no system call is in progress at a probe).
 */
struct pt_regs {
    unsigned long r15;
    unsigned long r14;
    unsigned long r13;
    unsigned long r12;
    unsigned long bp;
    unsigned long bx;
    unsigned long r11;
    unsigned long r10;
    unsigned long r9;
    unsigned long r8;
    unsigned long ax;
    unsigned long cx;
    unsigned long dx;
    unsigned long si;
    unsigned long di;
    unsigned long orig_ax;
    unsigned long ip;
    unsigned long cs;
    union {
        unsigned long flags;
        unsigned long eflags; /* the name older kprobes code uses */
    };
    unsigned long sp;
    unsigned long ss;
};

/* The integer return value (rax). Meaningful in a return handler or after a call. */
static inline unsigned long regs_return_value(const struct pt_regs *regs) { return regs->ax; }
static inline void regs_set_return_value(struct pt_regs *regs, unsigned long v) { regs->ax = v; }
static inline unsigned long instruction_pointer(const struct pt_regs *regs) { return regs->ip; }
static inline void instruction_pointer_set(struct pt_regs *regs, unsigned long v) { regs->ip = v; }
static inline unsigned long user_stack_pointer(const struct pt_regs *regs) { return regs->sp; }

/*
 * The n-th integer argument (0-based, 0 is di) under the SysV x86-64 ABI. n >= 6 reads the
 * stack, which is right only at a function-entry probe, where [sp] is the return address.
 */
static inline unsigned long regs_get_kernel_argument(const struct pt_regs *regs, unsigned int n)
{
    switch (n) {
    case 0: return regs->di;
    case 1: return regs->si;
    case 2: return regs->dx;
    case 3: return regs->cx;
    case 4: return regs->r8;
    case 5: return regs->r9;
    default: return ((const unsigned long *)regs->sp)[n - 6 + 1];
    }
}

/* ---------------------------------------------------------------------------------------------
 * kprobe
 * ------------------------------------------------------------------------------------------- */

typedef unsigned char kprobe_opcode_t;
struct kprobe;

/* Runs before the probed instruction. Non-zero: the handler changed regs->ip; the probed
 * instruction and the post handlers are skipped and the thread resumes with regs as left. */
typedef int (*kprobe_pre_handler_t)(struct kprobe *, struct pt_regs *);
/* Runs after the probed instruction executed out of line; flags is always 0. */
typedef void (*kprobe_post_handler_t)(struct kprobe *, struct pt_regs *, unsigned long flags);
/* Called when a handler of this probe faults (trapnr is SIGSEGV, SIGBUS, SIGFPE or SIGILL).
 * Whatever it returns, the faulting handler is abandoned, the fault is counted and the program
 * continues as if that handler had returned 0. */
typedef int (*kprobe_fault_handler_t)(struct kprobe *, struct pt_regs *, int trapnr);

#define KPROBE_FLAG_GONE 1      /* the object holding the address was unloaded */
#define KPROBE_FLAG_DISABLED 2  /* input and output: registered, but not armed */
#define KPROBE_FLAG_OPTIMIZED 4 /* output: hits take the jump path */
#define KPROBE_FLAG_NOVEC 0x100 /* input: its handlers never touch vector registers */
/* input (liveprobe): its handlers read or write the probed thread's floating-point registers
 * through liveprobe_get_fpregs, so they are saved around every hit, whatever the handlers'
 * code looks like. */
#define KPROBE_FLAG_FPREGS 0x200

struct kprobe {
    /* Set addr, or symbol_name (+ offset); not both. register_kprobe fills in addr. */
    kprobe_opcode_t *addr;
    /* "name", "OBJECT:name", mangled or demangled C++; see liveprobe's README. */
    const char *symbol_name;
    unsigned int offset;
    kprobe_pre_handler_t pre_handler;
    kprobe_post_handler_t post_handler;
    kprobe_fault_handler_t fault_handler;
    /* Hits whose handlers did not run because a handler was already running on the thread.
     * Updated atomically; may be read at any time. */
    unsigned long nmissed;
    unsigned int flags;
    /* Implementation fields: leave zero, do not touch. */
    void *__lp_state;
    unsigned long __lp_reserved[4];
};

/*
 * Resolves and fills in p->addr, clears every flag but the inputs KPROBE_FLAG_DISABLED and
 * KPROBE_FLAG_NOVEC, and returns once the probe is armed (unless disabled) and, wherever it can
 * be, jump-optimized (KPROBE_FLAG_OPTIMIZED; liveprobe_kprobe_info() says why not otherwise).
 * Returns 0 or:
 *   -EINVAL     addr and symbol_name both or neither set; p already registered; the address is
 *               not in executable code of the process, is inside liveprobe itself, or is on the
 *               blacklist; the symbol name is ambiguous
 *   -ENOENT     the symbol is unknown
 *   -EILSEQ     the address is not on an instruction boundary (or no function covers it, so
 *               the boundary cannot be verified)
 *   -EOPNOTSUPP the instruction cannot be probed (int3, syscall, far branch, ...)
 *   -ENOMEM     out of memory, or no room for out-of-line code near the address
 */
LIVEPROBE_API int register_kprobe(struct kprobe *p);
/* Disarms and removes p; returns once no other thread runs p's handlers. Unknown p: no-op. */
LIVEPROBE_API void unregister_kprobe(struct kprobe *p);
/* All or nothing: on failure none of them stays registered and the first error is returned. */
LIVEPROBE_API int register_kprobes(struct kprobe **kps, int num);
LIVEPROBE_API void unregister_kprobes(struct kprobe **kps, int num);
/* Disarm / re-arm a registered probe (KPROBE_FLAG_DISABLED). -EINVAL if p is not registered. */
LIVEPROBE_API int disable_kprobe(struct kprobe *p);
LIVEPROBE_API int enable_kprobe(struct kprobe *p);
/* The address of a symbol, by the rules of symbol_name; 0 when unknown or ambiguous. */
LIVEPROBE_API unsigned long kallsyms_lookup_name(const char *name);

/* ---------------------------------------------------------------------------------------------
 * kretprobe
 * ------------------------------------------------------------------------------------------- */

struct kretprobe;

/* One call of the probed function in flight. */
struct kretprobe_instance {
    struct kretprobe *rp;
    kprobe_opcode_t *ret_addr; /* the real return address */
    pid_t tid;                 /* the thread that made the call */
    /* data_size bytes, private to this call; 16-aligned, so it may hold any struct. */
#if defined(__GNUC__)
    char data[] __attribute__((aligned(16)));
#else
    char data[];
#endif
};

typedef int (*kretprobe_handler_t)(struct kretprobe_instance *, struct pt_regs *);

struct kretprobe {
    /* Set kp.addr or kp.symbol_name (+ kp.offset) to a function's entry; leave kp's handlers
     * NULL (liveprobe's entry handling takes kp.pre_handler). */
    struct kprobe kp;
    /* At the return: regs_return_value(regs) is the return value, instruction_pointer(regs)
     * the real return address, regs->sp the stack pointer after the return. */
    kretprobe_handler_t handler;
    /* At the entry (regs as in a pre_handler). Non-zero: no return handler for this call. */
    kretprobe_handler_t entry_handler;
    /* Calls in flight at once, over all threads; <= 0: max(10, 2 * configured CPUs), written
     * back by register_kretprobe. */
    int maxactive;
    /* Calls that found no free instance (neither handler ran). Updated atomically. */
    int nmissed;
    /* Bytes of ri->data per call (at most 4096). */
    size_t data_size;
    /* liveprobe: a call that left without returning (longjmp, thread exit) gets this instead of
     * handler, with regs NULL, at the latest when its thread next enters or leaves a function
     * of any kretprobe, or exits. May be NULL. */
    kretprobe_handler_t unwind_handler;
};

/*
 * Returns 0, or the errors of register_kprobe and:
 *   -EINVAL   the address is not a function's entry; kp has handlers set; rp already registered
 *   -E2BIG    data_size over 4096
 * Every call whose entry_handler returned 0 (or that has no entry_handler) ends in exactly one
 * of handler or unwind_handler, unless rp is unregistered first.
 */
LIVEPROBE_API int register_kretprobe(struct kretprobe *rp);
/* Returns once no other thread runs rp's handlers; calls still in flight return normally,
 * without handlers. */
LIVEPROBE_API void unregister_kretprobe(struct kretprobe *rp);
LIVEPROBE_API int register_kretprobes(struct kretprobe **rps, int num);
LIVEPROBE_API void unregister_kretprobes(struct kretprobe **rps, int num);
LIVEPROBE_API int disable_kretprobe(struct kretprobe *rp);
LIVEPROBE_API int enable_kretprobe(struct kretprobe *rp);

/* ---------------------------------------------------------------------------------------------
 * jprobe
 * ------------------------------------------------------------------------------------------- */

struct jprobe {
    /* Set kp.addr or kp.symbol_name (+ kp.offset) to a function's entry; leave kp's handlers
     * NULL (liveprobe takes kp.pre_handler). */
    struct kprobe kp;
    /* A function with the probed function's prototype, called at its entry with the same
     * arguments (registers, and 128 bytes of stack arguments); its changes to them do not
     * reach the probed function. It ends with jprobe_return(). Other probes at the address run
     * their pre handlers first, then this, then the probed instruction, then post handlers. */
    void *entry;
};

/* -EINVAL unless at a function's entry (or entry NULL, or kp handlers set); -EBUSY if a jprobe
 * is already registered at the address; the errors of register_kprobe otherwise. */
LIVEPROBE_API int register_jprobe(struct jprobe *jp);
LIVEPROBE_API void unregister_jprobe(struct jprobe *jp);
/* Ends a jprobe's entry (does not return into it). Outside an entry it returns. */
LIVEPROBE_API void jprobe_return(void);

/* ---------------------------------------------------------------------------------------------
 * liveprobe extensions
 * ------------------------------------------------------------------------------------------- */

struct liveprobe_info {
    unsigned long hits;            /* handler runs, summed over threads */
    unsigned long nmissed;
    int optimized;                 /* hits take the jump path */
    const char *why_not_optimized; /* NULL when optimized; a fixed, precise reason otherwise */
};

/* Fills *out for a registered probe: 0, or -EINVAL if p is not registered. */
LIVEPROBE_API int liveprobe_kprobe_info(const struct kprobe *p, struct liveprobe_info *out);
/* Handler faults of a registered probe, summed over threads (0 if p is not registered). For a
 * kretprobe, pass &rp->kp: the faults of its entry, return and unwind handlers. */
LIVEPROBE_API unsigned long liveprobe_kprobe_faults(const struct kprobe *p);
/* Where the probed thread's floating-point registers are while one of its handlers runs:
 * xmm i (16 bytes, low lane first) at xmm + i * xmm_stride; st(i) (80-bit extended, in
 * 16 bytes) at st + i * 16, st NULL when the x87 stack is empty. Writes take effect when the
 * handler returns, as writes to regs do. Valid until the handler returns. */
struct liveprobe_fpregs {
    unsigned char *xmm;
    unsigned long xmm_stride;
    unsigned char *st;
};
/* 0, or -ENODATA outside a handler, or when the registers were not saved because the probe's
 * handlers were proven free of vector instructions (their live values are then the thread's);
 * KPROBE_FLAG_FPREGS makes sure they are saved. The C++ API's typed probes use it. */
LIVEPROBE_API int liveprobe_get_fpregs(struct liveprobe_fpregs *out);
/* Jump optimization, default on; LIVEPROBE_OPTIMIZE=0 in the environment turns it off at start.
 * Applies to every registered probe at once, as the kernel's debug.kprobes-optimization does:
 * 0 puts them all back on the breakpoint path, 1 optimizes every one that can be. */
LIVEPROBE_API void liveprobe_set_optimization(int enabled);
/* The precise reason of the calling thread's last failure, for the negative errno err it
 * returned; a generic text when this thread's last failure had another code. The string stays
 * valid until this thread's next liveprobe call. */
LIVEPROBE_API const char *liveprobe_strerror(int err);
/* Best effort, for tracers that probe many functions: registers every probe of the array that
 * can be, in one batch (one int3 pass and one stop of the other threads for all of them, as
 * register_kprobes), and leaves out the others. results[i] (num entries) gets 0 or probe i's
 * negative errno. Returns how many were registered; liveprobe_strerror() gives the reason of
 * the last one that failed. */
LIVEPROBE_API int liveprobe_register_kprobes_each(struct kprobe **kps, int num, int *results);
LIVEPROBE_API int liveprobe_register_kretprobes_each(struct kretprobe **rps, int num, int *results);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* LIVEPROBE_KPROBES_H */
