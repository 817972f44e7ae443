// The user stack of a thread at a probe, for the tracer's --stacks: the return addresses of its
// frames, read by the x86-64 rules of the call frame information where an object has it (a
// table built from .eh_frame before the walks: unwind_table.hpp), by frame pointers where it
// has none. A return slot a return probe replaced holds the trampoline: its real return
// address comes from the thread's calls in flight (core's replaced_slots), so a stack through
// return probes is the program's own.
//
// On the hit path: no allocation, no lock, no descriptor, no vector register (built as the
// tracer's handlers are), no read below sp nor of a page not known readable (each asked of the
// kernel once per thread), at most `max` frames.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace liveprobe::arch {

struct ReplacedSlot {
    uint64_t slot, ret;  // a return slot's stack address, and the return address it held
};

// One row of the unwind table: from pc to the next row's pc, the CFA is `cfa` (kSp: rsp, kBp:
// rbp) + cfa_off, the return address is at CFA - 8, and rbp's caller value is `bp`'s.
struct UnwindRow {
    // cfa: kNone, no CFI here (frame pointers); kEnd, no caller to find (the outermost frame, or a
    // CFA the walk cannot follow: an expression, another register)
    enum : uint8_t { kNone, kSp, kBp, kEnd };
    enum : uint8_t { kBpSame, kBpAtCfa, kBpLost };    // bp: unchanged, saved at CFA + bp_off, unknown
    uint64_t pc;
    int32_t cfa_off;
    uint8_t cfa;
    uint8_t bp;
    int16_t bp_off;
};
static_assert(sizeof(UnwindRow) == 16);

// Each 4 KiB page of code a row with CFI covers: the rows to search for an address in it,
// [lo, hi] (lo covers the page's first byte). Open addressing by page number, `mask` + 1 slots
// (a power of 2, at most half full; an empty slot's page is 0): a lookup reads a slot or two and
// a few rows, where a binary search of the whole table missed the caches at each of its steps.
struct UnwindPage {
    uint64_t page;
    uint32_t lo, hi;
};

struct UnwindTable {
    const UnwindRow *rows;  // sorted by pc
    size_t n;
    const UnwindPage *pages;
    uint64_t mask;
};
inline uint64_t unwind_page_hash(uint64_t page) { return page * 0x9e3779b97f4a7c15ull >> 20; }

// The table walks read: published whole (release), never freed (unwind_table.cpp).
extern std::atomic<const UnwindTable *> g_unwind_table;

struct WalkStart {
    uint64_t ip, sp, bp;
    bool ip_is_return;  // ip is a return address (a return probe's regs): its call is at ip - 1
};

// out[0] = start.ip, then each caller's return address, at most max: how many.
size_t walk_stack(const WalkStart &start, const ReplacedSlot *slots, size_t nslots, uint64_t trampoline, uint64_t *out,
                  size_t max) noexcept;

}  // namespace liveprobe::arch
