// The user stack at a probe (stack_walk.hpp). Built as the tracer's handlers are
// (-mgeneral-regs-only, no jump tables, no loop made a memcpy call: src/CMakeLists.txt).
#include "arch/x86_64/stack_walk.hpp"

#include <sys/syscall.h>

#include "os/linux/raw_syscall.hpp"

namespace liveprobe::arch {

std::atomic<const UnwindTable *> g_unwind_table{nullptr};

namespace {

// The pages of this thread's stack found readable: [lo, hi). A walk reads only there, and
// extends it a page at a time, each page asked of the kernel once (process_vm_readv on this
// process: no descriptor, no fault). Between sp and the top of its stack, every page is.
struct Readable {
    uint64_t lo, hi;
};
constinit thread_local Readable t_readable{0, 0};
constexpr uint64_t kPage = 4096;

bool page_readable(uint64_t page) noexcept
{
    unsigned char byte;
    struct {
        void *base;
        size_t len;
    } local{&byte, 1}, remote{reinterpret_cast<void *>(page), 1};
    return os::raw_syscall(SYS_process_vm_readv, os::raw_getpid(), reinterpret_cast<long>(&local), 1,
                           reinterpret_cast<long>(&remote), 1, 0) == 1;
}

// Whether the 8 bytes at `at` (8-aligned) can be read: in the readable pages, or on the page
// after them (asked now).
bool readable(uint64_t at) noexcept
{
    Readable &r = t_readable;
    const uint64_t page = at & ~(kPage - 1);
    if (page >= r.lo && page < r.hi) return true;
    if (!page_readable(page)) return false;
    if (page == r.hi) r.hi += kPage;
    else if (page + kPage == r.lo) r.lo = page;
    else r = {page, page + kPage};  // another stack (a signal stack, a coroutine's), or the first walk
    return true;
}

// The row holding pc, or null: its page's rows, from the page index.
const UnwindRow *row_of(const UnwindTable *t, uint64_t pc) noexcept
{
    if (!t || t->n == 0) return nullptr;
    const uint64_t page = pc >> 12;
    for (uint64_t i = unwind_page_hash(page) & t->mask;; i = (i + 1) & t->mask) {
        const UnwindPage &p = t->pages[i];
        if (p.page == 0) return nullptr;  // no row with CFI in this page: frame pointers
        if (p.page != page) continue;
        size_t lo = p.lo, hi = p.hi;  // rows[lo].pc <= pc (lo covers the page's start)
        if (t->rows[lo].pc > pc) return nullptr;
        while (lo < hi) {
            const size_t mid = lo + (hi - lo + 1) / 2;
            if (t->rows[mid].pc <= pc) lo = mid;
            else hi = mid - 1;
        }
        return &t->rows[lo];
    }
}

}  // namespace

size_t walk_stack(const WalkStart &start, const ReplacedSlot *slots, size_t nslots, uint64_t trampoline, uint64_t *out,
                  size_t max) noexcept
{
    // Above sp only (below it: the handlers' own frames), and only where readable.
    const uint64_t lo = start.sp;
    const auto inside = [&](uint64_t at) { return at >= lo && (at & 7) == 0 && readable(at); };
    const auto load = [](uint64_t at) { return *reinterpret_cast<const volatile uint64_t *>(at); };
    const UnwindTable *table = g_unwind_table.load(std::memory_order_acquire);
    uint64_t pc = start.ip, sp = start.sp, bp = start.bp;
    bool ret = start.ip_is_return;
    size_t n = 0;
    while (n < max) {
        out[n++] = pc;
        if (n == max) break;
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
