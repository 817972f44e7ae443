/*
 * liveprobe demo: kprobes on the running program's own functions and on libc's.
 *
 * What it shows, in order:
 *   1. a pre and a post handler on a static function of this program (arguments, return
 *      address, ip), and the probe's hit count and why_not_optimized reason;
 *   2. hits and nmissed on a recursive function;
 *   3. probes on libc by name: getpid, and memcpy, an IFUNC (the probe lands on the
 *      implementation glibc selected for this machine, not on the resolver);
 *   4. a pre_handler that skips a whole function and makes up its return value;
 *   5. errors, with liveprobe_strerror's precise reason;
 *   6. unregistering: everything runs as before;
 *   7. a kretprobe timing a function, as the kernel's kretprobe sample does ("returned 610 and
 *      took 12345 ns to execute"), with per-call data and liveprobe_ktime_ns().
 *
 * NOTE: on the breakpoint path handlers run inside a SIGTRAP handler. printf is fine for a demo
 * that does not print from its own main loop at the same moment, but real handlers must stay
 * async-signal-safe: no printf, no malloc, no locks; record into memory, report later.
 *
 * Built -O1 -fno-inline so that checksum and fib stay real functions.
 */
#include <liveprobe/kprobes.h>
#include <liveprobe/ktime.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* ---- the program's own functions -------------------------------------------------------- */

static unsigned checksum(const char *buf, size_t len)
{
    unsigned sum = 0;
    for (size_t i = 0; i < len; i++) sum = sum * 31 + (unsigned char)buf[i];
    return sum;
}

static long fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

/* A noinline copy so that memcpy really is called (not expanded inline). */
static void copy(void *dst, const void *src, size_t n) { memcpy(dst, src, n); }

/* ---- handlers ------------------------------------------------------------------------------ */

static int checksum_pre(struct kprobe *p, struct pt_regs *regs)
{
    const char *buf = (const char *)regs_get_kernel_argument(regs, 0);
    size_t len = regs_get_kernel_argument(regs, 1);
    printf("  pre_handler : %s(buf=\"%.*s\", len=%zu) hit, ip=%#lx, return address %#lx\n",
           p->symbol_name, (int)len, buf, len, instruction_pointer(regs),
           *(unsigned long *)user_stack_pointer(regs));
    return 0; /* 0: run the probed instruction, then the post_handler */
}

static void checksum_post(struct kprobe *p, struct pt_regs *regs, unsigned long flags)
{
    (void)flags;
    printf("  post_handler: first instruction done, ip=%#lx (probed address + %lu)\n",
           instruction_pointer(regs), instruction_pointer(regs) - (unsigned long)p->addr);
}

static unsigned long fib_deepest = 100;
static int fib_pre(struct kprobe *p, struct pt_regs *regs)
{
    (void)p;
    unsigned long n = regs_get_kernel_argument(regs, 0);
    if (n < fib_deepest) fib_deepest = n;
    return 0;
}

static int getpid_pre(struct kprobe *p, struct pt_regs *regs)
{
    (void)p;
    printf("  pre_handler : getpid called from %#lx\n", *(unsigned long *)regs->sp);
    return 0;
}

/* Skips the function: returns 4242 to its caller without running it. */
static int getpid_fake(struct kprobe *p, struct pt_regs *regs)
{
    (void)p;
    regs_set_return_value(regs, 4242);
    regs->ip = *(unsigned long *)regs->sp; /* pop the return address, as `ret` would */
    regs->sp += 8;
    return 1; /* non-zero: the handler set ip; the probed instruction is not run */
}

static char memcpy_record[16];
static int memcpy_pre(struct kprobe *p, struct pt_regs *regs)
{
    (void)p;
    size_t len = regs_get_kernel_argument(regs, 2);
    size_t n = len < sizeof memcpy_record - 1 ? len : sizeof memcpy_record - 1;
    /* This memcpy hits the probe again: a handler is already running on this thread, so that
     * nested hit runs no handler and counts in nmissed (as in the kernel). */
    copy(memcpy_record, (const void *)regs_get_kernel_argument(regs, 1), n);
    memcpy_record[n] = '\0';
    printf("  pre_handler : memcpy(dst, src=\"%s\", %zu) from %#lx\n", memcpy_record, len,
           *(unsigned long *)regs->sp);
    return 0;
}

/* ---- helpers ------------------------------------------------------------------------------- */

/* 7: the entry stamps the time into the call's private data; the return reports. */
static int fib_entry(struct kretprobe_instance *ri, struct pt_regs *regs)
{
    (void)regs;
    *(uint64_t *)ri->data = liveprobe_ktime_ns();
    return 0;
}
static int fib_return(struct kretprobe_instance *ri, struct pt_regs *regs)
{
    uint64_t took = liveprobe_ktime_ns() - *(uint64_t *)ri->data;
    printf("  fib returned %ld and took %llu ns to execute (returning to %p)\n",
           (long)regs_return_value(regs), (unsigned long long)took, (void *)instruction_pointer(regs));
    return 0;
}

static void show_info(const struct kprobe *p, const char *what, int why)
{
    struct liveprobe_info info;
    if (liveprobe_kprobe_info(p, &info) != 0) return;
    printf("  info: %s hits=%lu nmissed=%lu optimized=%d\n", what, info.hits, info.nmissed,
           info.optimized);
    if (why && info.why_not_optimized) printf("        why not optimized: %s\n", info.why_not_optimized);
}

static int must_register(struct kprobe *p)
{
    int err = register_kprobe(p);
    if (err) {
        fprintf(stderr, "register_kprobe(%s): %d: %s\n", p->symbol_name ? p->symbol_name : "(addr)",
                err, liveprobe_strerror(err));
        return 1;
    }
    return 0;
}

static void try_register(const char *label, struct kprobe *p)
{
    int err = register_kprobe(p);
    const char *name = err == -EINVAL   ? "-EINVAL"
                       : err == -ENOENT ? "-ENOENT"
                       : err == -EILSEQ ? "-EILSEQ"
                       : err == -EOPNOTSUPP ? "-EOPNOTSUPP"
                                            : "";
    printf("  %-34s -> %d %s: %s\n", label, err, name, err ? liveprobe_strerror(err) : "registered");
    if (!err) unregister_kprobe(p);
}

int main(void)
{
    static const char text[] = "hello, probe";
    char buf[64];

    setvbuf(stdout, NULL, _IOLBF, 0);
    printf("liveprobe demo (pid %d): probes on this program and on libc; each is jump-optimized\n"
           "where it safely can be, and otherwise takes the breakpoint (int3) path\n\n",
           (int)getpid());

    /* 1. pre + post handler on a static function of this program, found by name. */
    printf("1. checksum(), a static function of this program, pre + post handlers:\n");
    struct kprobe kp_sum = {.symbol_name = "checksum",
                            .pre_handler = checksum_pre,
                            .post_handler = checksum_post};
    if (must_register(&kp_sum)) return 1;
    printf("  registered at %p (checksum is at %p)\n", (void *)kp_sum.addr, (void *)checksum);
    unsigned sum = checksum(text, strlen(text));
    printf("  checksum() returned %#x, as without the probe\n", sum);
    show_info(&kp_sum, "checksum", 1);

    /* 2. a recursive function: every call is a hit. */
    printf("\n2. fib(), recursive:\n");
    struct kprobe kp_fib = {.symbol_name = "fib", .pre_handler = fib_pre};
    if (must_register(&kp_fib)) return 1;
    long f = fib(15);
    printf("  fib(15) = %ld; the handler saw n go down to %lu\n", f, fib_deepest);
    show_info(&kp_fib, "fib     ", 0);
    printf("        (fib(15) makes 1973 calls)\n");

    /* 3. libc functions by name. */
    printf("\n3. libc: getpid and memcpy (an IFUNC):\n");
    struct kprobe kp_getpid = {.symbol_name = "getpid", .pre_handler = getpid_pre};
    if (must_register(&kp_getpid)) return 1;
    pid_t pid = getpid();
    printf("  getpid() = %d, the real pid\n", (int)pid);
    show_info(&kp_getpid, "getpid  ", 1);

    struct kprobe kp_memcpy = {.symbol_name = "libc:memcpy", .pre_handler = memcpy_pre};
    if (must_register(&kp_memcpy)) return 1;
    void *(*volatile memcpy_ptr)(void *, const void *, size_t) = memcpy;
    printf("  \"libc:memcpy\" resolved to %p, and memcpy in this program is %p:\n",
           (void *)kp_memcpy.addr, (void *)memcpy_ptr);
    printf("  the implementation glibc's IFUNC resolver selected for this CPU, not the resolver\n");
    copy(buf, text, sizeof text);
    show_info(&kp_memcpy, "memcpy  ", 1);
    unregister_kprobe(&kp_memcpy);
    printf("  kp_memcpy.nmissed=%lu: the handler's own memcpy\n", kp_memcpy.nmissed);

    /* 4. a pre_handler that skips the function and makes up its return value. */
    printf("\n4. a pre_handler that skips getpid and returns 4242:\n");
    struct kprobe kp_fake = {.symbol_name = "getpid", .pre_handler = getpid_fake};
    if (must_register(&kp_fake)) return 1;
    printf("  getpid has two probes now: pre handlers run in registration order, and the first\n"
           "  non-zero return stops the rest\n");
    printf("  getpid() = %d\n", (int)getpid());
    unregister_kprobe(&kp_fake);
    unregister_kprobe(&kp_getpid);

    /* 5. errors: negative errno values, and the precise reason. */
    printf("\n5. errors:\n");
    struct kprobe bad1 = {.addr = (kprobe_opcode_t *)checksum + 1};
    try_register("addr = checksum + 1", &bad1);
    struct kprobe bad2 = {.symbol_name = "no_such_function"};
    try_register("symbol_name = \"no_such_function\"", &bad2);
    struct kprobe bad3 = {.addr = (kprobe_opcode_t *)checksum, .symbol_name = "checksum"};
    try_register("both addr and symbol_name", &bad3);
    struct kprobe bad4 = {.addr = (kprobe_opcode_t *)text};
    try_register("addr = a string (not code)", &bad4);

    /* 6. unregister: the function runs as it did before. */
    printf("\n6. unregister_kprobe(checksum), unregister_kprobe(fib):\n");
    unregister_kprobe(&kp_sum);
    unregister_kprobe(&kp_fib);
    unsigned sum2 = checksum(text, strlen(text));
    printf("  checksum() = %#x, no handler ran; fib(15) = %ld; getpid() = %d\n", sum2, fib(15),
           (int)getpid());

    /* 7. a return probe. maxactive 1: only the outermost of fib's recursive calls gets an
     * instance, the others count in nmissed. */
    printf("\n7. a kretprobe on fib (entry stamps liveprobe_ktime_ns() into ri->data):\n");
    struct kretprobe rp = {.kp.symbol_name = "fib", .entry_handler = fib_entry, .handler = fib_return,
                           .data_size = sizeof(uint64_t), .maxactive = 1};
    int err = register_kretprobe(&rp);
    if (err) {
        printf("  register_kretprobe: %s\n", liveprobe_strerror(err));
        return 1;
    }
    long f20 = fib(20);
    printf("  fib(20) = %ld; %d nested calls found no free instance (rp.nmissed)\n", f20, rp.nmissed);
    unregister_kretprobe(&rp);
    return sum2 == sum && pid == getpid() && f20 == 6765 ? 0 : 1;
}
