// The user stack at a probe (stack_walk.hpp). Built as the tracer's handlers are
// (-mgeneral-regs-only, no jump tables, no loop made a memcpy call: src/CMakeLists.txt).
#include "arch/x86_64/stack_walk.hpp"

#include <fcntl.h>
#include <sys/syscall.h>

#include "os/linux/raw_syscall.hpp"

namespace liveprobe::arch {

std::atomic<const UnwindTable *> g_unwind_table{nullptr};

namespace {

// The mapping of the stack the last walk of this thread read: [lo, hi).
struct StackMapping {
    uint64_t lo, hi;
};
constinit thread_local StackMapping t_stack{0, 0};

// The end of the mapping holding sp, from /proc/self/maps read with system calls (no libc: the
// hit path), line by line as it streams by: 0 when none holds it.
uint64_t mapping_end(uint64_t sp, uint64_t *lo_out) noexcept
{
    const long fd = os::raw_syscall(SYS_open, reinterpret_cast<long>("/proc/self/maps"), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    char buf[256];
    uint64_t v[2] = {0, 0};
    int field = 0;       // 0: the start, 1: the end, 2: the rest of the line
    uint64_t found = 0;
    for (long got; found == 0 && (got = os::raw_syscall(SYS_read, fd, reinterpret_cast<long>(buf), sizeof buf)) > 0;) {
        for (long i = 0; i < got; ++i) {
            const char c = buf[i];
            if (c == '\n') {
                if (v[0] <= sp && sp < v[1]) {
                    found = v[1];
                    *lo_out = v[0];
                    break;
                }
                v[0] = v[1] = 0;
                field = 0;
            } else if (field < 2) {
                const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
                if (d >= 0) v[field] = v[field] << 4 | static_cast<uint64_t>(d);
                else ++field;  // '-' after the start, ' ' after the end
            }
        }
    }
    os::raw_syscall(SYS_close, fd);
    return found;
}

// The top of the stack holding sp (this thread's last, or learnt now).
uint64_t stack_top(uint64_t sp) noexcept
{
    StackMapping &m = t_stack;
    if (sp >= m.lo && sp < m.hi) return m.hi;
    uint64_t lo = 0;
    const uint64_t hi = mapping_end(sp, &lo);
    if (hi) m = {lo, hi};
    return hi;
}

// The row holding pc, or null.
const UnwindRow *row_of(const UnwindTable *t, uint64_t pc) noexcept
{
    if (!t || t->n == 0 || pc < t->rows[0].pc) return nullptr;
    size_t lo = 0, hi = t->n;  // rows[lo].pc <= pc < rows[hi].pc
    while (hi - lo > 1) {
        const size_t mid = lo + (hi - lo) / 2;
        if (t->rows[mid].pc <= pc) lo = mid;
        else hi = mid;
    }
    return &t->rows[lo];
}

}  // namespace

size_t walk_stack(const WalkStart &start, const ReplacedSlot *slots, size_t nslots, uint64_t trampoline, uint64_t *out,
                  size_t max) noexcept
{
    const uint64_t lo = start.sp, hi = stack_top(start.sp);
    const auto inside = [&](uint64_t at) { return at >= lo && at + 8 <= hi && (at & 7) == 0; };
    const auto load = [](uint64_t at) { return *reinterpret_cast<const volatile uint64_t *>(at); };
    const UnwindTable *table = g_unwind_table.load(std::memory_order_acquire);
    uint64_t pc = start.ip, sp = start.sp, bp = start.bp;
    bool ret = start.ip_is_return;
    size_t n = 0;
    while (n < max) {
        out[n++] = pc;
        if (n == max || hi == 0) break;
        const UnwindRow *row = row_of(table, ret ? pc - 1 : pc);
        if (row && row->cfa == UnwindRow::kEnd) break;  // the outermost frame
        uint64_t cfa, next_bp = bp;
        if (row && row->cfa != UnwindRow::kNone) {
            cfa = (row->cfa == UnwindRow::kSp ? sp : bp) + static_cast<uint64_t>(static_cast<int64_t>(row->cfa_off));
            if (row->bp == UnwindRow::kBpAtCfa) {
                const uint64_t at = cfa + static_cast<uint64_t>(static_cast<int64_t>(row->bp_off));
                if (!inside(at)) break;
                next_bp = load(at);
            } else if (row->bp == UnwindRow::kBpLost) {
                next_bp = 0;
            }
        } else {  // no CFI: a frame pointer's chain, if bp is one
            if (!inside(bp) || bp < sp) break;
            cfa = bp + 16;
            next_bp = load(bp);
        }
        const uint64_t ra_at = cfa - 8;
        if (cfa <= sp || !inside(ra_at)) break;
        uint64_t ra = load(ra_at);
        if (ra == trampoline) {  // a return probe's: the call's own return address
            size_t i = 0;
            while (i < nslots && slots[i].slot != ra_at) ++i;
            if (i == nslots) break;
            ra = slots[i].ret;
        }
        if (ra < 4096) break;
        sp = cfa;
        bp = next_bp;
        pc = ra;
        ret = true;
    }
    return n;
}

}  // namespace liveprobe::arch
