// Registration of return probes (see kretprobe.hpp) and their C API.
#include "core/kretprobe.hpp"
#include "core/immortal.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

#include "arch/x86_64/region.hpp"
#include "core/error.hpp"
#include "core/kret_debugger.hpp"
#include "core/registry.hpp"
#include "core/unwinder_hooks.hpp"

namespace liveprobe::core {
namespace {

constexpr size_t kMaxDataSize = 4096;

std::mutex g_mu;  // after the registry mutex when both are held
Immortal<std::unordered_map<const struct kretprobe *, KretState *>> g_krets_storage;
std::unordered_map<const struct kretprobe *, KretState *> &g_krets = g_krets_storage.value;

int default_maxactive()
{
    long n = sysconf(_SC_NPROCESSORS_CONF);
    return static_cast<int>(std::max<long>(10, 2 * n));
}

// What the analysis proves of a handler, once per registration: vector-free, and the general
// registers it writes, its callees' included (gpr_bit masks). No handler: vector-free, writes
// nothing.
struct HandlerProof {
    bool vector_free = true;
    uint32_t writes = 0;
};

HandlerProof prove(kretprobe_handler_t h)
{
    HandlerProof p;
    if (!h) return p;
    const char *why = nullptr;
    p.vector_free = arch::vector_free(reinterpret_cast<uint64_t>(h), 2, &why, &p.writes);
    return p;
}

// Whether p's handler is vector-free and writes no general register outside `may`.
bool writes_only(const HandlerProof &p, uint32_t may) { return p.vector_free && (p.writes & ~may) == 0; }

std::atomic<kretprobe_handler_t> g_entry_stamp{nullptr};  // set_kret_entry_stamp
std::atomic<kretprobe_handler_t> g_return_inline{nullptr};  // set_kret_return_inline

static_assert(offsetof(struct pt_regs, r11) == 6 * 8 && offsetof(struct pt_regs, di) == 14 * 8 &&
              offsetof(struct pt_regs, ip) == 16 * 8);

// Whether h can run on the light return (kretprobe_trampoline.S), which saves only the
// caller-saved registers, rbp and rbx, and passes a regs with only those and ip: h is proven
// vector-free and uses no other field of its regs (nor the pointer itself). 0: it cannot; 1: it
// can, called by the trampoline itself: it writes no callee-saved register but rbp and rbx (a
// frame pointer, a value kept across a call); 2: it can, through lp_kret_call_saving, which
// saves the callee-saved registers (a fault in h abandons it with whatever it wrote).
int light_return_kind(kretprobe_handler_t h, const HandlerProof &p)
{
#ifdef LIVEPROBE_SANITIZER_BUILD
    (void)h, (void)p;
    return 0;  // the sanitizer runtimes, reached from instrumented handlers, use any register
#else
    if (!h) return 1;
    const char *why = nullptr;
    if (!p.vector_free || !arch::regs_fields_only(reinterpret_cast<uint64_t>(h), 2, kLightRegsFields, &why)) return 0;
    const uint32_t saved = arch::kCallerSavedGprs | arch::gpr_bit(ZYDIS_REGISTER_RBP) | arch::gpr_bit(ZYDIS_REGISTER_RBX);
    return writes_only(p, saved) ? 1 : 2;
#endif
}

// Whether h, which the light return calls itself (light_return_kind 1), also leaves rcx and r8
// to r11 alone, in its registers and in its regs: the trampoline then saves none of them.
bool few_return(kretprobe_handler_t h, const HandlerProof &p)
{
    const uint32_t few = arch::gpr_bit(ZYDIS_REGISTER_RAX) | arch::gpr_bit(ZYDIS_REGISTER_RDX) |
                         arch::gpr_bit(ZYDIS_REGISTER_RSI) | arch::gpr_bit(ZYDIS_REGISTER_RDI) |
                         arch::gpr_bit(ZYDIS_REGISTER_RBP) | arch::gpr_bit(ZYDIS_REGISTER_RBX);
    const char *why = nullptr;
    return writes_only(p, few) && arch::regs_fields_only(reinterpret_cast<uint64_t>(h), 2, kFewRegsFields, &why);
}

// The address rp->kp names, which must be a function's entry.
Status check_entry(const struct kretprobe *rp)
{
    const struct kprobe &kp = rp->kp;
    if (Status s = check_no_handlers(kp, "a kretprobe"); !s.ok()) return s;
    if (rp->data_size > kMaxDataSize)
        return Fail(-E2BIG, "data_size {} is over the limit of {} bytes", rp->data_size, kMaxDataSize);
    return check_function_entry(kp, "a kretprobe");
}

// Whether untouched pages of a MAP_NORESERVE read-write mapping cost no commit charge: the
// kernel's overcommit policy is not 2 ("never": every writable private page is charged).
// LIVEPROBE_KRET_MEMORY=commit in the environment answers no, as that policy would (tests run
// the kretprobe tests so too).
bool lazy_memory_is_free()
{
    static const bool free = [] {
        const char *env = secure_getenv("LIVEPROBE_KRET_MEMORY");
        if (env && std::strcmp(env, "commit") == 0) return false;
        char c = '0';
        int fd = open("/proc/sys/vm/overcommit_memory", O_RDONLY | O_CLOEXEC);
        if (fd < 0) return false;
        const bool ok = read(fd, &c, 1) == 1;
        close(fd);
        return ok && c != '2';
    }();
    return free;
}

thread_local bool tl_calls_only = false;  // CallsOnlyRegistrations

// The state and instance pool of rp, in one mapping.
Status make_state(struct kretprobe *rp, KretState **out)
{
    int count = rp->maxactive > 0 ? rp->maxactive : default_maxactive();
    rp->maxactive = count;  // as the kernel does: the caller sees the bound in force
    size_t stride = (sizeof(Inst) + sizeof(struct kretprobe_instance) + rp->data_size + 15) & ~size_t(15);
    // The state and the first instances in the second half of their page rather than at its
    // start: the thread records' hot fields sit at the start of theirs (the first record of a
    // chunk is page-aligned), and a load whose address matches a store still in flight in its
    // low 12 bits (4K aliasing) waits for it (liveprobe-kret-cycles: 46.3 -> 44.7 TSC cycles a
    // call). Not at one offset for all: the states of a tracer's probes would all fall in one
    // set of the first-level cache (its 8 ways), and the probes called in turn would evict each
    // other's. Sixteen offsets, 64 bytes apart (liveprobe-call-cycles 8: 79.7-90.4 against
    // 92.4-102.3; 128: 147.4-153.3 against 158.3-164.4).
    static std::atomic<uint32_t> colour{0};
    const size_t kStateAt = 0x800 + 0x40 * (colour.fetch_add(1, std::memory_order_relaxed) % 16);
    size_t header = kStateAt + ((sizeof(KretState) + 63) & ~size_t(63));
    size_t size = header + stride * static_cast<size_t>(count);
    size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    size = (size + page - 1) & ~(page - 1);
    // Address space for all of them; memory for the state now, for instances as they are
    // first taken (kret_hit.cpp commit_instances). Where the kernel does not count a
    // MAP_NORESERVE mapping against the commit limit (any overcommit policy but "never"), the
    // whole mapping is read-write from the start, which commits nothing either: the kernel then
    // merges the mappings of a tracer's hundreds of kretprobes into a few, where read-write
    // states beside PROT_NONE pools made two apiece, and every /proc/self/maps read during the
    // placement (22 for `trace --hist '*'` on jq, 522 probes) read two lines more a probe.
    const bool rw = lazy_memory_is_free();
    void *mem = mmap(nullptr, size, rw ? PROT_READ | PROT_WRITE : PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                     -1, 0);
    if (mem == MAP_FAILED)
        return Fail(-ENOMEM, "no address space for {} instances of {} bytes (maxactive, data_size)", count, stride);
    if (!rw && mprotect(mem, header, PROT_READ | PROT_WRITE) != 0) {
        munmap(mem, size);
        return Fail(-ENOMEM, "no memory for a kretprobe's state");
    }
    auto *ks = new (static_cast<uint8_t *>(mem) + kStateAt) KretState();
    if (rw) ks->committed.store(static_cast<uint32_t>(count), std::memory_order_relaxed);
    ks->header = header;
    ks->rp = rp;
    ks->base = static_cast<uint8_t *>(mem);
    ks->map_size = size;
    ks->pool = ks->base + header;
    ks->stride = stride;
    ks->count = static_cast<uint32_t>(count);
    ks->cache_slot = cache_slot_of(ks);
    ks->free_top.store(0);  // empty: every instance is fresh (kret_hit.cpp take_global)
    // KPROBE_FLAG_FPREGS: the handlers read the thread's floating-point registers, which must
    // then be saved (liveprobe_get_fpregs), proof or not. KPROBE_FLAG_NOVEC: the caller
    // declares that they never touch vector registers, proof or not. Both are input flags,
    // kept for detach to give back (registration replaces them in kp.flags).
    ks->declared_flags = rp->kp.flags & (KPROBE_FLAG_NOVEC | KPROBE_FLAG_FPREGS);
    bool fp = rp->kp.flags & KPROBE_FLAG_FPREGS;
    const bool novec = !fp && (rp->kp.flags & KPROBE_FLAG_NOVEC);
    const HandlerProof entry = prove(rp->entry_handler), ret = prove(rp->handler);
    const uint32_t rbp = arch::gpr_bit(ZYDIS_REGISTER_RBP), rbx = arch::gpr_bit(ZYDIS_REGISTER_RBX);
    ks->entry_vec = fp || (!novec && !entry.vector_free);
    ks->entry_bare = !ks->entry_vec && writes_only(entry, arch::kCallerSavedGprs | rbp);
    ks->entry_direct = !ks->entry_vec && writes_only(entry, arch::kCallerSavedGprs | rbp | rbx);
    ks->return_vec = fp || (!novec && !ret.vector_free);
    ks->unwind_vec = fp || (!novec && !prove(rp->unwind_handler).vector_free);
    const int kind = fp ? 0 : light_return_kind(rp->handler, ret);
    ks->return_light = kind != 0;
    ks->return_saves = kind == 2;
    ks->return_rbx = kind == 1 && !writes_only(ret, arch::kCallerSavedGprs | rbp);
    ks->return_few = kind == 1 && (!rp->handler || few_return(rp->handler, ret));
    ks->entry_stamp = rp->entry_handler && rp->data_size >= sizeof(uint64_t) &&
                      rp->entry_handler == g_entry_stamp.load(std::memory_order_relaxed);
    ks->return_inline = ks->return_few && rp->handler &&  // g_return_inline is null without a body
                        rp->handler == g_return_inline.load(std::memory_order_relaxed);
    ks->calls_only = tl_calls_only;
    *out = ks;
    return Status::Ok();
}

// Gives rp back as the caller registered it: no pre handler of liveprobe's, and the input
// flags it had (registration sets KPROBE_FLAG_NOVEC for kret_pre and clears
// KPROBE_FLAG_FPREGS, which ks carries). Before ks is released.
void detach(struct kretprobe *rp)
{
    const auto *ks = reinterpret_cast<const KretState *>(rp->kp.__lp_reserved[0]);
    const uint32_t declared = ks ? ks->declared_flags : rp->kp.flags & KPROBE_FLAG_FPREGS;
    rp->kp.pre_handler = nullptr;
    rp->kp.__lp_reserved[0] = 0;
    rp->kp.flags = (rp->kp.flags & ~(KPROBE_FLAG_NOVEC | KPROBE_FLAG_FPREGS)) | declared;
}

}  // namespace

Status register_kretprobes(struct kretprobe **rps, int num)
{
    if (!rps || num <= 0) return Fail(-EINVAL, "no kretprobes to register (rps={}, num={})", fmt::ptr(rps), num);
    for (int i = 0; i < num; ++i) {
        if (!rps[i]) return Fail(-EINVAL, "kretprobe {} of {} is NULL", i, num);
        {
            std::lock_guard lk(g_mu);
            if (g_krets.count(rps[i])) return Fail(-EINVAL, "kretprobe {} of {} is already registered", i, num);
        }
        if (Status s = check_entry(rps[i]); !s.ok()) {
            if (num > 1) s.reason = fmt::format("kretprobe {} of {}: {}", i, num, s.reason);
            return s;
        }
    }
    // The unwinders first: once a probe is armed, a call may throw through its replaced return
    // address at once (a program attached to while it throws), and an unwinder that does not
    // know the trampoline finds no frame there and terminates the program.
    hook_unwinders();
    std::vector<KretState *> states;
    std::vector<struct kprobe *> kps;
    for (int i = 0; i < num; ++i) {
        KretState *ks = nullptr;
        if (Status s = make_state(rps[i], &ks); !s.ok()) {
            for (size_t j = 0; j < states.size(); ++j) {
                detach(rps[j]);
                kret_unref(states[j]);
            }
            return s;
        }
        states.push_back(ks);
        struct kprobe &kp = rps[i]->kp;
        kp.pre_handler = kret_pre;
        kp.__lp_reserved[0] = reinterpret_cast<unsigned long>(ks);
        // kret_pre itself is free of vector instructions and saves the state around the
        // user's handlers that may touch it (KPROBE_FLAG_FPREGS is in ks now).
        kp.flags = (kp.flags | KPROBE_FLAG_NOVEC) & ~KPROBE_FLAG_FPREGS;
        rps[i]->nmissed = 0;
        kps.push_back(&kp);
    }
    if (Status s = register_probes(kps.data(), num); !s.ok()) {
        for (int i = 0; i < num; ++i) {
            detach(rps[i]);
            kret_unref(states[i]);
        }
        return s;
    }
    for (int i = 0; i < num; ++i)
        states[i]->fault_id = static_cast<const KprobeState *>(rps[i]->kp.__lp_state)->fault_id;
    {
        std::lock_guard lk(g_mu);
        for (int i = 0; i < num; ++i) g_krets[rps[i]] = states[i];
    }
    describe_trampoline_to_debuggers();
    return Status::Ok();
}

void register_kretprobes_each(struct kretprobe **rps, int num, Status *each)
{
    std::vector<KretState *> states(static_cast<size_t>(num), nullptr);
    std::vector<struct kprobe *> kps(static_cast<size_t>(num), nullptr);
    for (int i = 0; i < num; ++i) {
        each[i] = Status::Ok();
        if (!rps[i]) {
            each[i] = Fail(-EINVAL, "kretprobe {} of {} is NULL", i, num);
            continue;
        }
        {
            std::lock_guard lk(g_mu);
            if (g_krets.count(rps[i])) {
                each[i] = Fail(-EINVAL, "this kretprobe is already registered");
                continue;
            }
        }
        if (Status s = check_entry(rps[i]); !s.ok()) {
            each[i] = s;
            continue;
        }
        if (Status s = make_state(rps[i], &states[i]); !s.ok()) {
            each[i] = s;
            continue;
        }
        struct kprobe &kp = rps[i]->kp;
        kp.pre_handler = kret_pre;
        kp.__lp_reserved[0] = reinterpret_cast<unsigned long>(states[i]);
        kp.flags = (kp.flags | KPROBE_FLAG_NOVEC) & ~KPROBE_FLAG_FPREGS;
        rps[i]->nmissed = 0;
        kps[i] = &kp;
    }
    // The ones still in the running, in one batch (a null entry fails there and is skipped);
    // the unwinders hooked first (register_kretprobes).
    hook_unwinders();
    std::vector<Status> outcome(static_cast<size_t>(num));
    register_probes_each(kps.data(), num, outcome.data());
    bool any = false;
    for (int i = 0; i < num; ++i) {
        if (!kps[i]) continue;
        if (!outcome[i].ok()) {
            each[i] = outcome[i];
            detach(rps[i]);
            kret_unref(states[i]);
            continue;
        }
        states[i]->fault_id = static_cast<const KprobeState *>(rps[i]->kp.__lp_state)->fault_id;
        std::lock_guard lk(g_mu);
        g_krets[rps[i]] = states[i];
        any = true;
    }
    if (any) describe_trampoline_to_debuggers();
}

// Step 6 of unregister_kretprobe: the pages of the pool that hold only free instances go back to
// the system (madvise: they read as zeros if touched again; nothing takes an instance of a dead
// probe, and giving one back writes only that instance). What stays: the state's page and the
// pages of instances in flight or in threads' caches. The free list is walked from a snapshot
// of its top: instances are pushed on it meanwhile (give-backs), never popped, so the nodes
// below the snapshot do not change.
void trim_retired(KretState *ks)
{
    const uint32_t fresh = ks->fresh.load(std::memory_order_acquire);
    if (fresh == 0) return;
    std::vector<bool> reached(fresh, true);
    uint32_t idx1 = static_cast<uint32_t>(ks->free_top.load(std::memory_order_acquire));
    for (uint32_t n = 0; idx1 && idx1 <= fresh && n < fresh; ++n) {
        reached[idx1 - 1] = false;
        idx1 = ks->at(idx1 - 1)->next_free;
    }
    const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    const uintptr_t pool = reinterpret_cast<uintptr_t>(ks->pool);
    const uintptr_t end = reinterpret_cast<uintptr_t>(ks->at(fresh));
    for (uintptr_t p = (pool + page - 1) & ~(page - 1); p + page <= end; p += page) {
        const size_t first = (p - pool) / ks->stride, last = (p + page - 1 - pool) / ks->stride;
        bool keep = false;
        for (size_t i = first; i <= last && i < fresh && !keep; ++i) keep = reached[i];
        if (!keep) madvise(reinterpret_cast<void *>(p), page, MADV_DONTNEED);
    }
}

// Unregistering a kretprobe, in order (the lifecycle of its memory: docs/DESIGN-NOTES.md,
// "Lifecycles", "A return probe's memory"):
// 1. It leaves g_krets: no second unregistration, no enable/disable.
// 2. Its entry kprobe is unregistered: when that returns, no thread runs an entry of it (no
//    instance is taken any more, no entry handler runs) and none will.
// 3. live = false, then g_kret_unregistrations moves: every thread flushes its cache entry of
//    the probe at its next kretprobe activity (or its exit), giving back that entry's instances
//    and reference.
// 4. Wait until no thread's kret_busy slot names it: no return or unwind handler of it runs, and
//    none starts (they read live after publishing that slot). Calls in flight return home
//    without handlers.
// 5. rp goes back to the caller as it was registered: from here nothing reads rp, which a
//    module's removal may unmap.
// 6. The pool's pages that no thread can reach are released (trim_retired).
// 7. The registration's reference is dropped. The mapping goes with the last reference: every
//    call in flight returned (or was reaped) and every cache entry naming it was flushed. Until
//    then it counts in g_kret_retired (`status`).
bool unregister_kretprobe(struct kretprobe *rp)
{
    KretState *ks = nullptr;
    {
        std::lock_guard lk(g_mu);
        auto it = g_krets.find(rp);
        if (it == g_krets.end()) return false;
        ks = it->second;
        g_krets.erase(it);
    }
    unregister_probe(&rp->kp);
    ks->live.store(false, std::memory_order_seq_cst);
    g_kret_unregistrations.fetch_add(1, std::memory_order_acq_rel);
    wait_kret_quiescent(ks);
    detach(rp);
    trim_retired(ks);
    ks->retired = true;
    g_kret_retired.fetch_add(1, std::memory_order_relaxed);
    kret_unref(ks);
    return true;
}

int64_t retired_kretprobes() noexcept { return g_kret_retired.load(std::memory_order_relaxed); }

CallsOnlyRegistrations::CallsOnlyRegistrations() : prev_(tl_calls_only) { tl_calls_only = true; }
CallsOnlyRegistrations::~CallsOnlyRegistrations() { tl_calls_only = prev_; }

void set_kret_entry_stamp(kretprobe_handler_t fn) noexcept { g_entry_stamp.store(fn, std::memory_order_relaxed); }

const void *g_kret_inline_body = nullptr;

void set_kret_return_inline(kretprobe_handler_t fn, const void *body) noexcept
{
    g_kret_inline_body = body;  // no kretprobe registered since reads it yet (the tracer's order)
    g_return_inline.store(body ? fn : nullptr, std::memory_order_relaxed);
}

bool kretprobe_registered(const struct kretprobe *rp)
{
    std::lock_guard lk(g_mu);
    return g_krets.count(rp) != 0;
}

}  // namespace liveprobe::core

using namespace liveprobe;

extern "C" {

int register_kretprobe(struct kretprobe *rp)
{
    if (!rp) return record(Fail(-EINVAL, "the kretprobe pointer is NULL"));
    return record(core::register_kretprobes(&rp, 1));
}

int register_kretprobes(struct kretprobe **rps, int num) { return record(core::register_kretprobes(rps, num)); }

int liveprobe_register_kretprobes_each(struct kretprobe **rps, int num, int *results)
{
    if (!rps || !results || num <= 0)
        return record(Fail(-EINVAL, "no kretprobes to register (rps={}, results={}, num={})", fmt::ptr(rps),
                           fmt::ptr(results), num));
    std::vector<Status> each(static_cast<size_t>(num));
    core::register_kretprobes_each(rps, num, each.data());
    return core::tally_outcomes(each, results);
}

void unregister_kretprobe(struct kretprobe *rp)
{
    if (rp) core::unregister_kretprobe(rp);
}

void unregister_kretprobes(struct kretprobe **rps, int num)
{
    for (int i = 0; rps && i < num; ++i)
        if (rps[i]) core::unregister_kretprobe(rps[i]);
}

int disable_kretprobe(struct kretprobe *rp)
{
    if (!rp || !core::kretprobe_registered(rp)) return record(Fail(-EINVAL, "this struct kretprobe is not registered"));
    return record(core::set_enabled(&rp->kp, false));
}

int enable_kretprobe(struct kretprobe *rp)
{
    if (!rp || !core::kretprobe_registered(rp)) return record(Fail(-EINVAL, "this struct kretprobe is not registered"));
    return record(core::set_enabled(&rp->kp, true));
}

}  // extern "C"
