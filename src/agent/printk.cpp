// What probe modules call besides the kprobes API (<liveprobe/module.h>): printk into the
// process's log, dump_stack, and `current`.
#include <dlfcn.h>
#include <execinfo.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstring>

#include "agent/log_ring.hpp"
#include "agent/printk_format.hpp"
#include "symbols/symbols.hpp"

// Last: it defines `current`, `printk`, `min` and `max` as macros. Not a module: no marker.
#define LIVEPROBE_MODULE_NO_MARKER 1
#include <liveprobe/module.h>

namespace liveprobe::agent {
namespace {

size_t symbolize_for_printk(uint64_t addr, bool with_offset, char *buf, size_t n)
{
    return symbols::symbolize(addr, with_offset, false, buf, n);
}

// Writes text as lines (one per '\n'; a last part without one is a line too); with `cont`
// (KERN_CONT), the first one continues the line before it.
void log_lines(const char *text, size_t len, int level, bool cont) noexcept
{
    const char *p = text, *end = text + len;
    while (p < end) {
        const char *nl = static_cast<const char *>(std::memchr(p, '\n', static_cast<size_t>(end - p)));
        size_t l = nl ? static_cast<size_t>(nl - p) : static_cast<size_t>(end - p);
        if (!(cont && l == 0)) log_ring().write(p, l, level, cont);  // pr_cont("\n") ends a line: nothing to add
        cont = false;
        p += l + (nl ? 1 : 0);
    }
}

// `current`: one task_struct per thread, filled when the thread first asks and again after fork.
std::atomic<unsigned> g_fork_generation{1};
struct mm_struct g_mm = {1};
thread_local struct task_struct t_task;
thread_local unsigned t_generation = 0;

[[gnu::constructor]] void watch_forks()
{
    pthread_atfork(nullptr, nullptr, [] { g_fork_generation.fetch_add(1, std::memory_order_relaxed); });
}

// The first address and the size of liveprobe's own object, whose frames dump_stack leaves out.
bool own_object(uint64_t pc)
{
    static std::atomic<uint64_t> base{0};
    uint64_t b = base.load(std::memory_order_relaxed);
    if (b == 0) {
        Dl_info di;
        if (dladdr(reinterpret_cast<void *>(&own_object), &di) == 0) return false;
        b = reinterpret_cast<uint64_t>(di.dli_fbase);
        base.store(b, std::memory_order_relaxed);
    }
    Dl_info di;
    return dladdr(reinterpret_cast<void *>(pc), &di) != 0 && reinterpret_cast<uint64_t>(di.dli_fbase) == b;
}

}  // namespace
}  // namespace liveprobe::agent

using namespace liveprobe;

extern "C" int liveprobe_vprintk(const char *fmt, va_list ap)
{
    if (fmt == nullptr) return 0;
    int level = agent::LogRing::kDefaultLevel;
    bool cont = false;
    // KERN_<LEVEL> prefixes: SOH and a level digit, 'c' (KERN_CONT) or 'd' (KERN_DEFAULT).
    while (fmt[0] == '\001' && fmt[1] != '\0') {
        if (fmt[1] >= '0' && fmt[1] <= '7') level = fmt[1] - '0';
        if (fmt[1] == 'c') cont = true;
        fmt += 2;
    }
    char buf[1024];  // the kernel's longest line is about as long
    size_t n = agent::kernel_vsnprintf(buf, sizeof buf, fmt, ap, agent::symbolize_for_printk);
    size_t len = n < sizeof buf ? n : sizeof buf - 1;
    agent::log_lines(buf, len, level, cont);
    return static_cast<int>(len);
}

extern "C" int liveprobe_printk(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = liveprobe_vprintk(fmt, ap);
    va_end(ap);
    return n;
}

extern "C" struct task_struct *liveprobe_current(void)
{
    unsigned g = agent::g_fork_generation.load(std::memory_order_relaxed);
    if (agent::t_generation != g) {
        agent::t_task.pid = static_cast<pid_t>(syscall(SYS_gettid));
        agent::t_task.tgid = getpid();
        std::memset(agent::t_task.comm, 0, sizeof agent::t_task.comm);
        prctl(PR_GET_NAME, agent::t_task.comm);
        agent::t_task.mm = agent::t_task.active_mm = &agent::g_mm;
        agent::t_generation = g;
    }
    return &agent::t_task;
}

extern "C" void liveprobe_dump_stack(void)
{
    struct task_struct *t = liveprobe_current();
    printk(KERN_DEFAULT "CPU: %d PID: %d Comm: %.16s\n", sched_getcpu(), t->pid, t->comm);
    printk(KERN_DEFAULT "Call Trace:\n");
    void *pcs[64];
    int n = backtrace(pcs, 64);
    for (int i = 0; i < n; ++i) {
        uint64_t pc = reinterpret_cast<uint64_t>(pcs[i]);
        if (agent::own_object(pc)) continue;  // dump_stack itself, the dispatcher, the signal handler
        char sym[512];
        // A return address names its call (pc - 1); the frame of the probed function itself,
        // when a probe sits at its first instruction, has its exact address.
        size_t len = symbols::symbolize(pc, true, true, sym, sizeof sym - 1);
        if (len == 0) len = symbols::symbolize(pc, true, false, sym, sizeof sym - 1);
        if (len == 0) len = static_cast<size_t>(snprintf(sym, sizeof sym, "0x%lx", static_cast<unsigned long>(pc)));
        sym[len < sizeof sym ? len : sizeof sym - 1] = '\0';
        // libc's signal return stub, between a handler on the breakpoint path and the probed code.
        if (std::strncmp(sym, "__restore_rt", 12) == 0) continue;
        printk(KERN_DEFAULT " %s\n", sym);
    }
}
