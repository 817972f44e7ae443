#include "core/detour_cache.hpp"

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
Detours g_detours;
std::unordered_map<uint64_t, Detours::iterator> g_by_block;
size_t g_retired = 0;

constexpr size_t kReclaimEvery = 64;
size_t g_next_attempt = kReclaimEvery;
uint64_t g_caller_sp = 0;

// Stacks scanned further than this are not believed to be stacks (a coroutine stack in the
// middle of the heap, say): the attempt gives up rather than read the whole heap.
constexpr uint64_t kMaxScan = 64ull << 20;

// Retired blocks under examination, sorted, and which of them were found reachable.
struct Candidates {
    std::vector<uint64_t> block;
    std::vector<const ProbePoint *> pp;
    std::vector<char> keep;
    uint64_t lo = 0, hi = 0;

    void mark(uint64_t w)
    {
        if (w < lo || w >= hi) return;
        uint64_t b = w & ~uint64_t(os::kDetourBlock - 1);
        auto it = std::lower_bound(block.begin(), block.end(), b);
        if (it != block.end() && *it == b) keep[it - block.begin()] = 1;
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
        if (r->in_handler > r->quiet || r->jump_regs)
            return "a handler was running on some thread (it may have switched stacks)";
        const ProbePoint *busy = r->busy.load(std::memory_order_relaxed);
        for (size_t i = 0; busy && i < c.pp.size(); ++i)
            if (c.pp[i] == busy) c.keep[i] = 1;
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
    scan_words(c, sp, m->end);
    return nullptr;
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
    auto [it, fresh] = g_detours.insert_or_assign(key, Entry{CachedDetour{block, layout}});
    (void)fresh;
    g_by_block[block] = it;
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

ReclaimResult reclaim_detours()
{
    // Without a noted entry point, from here: liveprobe's own frames may then keep a detour.
    const uint64_t caller_sp = g_caller_sp ? g_caller_sp : reinterpret_cast<uint64_t>(__builtin_frame_address(0));
    ReclaimResult res;
    if (g_retired == 0) return res;
    // Everything the stop needs is allocated before it: a stopped thread may hold the malloc
    // lock.
    Candidates c;
    std::vector<std::pair<uint64_t, const ProbePoint *>> sorted;
    for (auto &[key, e] : g_detours)
        if (e.retired) sorted.emplace_back(e.d.block, e.pp);
    std::sort(sorted.begin(), sorted.end());
    for (auto &[b, pp] : sorted) {
        c.block.push_back(b);
        c.pp.push_back(pp);
    }
    c.keep.assign(c.block.size(), 0);
    c.lo = c.block.front();
    c.hi = c.block.back() + os::kDetourBlock;
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
    g_next_attempt = g_retired + kReclaimEvery;
    if (deferred) {
        res.kept = g_retired;
        res.deferred = deferred;
        return res;
    }
    // No thread can reach these any more: no jmp leads to them (their points' bytes are back),
    // and no thread holds a way back. int3 over the old code, then reuse.
    const std::vector<uint8_t> int3(os::kDetourBlock, 0xcc);
    for (size_t i = 0; i < c.block.size(); ++i) {
        if (c.keep[i]) {
            ++res.kept;
            continue;
        }
        auto b = g_by_block.find(c.block[i]);
        if (b == g_by_block.end()) continue;
        if (!os::poke_text(c.block[i], int3.data(), int3.size()).ok()) {
            ++res.kept;  // cannot be overwritten: left retired, tried again later
            continue;
        }
        g_detours.erase(b->second);
        g_by_block.erase(b);
        --g_retired;
        os::free_code(c.block[i], os::kDetourBlock);
        ++res.freed;
    }
    g_next_attempt = g_retired + kReclaimEvery;
    return res;
}

uint64_t alloc_detour_block(uint64_t near)
{
    if (os::free_code_blocks(os::kDetourBlock) == 0 && g_retired >= g_next_attempt) reclaim_detours();
    return os::alloc_code(near, os::kDetourBlock);
}

}  // namespace liveprobe::core
