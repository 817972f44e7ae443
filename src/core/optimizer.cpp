#include "core/optimizer.hpp"
#include "core/immortal.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <string>
#include <unordered_map>

#include "arch/x86_64/branch_index.hpp"
#include "core/branch_cache.hpp"
#include "arch/x86_64/jump_light.hpp"
#include "arch/x86_64/jump_path.hpp"
#include "core/detour_cache.hpp"
#include "core/kretprobe.hpp"
#include "core/probe_table.hpp"
#include "core/registry.hpp"
#include "core/slot.hpp"
#include "core/thread_state.hpp"
#include "os/linux/code_alloc.hpp"
#include "os/linux/maps.hpp"
#include "os/linux/raw_syscall.hpp"
#include "os/linux/stop_threads.hpp"
#include "os/linux/text_poke.hpp"
#include "symbols/symbols.hpp"

namespace liveprobe::core {
namespace {

// Detours built but not written yet (registry mutex). Nothing can reach a detour before its
// point is armed, or jumped to: the writes of a batch wait until then and go out as one pwrite
// per run of adjacent blocks instead of one per detour.
struct UnwrittenDetour {
    uint64_t block;
    std::vector<uint8_t> bytes;
};
constinit Immortal<std::vector<UnwrittenDetour>> g_unwritten_storage;
std::vector<UnwrittenDetour> &g_unwritten = g_unwritten_storage.value;

Status write_detours()
{
    if (g_unwritten.empty()) return Status::Ok();
    std::sort(g_unwritten.begin(), g_unwritten.end(),
              [](const UnwrittenDetour &a, const UnwrittenDetour &b) { return a.block < b.block; });
    Status result;
    std::vector<uint8_t> run;
    for (size_t i = 0; i < g_unwritten.size();) {
        uint64_t start = g_unwritten[i].block;
        run = g_unwritten[i].bytes;
        size_t j = i + 1;
        for (; j < g_unwritten.size() && g_unwritten[j].block == g_unwritten[j - 1].block + os::kDetourBlock; ++j) {
            run.resize(g_unwritten[j].block - start, 0xcc);  // the previous block's unused tail
            run.insert(run.end(), g_unwritten[j].bytes.begin(), g_unwritten[j].bytes.end());
        }
        if (Status s = os::poke_text(start, run.data(), run.size()); !s.ok() && result.ok()) result = s;
        i = j;
    }
    g_unwritten.clear();
    return result;
}

// A thread still dispatching a point on the breakpoint path is waited for this long before
// optimizing it; past that the point stays on the breakpoint path.
constexpr int kQuiescentSpins = 200000;

bool wait_quiescent_bounded(const ProbePoint *pp)
{
    os::barrier_all_threads();  // see wait_quiescent()
    ThreadRecord *self = this_thread_if_any();
    for (ThreadRecord *r = all_threads(); r; r = r->next) {
        if (r == self) continue;
        for (int spins = 0; r->busy.holds(const_cast<ProbePoint *>(pp)); ++spins) {
            if (spins > kQuiescentSpins) return false;
            if (spins > 64) os::raw_sched_yield();
        }
    }
    return true;
}

}  // namespace

std::vector<uint8_t> original_code(uint64_t start, uint64_t end, const std::map<uint64_t, ProbePoint *> &points)
{
    std::vector<uint8_t> code(end - start);
    os::peek_text(start, code.data(), code.size());
    for (auto it = points.lower_bound(start > 32 ? start - 32 : 0); it != points.end() && it->first < end; ++it) {
        const ProbePoint *p = it->second;
        if (p->opt.load() != kOptNone) {
            uint64_t at = p->addr;
            for (size_t i = 0; i < p->region.n; ++i) {
                const arch::Insn &in = p->region.insns[i];
                for (size_t b = 0; b < in.len; ++b)
                    if (in.addr + b >= start && in.addr + b < end) code[in.addr + b - start] = in.bytes[b];
                at = in.addr + in.len;
            }
            for (size_t b = 0; b < p->region.pad_len; ++b)  // the padding the jmp covers
                if (at + b >= start && at + b < end) code[at + b - start] = p->region.pad[b];
        } else if (p->armed && p->addr >= start) {
            code[p->addr - start] = p->orig_byte;
        }
    }
    return code;
}

namespace {

// Direct branch targets of each executable mapping probed so far (built on first use: a
// linear decode of the whole mapping, tens of milliseconds for libc, or read from the cache a
// process of this user left, core/branch_cache.hpp). Registry mutex.
struct BranchIndex {
    uint64_t start, end;
    std::string path;
    std::vector<uint64_t> targets;
};
constinit Immortal<std::vector<BranchIndex>> g_branch_index_storage;
std::vector<BranchIndex> &g_branch_index = g_branch_index_storage.value;

const BranchIndex *branch_index_for(uint64_t addr, const std::map<uint64_t, ProbePoint *> &points)
{
    for (const BranchIndex &b : g_branch_index)
        if (addr >= b.start && addr < b.end) return &b;
    auto m = os::mapping_at(addr);
    if (!m || !m->x) return nullptr;
    std::vector<uint8_t> code = original_code(m->start, m->end, points);
    g_branch_index.push_back({m->start, m->end, m->path, cached_branch_targets(m->start, code)});
    return &g_branch_index.back();
}

// A direct branch anywhere in the object into bytes 1..len-1 of the region: the address.
uint64_t branch_into(const BranchIndex &b, uint64_t addr, uint64_t len)
{
    auto it = std::upper_bound(b.targets.begin(), b.targets.end(), addr);
    return it != b.targets.end() && *it < addr + len ? *it : 0;
}

// What decoding a handler proved (registry mutex): vector-free, with the general registers it
// and what it calls write; whether it never reads its regs (a pre handler's second argument),
// decoded when first asked. A batch of 10,000 probes sharing a handler decodes it once.
// Dropped when objects are unloaded (an address may then hold other code).
struct HandlerProof {
    bool vector_free = false;
    uint32_t writes = arch::kAllGprs;
    int8_t ignores_regs = -1;  // -1: not decoded yet
};
Immortal<std::unordered_map<uint64_t, HandlerProof>> g_proofs_storage;
std::unordered_map<uint64_t, HandlerProof> &g_proofs = g_proofs_storage.value;

HandlerProof &proof_of(uint64_t h)
{
    auto [it, fresh] = g_proofs.try_emplace(h);
    if (fresh) it->second.vector_free = arch::vector_free(h, 2, nullptr, &it->second.writes);
    return it->second;
}

// The registers a light entry must save for kp, or 0 when kp cannot take the light path.
uint32_t light_needs(const struct kprobe *kp)
{
#ifdef LIVEPROBE_SANITIZER_BUILD
    // The sanitizer runtimes, reached from instrumented code, use any register.
    (void)kp;
    return 0;
#else
    if (!kp->pre_handler || kp->post_handler || kp->fault_handler || (kp->flags & KPROBE_FLAG_FPREGS)) return 0;
    if (kp->pre_handler == kret_pre) {
        // A kretprobe: its light handler (lp_kret_light_pre, jump_light.S) is liveprobe's own
        // code, without vector instructions. Itself it writes rax, rcx, rdx, rsi and rdi (and
        // keeps r8 to r11 around the C functions it calls: lp_kret_light_c, which does the rest
        // of its work, and lp_kret_light_finish). It calls the entry handler, if any, without
        // regs: that one must be proven vector-free and never to read them, and the entry
        // saves what it writes: the registers it was proven to write when it is called
        // directly (entry_direct: it writes no callee-saved register but rbp and rbx, and a
        // fault in it may leave those changed), every caller-saved one when it runs through a thunk
        // (which restores the callee-saved ones, after a fault too), none when it is the TSC
        // stamp, stored in place (entry_stamp).
        const auto *ks = reinterpret_cast<const KretState *>(kp->__lp_reserved[0]);
        const auto *rp = reinterpret_cast<const struct kretprobe *>(kp);
        if (!ks || ks->entry_vec) return 0;
        uint32_t writes = arch::gpr_bit(ZYDIS_REGISTER_RAX) | arch::gpr_bit(ZYDIS_REGISTER_RCX) |
                          arch::gpr_bit(ZYDIS_REGISTER_RDX) | arch::gpr_bit(ZYDIS_REGISTER_RSI) |
                          arch::gpr_bit(ZYDIS_REGISTER_RDI) | arch::light_dispatcher_writes();
        if (rp->entry_handler) {
            const auto eh = reinterpret_cast<uint64_t>(rp->entry_handler);
            HandlerProof &e = proof_of(eh);
            if (!e.vector_free) return 0;
            if (e.ignores_regs < 0) e.ignores_regs = arch::ignores_second_arg(eh, 2, nullptr);
            if (!e.ignores_regs) return 0;
            const uint32_t rbx_rbp = arch::gpr_bit(ZYDIS_REGISTER_RBX) | arch::gpr_bit(ZYDIS_REGISTER_RBP);
            if (!ks->entry_stamp)
                writes |= ks->entry_direct ? e.writes & (arch::kCallerSavedGprs | rbx_rbp) : arch::kCallerSavedGprs;
        }
        return writes;
    }
    // What the light entry calls: the pre handler, or its light variant (set_light_variant).
    const auto *ks = static_cast<const KprobeState *>(kp->__lp_state);
    const auto h = reinterpret_cast<uint64_t>(ks && ks->light_fn ? ks->light_fn : reinterpret_cast<const void *>(kp->pre_handler));
    HandlerProof &p = proof_of(h);
    if (!p.vector_free) return 0;
    if (p.ignores_regs < 0) p.ignores_regs = arch::ignores_second_arg(h, 2, nullptr);
    if (!p.ignores_regs) return 0;
    return p.writes | arch::light_dispatcher_writes();
#endif
}

// Plans the region and builds (or reuses) the detour. Returns a reason on failure.
std::string prepare(ProbePoint *pp, const std::map<uint64_t, ProbePoint *> &points)
{
    auto fn = symbols::function_at(pp->addr);
    if (!fn) return "no function bounds are known for the address (no symbol, no FDE)";
    // The function's bytes, then its alignment padding (a region of a function shorter than the
    // jump may cover it).
    const uint64_t pad_end = symbols::padding_end(*fn);
    std::vector<uint8_t> body = original_code(fn->start, pad_end, points);
    arch::CodeRange range{fn->start, body.data(), fn->end - fn->start};
    // GCC's cold part (f.cold) jumps back into f: its branches count too.
    std::vector<arch::CodeRange> cold;
    std::vector<std::vector<uint8_t>> cold_bodies;
    cold_bodies.reserve(fn->cold.size());
    for (auto [start, end] : fn->cold) {
        cold_bodies.push_back(original_code(start, end, points));
        cold.push_back({start, cold_bodies.back().data(), cold_bodies.back().size()});
    }
    std::vector<uint64_t> others;
    for (auto it = points.lower_bound(fn->start); it != points.end() && it->first < fn->end; ++it)
        if (it->second != pp) others.push_back(it->first);
    arch::Region region;
    if (const char *why = arch::plan_region(pp->addr, range, cold, others, &region, os::peek_data, symbols::jump_is_return,
                                                 symbols::code_address_stored, pad_end - fn->end))
        return why;
    const BranchIndex *bi = branch_index_for(pp->addr, points);
    if (!bi) return "the address is not in an executable mapping";
    if (uint64_t t = branch_into(*bi, pp->addr, region.len))
        return fmt::format("code elsewhere in {} jumps to byte {} of the {} bytes a jmp would replace",
                           bi->path.empty() ? "this mapping" : bi->path.substr(bi->path.rfind('/') + 1),
                           t - pp->addr, region.len);

    bool mid = pp->addr != fn->start;
    std::string bytes;
    for (size_t i = 0; i < region.n; ++i)
        bytes.append(reinterpret_cast<const char *>(region.insns[i].bytes), region.insns[i].len);
    // The light entry, for the kprobe the point has now (another one later may still use it
    // when it needs no more registers saved; else it takes the full path).
    KprobeState *solo = pp->solo.load();
    const uint32_t light_mask = solo ? light_needs(solo->kp) : 0;
    // A kretprobe's entry: the detour's case 3 (detour.hpp).
    const bool kret = solo && solo->kp->pre_handler == kret_pre;
    DetourKey key{pp->addr, bytes, mid, light_mask, kret};
    if (const CachedDetour *d = find_detour(key)) {
        pp->detour = d->block;
        pp->layout = d->layout;
        pp->region = region;
        refresh_light(pp);
        return {};
    }
    uint64_t block = alloc_detour_block(pp->addr);
    if (!block) return "no memory for a detour within +-2 GiB of the address";
    std::vector<uint8_t> buf(os::kDetourBlock, 0xcc);
    arch::DetourLayout layout;
    auto site = reinterpret_cast<uint64_t>(probe_table().site(pp->addr));
    int err = arch::build_detour(region, block, mid, arch::detour_fns(), site, light_mask, kret, buf.data(),
                                 kDetourCodeOffset, buf.size(), &layout);
    if (err == -ERANGE) return "a relocated instruction of the region cannot reach its target from the detour";
    if (err != 0) return "the detour does not fit in its block";
    DetourHeader h{pp->addr, region.len, layout};
    std::memcpy(buf.data(), &h, sizeof h);
    // Only the bytes in use: the rest of the block is never executed. An armed point traps
    // into its detour as soon as it is pending: written now; the others with their batch.
    buf.resize(layout.end);
    g_unwritten.push_back({block, std::move(buf)});
    if (pp->armed) {
        if (Status s = write_detours(); !s.ok()) return s.reason;
    }
    add_detour(key, block, layout);
    pp->detour = block;
    pp->layout = layout;
    pp->region = region;
    refresh_light(pp);
    return {};
}

// Where a thread stopped at ip continues once pp's region is a jmp (ip itself when it is
// not inside the region or pp's slot), or 0 when it cannot be placed.
uint64_t remap(const ProbePoint *pp, uint64_t ip)
{
    const arch::Region &r = pp->region;
    const arch::DetourLayout &L = pp->layout;
    const uint64_t d = pp->detour;
    uint64_t len1 = r.insns[0].len;
    uint64_t plain_after1 = r.n > 1 ? L.plain.offset[1] : L.plain.offset[0] + len1;
    if (ip > r.addr && ip < r.addr + r.len) {
        for (size_t i = 1; i < r.n; ++i)
            if (r.insns[i].addr == ip) return d + L.plain.offset[i];
        // Just past the int3: the thread trapped and its SIGTRAP is pending (the thread-stop
        // delivers it again); the handler will send it to the detour.
        if (ip == r.addr + 1) return ip;
        return 0;
    }
    if (pp->slot && ip >= pp->slot && ip < pp->slot + kSlotSize) {
        uint64_t off = ip - pp->slot;
        if (off == kSlotJumpOffset) return d + L.plain.offset[0];
        if (off == kSlotJumpOffset + len1) return d + plain_after1;
        if (off == kSlotTrapOffset) return d + (L.has_post_path ? L.post_insn1 : L.plain.offset[0]);
        if (off == kSlotTrapOffset + len1) return L.has_post_path ? d + L.post_after1 : d + plain_after1;
        return 0;
    }
    return ip;
}

}  // namespace

std::string prepare_point(ProbePoint *pp, const std::map<uint64_t, ProbePoint *> &points)
{
    if (const char *off = optimization_off_reason()) return off;
    std::string why = prepare(pp, points);
    if (why.empty()) pp->opt.store(kOptPending, std::memory_order_seq_cst);
    return why;
}

const char *optimization_off_reason()
{
    return optimization_enabled() ? nullptr
                                  : "optimization is turned off (liveprobe_set_optimization(0) or "
                                    "LIVEPROBE_OPTIMIZE=0)";
}

namespace {
bool vector_free_memo(uint64_t h) { return proof_of(h).vector_free; }
}  // namespace

void forget_vector_proofs() { g_proofs.clear(); }

void refresh_light(ProbePoint *pp)
{
    KprobeState *ks = pp->solo.load();
    KprobeState *light = nullptr;
    if (ks && pp->layout.light_mask) {
        uint32_t need = light_needs(ks->kp);
        // A kretprobe's light handler answers kLightKret, which only a light entry built for a
        // kretprobe takes (on to lp_kret_rsb_call; any other would take the full entry, which
        // would enter the call a second time).
        const bool kret = ks->kp->pre_handler == kret_pre;
        if (need && (need & ~pp->layout.light_mask) == 0 && (!kret || pp->layout.light_kret)) light = ks;
    }
    pp->light.store(light, std::memory_order_seq_cst);
}

void refresh_vector_need(ProbePoint *pp)
{
    bool vec = false;
    Members *m = pp->members.load();
    for (uint32_t i = 0; m && i < m->n && !vec; ++i) {
        struct kprobe *kp = m->items[i]->kp;
        if (kp->flags & KPROBE_FLAG_FPREGS) vec = true;
        if (kp->flags & (KPROBE_FLAG_NOVEC | KPROBE_FLAG_FPREGS)) continue;
        for (void *h : {reinterpret_cast<void *>(kp->pre_handler), reinterpret_cast<void *>(kp->post_handler),
                        reinterpret_cast<void *>(kp->fault_handler)}) {
            if (h && !vector_free_memo(reinterpret_cast<uint64_t>(h))) vec = true;
        }
    }
    pp->vec.store(vec);
}

namespace {

// Puts a prepared point that could not be optimized on the breakpoint path: its slot
// written, its int3 in place (a trap meanwhile went to the detour), then kOptNone.
void fall_back(ProbePoint *pp, const std::string &why)
{
    pp->why_not = why;
    if (!pp->armed) {
        if (!write_slot(pp).ok()) {
            // No slot: leave the point unarmed rather than trap into nothing.
            pp->opt.store(kOptNone);
            pp->why_not = why + "; and its out-of-line copy could not be written: not armed";
            return;
        }
        const uint8_t int3 = 0xcc;
        os::poke_text(pp->addr, &int3, 1);
        os::sync_cores();
        pp->armed = true;
    }
    pp->opt.store(kOptNone, std::memory_order_seq_cst);
}

void write_jmp(const ProbePoint *pp, size_t from)
{
    uint8_t jmp[arch::kJmpLen];
    int32_t rel = static_cast<int32_t>(int64_t(pp->detour + pp->layout.entry) - int64_t(pp->addr + arch::kJmpLen));
    jmp[0] = 0xe9;
    std::memcpy(jmp + 1, &rel, 4);
    os::poke_text(pp->addr + from, jmp + from, arch::kJmpLen - from);
}

void continue_slot_into_detour(const ProbePoint *pp)
{
    if (!pp->slot || !slot_written(pp)) return;  // an unwritten slot keeps its own `next`
    const arch::DetourLayout &L = pp->layout;
    uint64_t after1 = pp->detour + (pp->region.n > 1 ? L.plain.offset[1] : L.plain.offset[0] + pp->region.insns[0].len);
    os::poke_text(pp->slot + offsetof(SlotHeader, next), &after1, sizeof after1);
}

}  // namespace

void optimize_points(const std::vector<ProbePoint *> &batch, const std::map<uint64_t, ProbePoint *> &points)
{
    std::vector<ProbePoint *> todo;
    for (ProbePoint *pp : batch) {
        if (pp->gone) continue;
        if (pp->opt.load() == kOptPending) {
            todo.push_back(pp);  // prepared before it was armed
            continue;
        }
        int state = pp->opt.load();
        if ((state != kOptNone && state != kOptRetired) || !pp->armed) continue;
        // 1. From now on a trap at this address goes to the detour, not to the slot.
        std::string why = prepare_point(pp, points);
        if (!why.empty()) {
            pp->why_not = why;
            continue;
        }
        todo.push_back(pp);
    }
    // The batch's detours, before anything can reach them.
    if (Status s = write_detours(); !s.ok()) {
        for (ProbePoint *pp : todo) {
            if (!pp->armed) pp->opt.store(kOptNone);  // no trap may go to that detour
            fall_back(pp, "its detour could not be written: " + s.reason);
        }
        return;
    }
    if (todo.empty()) return;

    // 2. A thread that decided for the slot before step 1 is still busy with the point: wait
    //    until it has left the handler (it is then in the slot, or past it).
    std::vector<ProbePoint *> ready;
    for (ProbePoint *pp : todo) {
        if (!pp->armed || wait_quiescent_bounded(pp))
            ready.push_back(pp);
        else
            fall_back(pp, "a thread stayed inside this probe's handlers while it was being optimized");
    }
    if (ready.empty()) return;

    // 3. Multi-instruction regions: stop every other thread, move those inside a region or a
    //    slot to the matching place in the detour, and write each jmp whole. Nothing here
    //    allocates until resume(): a stopped thread may hold the malloc lock.
    //    Single-instruction regions need no stop (no thread can be inside one; a thread in a
    //    slot continues after that instruction): the kernel's text_poke_bp order instead.
    bool need_stop = false;
    for (ProbePoint *pp : ready) need_stop |= pp->region.n > 1;
    std::vector<char> unplaceable(ready.size(), 0);
    if (need_stop) {
        os::WorldStop world;
        Status st = world.stop();
        if (!st.ok()) {
            world.resume();
            for (ProbePoint *pp : ready)
                fall_back(pp, "the other threads cannot be stopped to patch safely: " + st.reason);
            return;
        }
        for (os::StoppedThread &t : world.threads()) {
            for (size_t i = 0; i < ready.size(); ++i) {
                uint64_t to = remap(ready[i], t.ip);
                if (to == 0)
                    unplaceable[i] = 1;  // not at an instruction boundary we know: leave it
                else if (to != t.ip)
                    t.new_ip = to;
            }
        }
        for (size_t i = 0; i < ready.size(); ++i) {
            if (unplaceable[i]) continue;
            continue_slot_into_detour(ready[i]);
            write_jmp(ready[i], 0);
        }
        os::sync_cores();
        world.resume();
    } else {
        // a. int3 on each first byte (a trap goes to the detour: the points are pending).
        const uint8_t int3 = 0xcc;
        for (ProbePoint *pp : ready)
            if (!pp->armed) os::poke_text(pp->addr, &int3, 1);
        os::sync_cores();
        // b. The jmp's displacement after it; the slots continue into the detours.
        for (ProbePoint *pp : ready) {
            continue_slot_into_detour(pp);
            write_jmp(pp, 1);
        }
        os::sync_cores();
        // c. The opcode.
        for (ProbePoint *pp : ready) write_jmp(pp, 0);
        os::sync_cores();
    }
    for (size_t i = 0; i < ready.size(); ++i) {
        if (unplaceable[i]) {
            fall_back(ready[i], "a stopped thread was inside the region at an unknown place");
            continue;
        }
        ready[i]->armed = true;
        ready[i]->opt.store(kOptDone, std::memory_order_release);
        ready[i]->why_not.clear();
    }
}

void unoptimize_point(ProbePoint *pp, bool keep_int3)
{
    int state = pp->opt.load();
    if (state == kOptNone || state == kOptRetired) return;
    // The breakpoint path comes back: its slot must exist first.
    if (keep_int3 && !write_slot(pp).ok()) keep_int3 = false;
    const arch::Region &r = pp->region;
    uint8_t orig[arch::kMaxRegionInsns * arch::kMaxInsnLen];
    size_t n = 0;
    for (size_t i = 0; i < r.n; ++i)
        for (size_t b = 0; b < r.insns[i].len; ++b) orig[n++] = r.insns[i].bytes[b];
    for (size_t b = 0; b < r.pad_len; ++b) orig[n++] = r.pad[b];  // the padding the jmp covered
    // 1. int3 on the first byte: a thread reaching the address traps (and is sent to the
    //    detour while opt != none).
    const uint8_t int3 = 0xcc;
    os::poke_text(pp->addr, &int3, 1);
    os::sync_cores();
    // 2. The original bytes after it.
    os::poke_text(pp->addr + 1, orig + 1, r.len - 1);
    os::sync_cores();
    // 3. The slot continues after the original instruction again.
    if (pp->slot && slot_written(pp)) {
        uint64_t next = pp->addr + pp->insn.len;
        os::poke_text(pp->slot + offsetof(SlotHeader, next), &next, sizeof next);
    }
    // 4. The first byte: the int3 stays (breakpoint path) or the original comes back. Until
    //    then a trap at the address still goes to the detour: the slot may never have been
    //    written (only a point that stays armed needs it).
    if (!keep_int3) {
        os::poke_text(pp->addr, &pp->orig_byte, 1);
        os::sync_cores();
        pp->armed = false;
        // A SIGTRAP raised by the int3 of step 1 may still be pending on some thread: it must
        // keep going to the detour, as the slot may never have been written.
        pp->opt.store(kOptRetired, std::memory_order_seq_cst);
        return;
    }
    pp->opt.store(kOptNone, std::memory_order_seq_cst);
}

}  // namespace liveprobe::core
