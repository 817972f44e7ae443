#include "core/detour_cache.hpp"
#include "core/immortal.hpp"

#include <algorithm>
#include <map>
#include <unordered_map>
#include <vector>

#include "core/thread_state.hpp"
#include "os/linux/code_alloc.hpp"
#include "os/linux/maps.hpp"
#include "os/linux/stack_regions.hpp"
#include "os/linux/stop_threads.hpp"
#include "os/linux/text_poke.hpp"

namespace liveprobe::core {
namespace {

// Every detour built and not freed, live or retired. Entries never move (std::map), so the
// block -> entry index holds iterators.
struct Entry {
    CachedDetour d;
    bool retired = false;
    const ProbePoint *pp = nullptr;  // when retired: the point it served, as an identity only (it
                                     // may be freed): a thread still busy with it may be about to
                                     // enter the detour
};
using Detours = std::map<DetourKey, Entry>;
Immortal<Detours> g_detours_storage;
Detours &g_detours = g_detours_storage.value;
Immortal<std::unordered_map<uint64_t, Detours::iterator>> g_by_block_storage;
std::unordered_map<uint64_t, Detours::iterator> &g_by_block = g_by_block_storage.value;
size_t g_retired = 0;

constexpr size_t kReclaimEvery = 64;
size_t g_next_attempt = kReclaimEvery;
uint64_t g_caller_sp = 0;

// Stacks scanned further than this are not believed to be stacks (a coroutine stack in the
// middle of the heap, say): the attempt gives up rather than read the whole heap.
constexpr uint64_t kMaxScan = 64ull << 20;

// Retired detours under examination, sorted by block, and which of them were found reachable.
struct Candidates {
    struct Candidate {
        uint64_t block;
        Detours::iterator it;
        bool operator<(const Candidate &o) const { return block < o.block; }
    };
    std::vector<Candidate> retired;
    std::vector<char> keep;
    uint64_t lo = 0, hi = 0;

    void mark(uint64_t w)
    {
        if (w < lo || w >= hi) return;
        const uint64_t b = w & ~uint64_t(os::kDetourBlock - 1);
        auto it = std::lower_bound(retired.begin(), retired.end(), Candidate{b, {}});
        if (it != retired.end() && it->block == b) keep[it - retired.begin()] = 1;
    }
};

// Reads other threads' stacks while they are stopped (no happens-before a sanitizer could
// see; ASan's redzones are legitimately read here).
__attribute__((noinline, no_sanitize("address", "thread"))) void scan_words(Candidates &c, uint64_t from,
                                                                               uint64_t to)
{
    for (uint64_t p = from & ~uint64_t(7); p + 8 <= to; p += 8)
        c.mark(*reinterpret_cast<const volatile uint64_t *>(p));
}

// What the thread records say, every other thread being stopped: a point still dispatched
// keeps its detour; a handler running anywhere defers everything. Returns why, or null.
__attribute__((noinline, no_sanitize("address", "thread"))) const char *check_records(Candidates &c)
{
    for (ThreadRecord *r = all_threads(); r; r = r->next) {
        if (r->owner.load(std::memory_order_relaxed) == 0) continue;
        // in_handler counts the registry mutex too (quiet): only handlers matter here.
        if (r->in_handler > r->quiet || r->jump_regs || r->jump_light)
            return "a handler was running on some thread (it may have switched stacks)";
        for (size_t i = 0; i < c.retired.size(); ++i)
            if (r->busy.holds(const_cast<ProbePoint *>(c.retired[i].it->second.pp))) c.keep[i] = 1;
    }
    return nullptr;
}

// The mapping whose words from sp up are a thread's live stack: the one holding sp, or the
// [stack] just above it (the main stack grew after the map was read).
const os::Mapping *stack_mapping(const std::vector<os::Mapping> &maps, uint64_t sp)
{
    auto it = std::upper_bound(maps.begin(), maps.end(), sp,
                               [](uint64_t a, const os::Mapping &m) { return a < m.start; });
    if (it != maps.begin() && sp < std::prev(it)->end) return &*std::prev(it);
    if (it != maps.end() && it->path == "[stack]" && it->start - sp < (8u << 20)) return &*it;
    return nullptr;
}

// Scans one thread's stack; returns why the thread's frames cannot all be seen, or null.
const char *scan_stack(Candidates &c, const std::vector<os::Mapping> &maps, uint64_t sp)
{
    if (os::stack_region(sp) != 0)
        return "a thread runs on an alternate signal stack or a makecontext stack (frames it left "
               "are on another stack)";
    const os::Mapping *m = stack_mapping(maps, sp);
    if (!m) return "a thread's stack pointer is in memory mapped after the scan began";
    if (m->end - sp > kMaxScan) return "a thread's stack is not a stack liveprobe can scan (over 64 MiB)";
    // The 128 bytes below sp too (no signal frame reaches them): a thread between a detour's
    // case 3 (or a kretprobe's light entry) and the call back into it (lp_kret_rsb_call, which
    // reads the relocated region's address from below sp) holds the detour's address only
    // there (kretprobe_trampoline.S).
    const uint64_t from = sp - m->start >= 128 ? sp - 128 : m->start;
    scan_words(c, from, m->end);
    return nullptr;
}

// Frees every retired detour no thread can return to (see detour_cache.hpp).
void reclaim_detours()
{
    if (g_retired == 0) return;
    // Without a noted entry point, from here: liveprobe's own frames may then keep a detour.
    const uint64_t caller_sp = g_caller_sp ? g_caller_sp : reinterpret_cast<uint64_t>(__builtin_frame_address(0));
    // Everything the stop needs is allocated before it: a stopped thread may hold the malloc
    // lock.
    Candidates c;
    for (auto it = g_detours.begin(); it != g_detours.end(); ++it)
        if (it->second.retired) c.retired.push_back({it->second.d.block, it});
    std::sort(c.retired.begin(), c.retired.end());
    c.keep.assign(c.retired.size(), 0);
    c.lo = c.retired.front().block;
    c.hi = c.retired.back().block + os::kDetourBlock;
    std::vector<os::Mapping> maps = os::read_maps();
    std::sort(maps.begin(), maps.end(), [](const auto &a, const auto &b) { return a.start < b.start; });

    const char *deferred = nullptr;
    {
        os::WorldStop world;
        if (Status st = world.stop(); !st.ok()) deferred = "the other threads cannot be stopped";
        if (!deferred) deferred = check_records(c);
        for (const os::StoppedThread &t : world.threads()) {
            if (deferred) break;
            c.mark(t.ip);
            for (uint64_t g : t.gpr) c.mark(g);
            deferred = scan_stack(c, maps, t.sp);
        }
        if (!deferred) deferred = scan_stack(c, maps, caller_sp);
        world.resume();
    }
    // `deferred` says why nothing was freed this time; the next attempt decides.
    if (!deferred) {
        // No thread can reach these any more: no jmp leads to them (their points' bytes are
        // back), and no thread holds a way back. int3 over the old code, then reuse. One that
        // cannot be overwritten stays retired, tried again later.
        const std::vector<uint8_t> int3(os::kDetourBlock, 0xcc);
        for (size_t i = 0; i < c.retired.size(); ++i) {
            const uint64_t block = c.retired[i].block;
            if (c.keep[i] || !os::poke_text(block, int3.data(), int3.size()).ok()) continue;
            g_detours.erase(c.retired[i].it);
            g_by_block.erase(block);
            --g_retired;
            os::free_code(block, os::kDetourBlock);
        }
    }
    g_next_attempt = g_retired + kReclaimEvery;
}

}  // namespace

const CachedDetour *find_detour(const DetourKey &key)
{
    auto it = g_detours.find(key);
    if (it == g_detours.end()) return nullptr;
    if (it->second.retired) {
        it->second.retired = false;
        it->second.pp = nullptr;
        --g_retired;
    }
    return &it->second.d;
}

void add_detour(const DetourKey &key, uint64_t block, const arch::DetourLayout &layout)
{
    g_by_block[block] = g_detours.insert_or_assign(key, Entry{CachedDetour{block, layout}}).first;
}

void retire_detour(uint64_t block, const ProbePoint *pp)
{
    auto b = g_by_block.find(block);
    if (b == g_by_block.end() || b->second->second.retired) return;
    b->second->second.retired = true;
    b->second->second.pp = pp;
    ++g_retired;
}

void note_caller_stack(uint64_t sp) { g_caller_sp = sp; }

uint64_t alloc_detour_block(uint64_t near)
{
    if (os::free_code_blocks(os::kDetourBlock) == 0 && g_retired >= g_next_attempt) reclaim_detours();
    return os::alloc_code(near, os::kDetourBlock);
}

}  // namespace liveprobe::core
