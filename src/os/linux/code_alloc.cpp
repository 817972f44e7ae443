#include "os/linux/code_alloc.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <vector>

#include "os/linux/maps.hpp"

namespace liveprobe::os {
namespace {

constexpr size_t kArenaSize = 64 * 1024;
constexpr size_t kMaxArenas = 4096;
constexpr int64_t kReach = (int64_t{1} << 31) - 1;

struct Arena {
    std::atomic<uint64_t> start{0};
    std::atomic<size_t> block{0};  // block size of this arena
    uint64_t used = 0;             // bytes handed out; guarded by the caller's serialization
};

// Published with release on g_count: readers (signal handlers) see complete entries.
Arena g_arenas[kMaxArenas];
std::atomic<size_t> g_count{0};

// Blocks given back by free_code(), reused before arenas grow (caller's serialization).
std::vector<uint64_t> g_free[2];  // [0] slot blocks, [1] detour blocks
std::vector<uint64_t> &free_list(size_t size) { return g_free[size == kDetourBlock]; }

bool reaches(uint64_t at, size_t size, uint64_t near)
{
    if (near == 0) return true;
    int64_t d1 = int64_t(at) - int64_t(near), d2 = int64_t(at + size) - int64_t(near);
    return std::llabs(d1) < kReach - 64 && std::llabs(d2) < kReach - 64;
}

bool within(uint64_t a, uint64_t lo, uint64_t hi) { return a >= lo && a <= hi; }

uint64_t map_arena_near(uint64_t near)
{
    if (near == 0) {
        void *p = mmap(nullptr, kArenaSize, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS,
                       -1, 0);
        return p == MAP_FAILED ? 0 : reinterpret_cast<uint64_t>(p);
    }
    // Every byte of the arena must be within rel32 reach of `near` (and of near + 15).
    uint64_t lo = near > uint64_t(kReach) - kArenaSize ? near - (uint64_t(kReach) - kArenaSize) : 4096 * 16;
    uint64_t hi = near + (uint64_t(kReach) - kArenaSize * 2);
    auto maps = read_maps();
    std::sort(maps.begin(), maps.end(), [](auto &a, auto &b) { return a.start < b.start; });
    // Candidate gaps, closest to `near` first.
    struct Cand {
        uint64_t addr;
        uint64_t dist;
    };
    std::vector<Cand> cands;
    uint64_t prev_end = 4096 * 16;
    auto consider = [&](uint64_t gap_lo, uint64_t gap_hi) {
        if (gap_hi <= gap_lo || gap_hi - gap_lo < kArenaSize) return;
        uint64_t a_lo = std::max(gap_lo, lo), a_hi = std::min(gap_hi - kArenaSize, hi);
        a_lo = (a_lo + 0xffff) & ~uint64_t(0xffff);
        a_hi &= ~uint64_t(0xffff);
        if (a_lo > a_hi) return;
        uint64_t best = near < a_lo ? a_lo : (near > a_hi ? a_hi : (near & ~uint64_t(0xffff)));
        if (best < a_lo) best = a_lo;
        cands.push_back({best, best > near ? best - near : near - best});
    };
    for (auto &m : maps) {
        consider(prev_end, m.start);
        prev_end = std::max(prev_end, m.end);
    }
    consider(prev_end, uint64_t{0x7ffffffff000});
    std::sort(cands.begin(), cands.end(), [](auto &a, auto &b) { return a.dist < b.dist; });
    for (auto &c : cands) {
        void *p = mmap(reinterpret_cast<void *>(c.addr), kArenaSize, PROT_READ | PROT_EXEC,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
        if (p == MAP_FAILED) continue;
        uint64_t got = reinterpret_cast<uint64_t>(p);
        if (within(got, lo, hi)) return got;
        munmap(p, kArenaSize);  // an old kernel ignored the hint
    }
    return 0;
}

}  // namespace

uint64_t alloc_code(uint64_t near, size_t size)
{
    if (size != kSlotBlock && size != kDetourBlock) return 0;
    std::vector<uint64_t> &fl = free_list(size);
    for (size_t i = fl.size(); i-- > 0;) {
        if (!reaches(fl[i], size, near)) continue;
        uint64_t at = fl[i];
        fl[i] = fl.back();
        fl.pop_back();
        return at;
    }
    size_t n = g_count.load(std::memory_order_acquire);
    for (size_t i = 0; i < n; ++i) {
        Arena &a = g_arenas[i];
        uint64_t s = a.start.load(std::memory_order_relaxed);
        if (a.block.load(std::memory_order_relaxed) != size || a.used + size > kArenaSize) continue;
        uint64_t at = s + a.used;
        if (!reaches(at, size, near)) continue;
        a.used += size;
        return at;
    }
    if (n == kMaxArenas) return 0;
    uint64_t s = map_arena_near(near);
    if (s == 0) return 0;
    g_arenas[n].start.store(s, std::memory_order_relaxed);
    g_arenas[n].block.store(size, std::memory_order_relaxed);
    g_arenas[n].used = size;
    g_count.store(n + 1, std::memory_order_release);
    return s;
}

void free_code(uint64_t block, size_t size)
{
    uint64_t start;
    if (code_block(block, &start) != size || start != block) return;  // not a block of ours
    free_list(size).push_back(block);
}

size_t free_code_blocks(size_t size) { return free_list(size).size(); }

size_t code_block(uint64_t addr, uint64_t *start) noexcept
{
    size_t n = g_count.load(std::memory_order_acquire);
    for (size_t i = 0; i < n; ++i) {
        uint64_t s = g_arenas[i].start.load(std::memory_order_relaxed);
        if (addr >= s && addr < s + kArenaSize) {
            size_t b = g_arenas[i].block.load(std::memory_order_relaxed);
            *start = addr & ~uint64_t(b - 1);
            return b;
        }
    }
    return 0;
}

bool is_liveprobe_code(uint64_t addr) noexcept
{
    uint64_t start;
    return code_block(addr, &start) != 0;
}

}  // namespace liveprobe::os
