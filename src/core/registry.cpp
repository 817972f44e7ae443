#include "core/registry.hpp"
#include "core/immortal.hpp"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "arch/x86_64/breakpoint.hpp"
#include "arch/x86_64/jump_light.hpp"
#include "core/detour_cache.hpp"
#include "core/jprobe.hpp"
#include "core/kretprobe.hpp"
#include "arch/x86_64/region.hpp"
#include "core/optimizer.hpp"
#include "core/probe_address.hpp"
#include "core/probe_table.hpp"
#include "core/slot.hpp"
#include "core/thread_state.hpp"
#include "os/linux/code_alloc.hpp"
#include "os/linux/loader_events.hpp"
#include "os/linux/maps.hpp"
#include "os/linux/signals.hpp"
#include "os/linux/stop_threads.hpp"
#include "os/linux/text_poke.hpp"
#include "symbols/symbols.hpp"

namespace liveprobe::core {
namespace {

// Registry state, all guarded by g_mu.
std::mutex g_mu;
// Set while this thread holds g_mu: liveprobe's own dlopen/dlclose calls (symbol lookups
// under the mutex) reach the interposed dlclose, whose unload check must not relock.
thread_local bool tl_holds_registry;
thread_local bool tl_register_uncounted;

// set_light_variant's pairs: few (liveprobe's own handlers), read under the registry's lock.
std::vector<std::pair<kprobe_pre_handler_t, kprobe_pre_handler_t>> &light_variants()
{
    static Immortal<std::vector<std::pair<kprobe_pre_handler_t, kprobe_pre_handler_t>>> v;
    return v.value;
}

const void *light_fn_of(kprobe_pre_handler_t pre)
{
    if (pre == kret_pre) return reinterpret_cast<const void *>(arch::lp_kret_light_pre);
    for (auto &[p, light] : light_variants())
        if (p == pre) return reinterpret_cast<const void *>(light);
    return reinterpret_cast<const void *>(pre);
}

class RegistryLock {
public:
    RegistryLock() { lock(); }
    ~RegistryLock()
    {
        if (held_) unlock();
    }
    // While it holds the mutex, a thread runs no probe handler: liveprobe's own calls into
    // probed code (memcpy, say) run no handler and count nowhere, and a handler can never
    // re-enter the registry and deadlock on its mutex.
    void lock()
    {
        g_mu.lock();
        held_ = tl_holds_registry = true;
        // Where this thread's frames outside liveprobe begin, for freeing detours.
        note_caller_stack(reinterpret_cast<uint64_t>(__builtin_frame_address(0)) + 16);
        rec_ = this_thread();
        if (rec_) {
            if (rec_->quiet == 0) rec_->quiet_sp = 0;  // never reset: the mutex is held
            rec_->in_handler++;
            rec_->quiet++;
        }
    }
    void unlock()
    {
        if (rec_) {
            rec_->in_handler--;
            rec_->quiet--;
        }
        rec_ = nullptr;
        held_ = tl_holds_registry = false;
        g_mu.unlock();
    }

private:
    bool held_ = false;
    ThreadRecord *rec_ = nullptr;
};
Immortal<std::unordered_map<const struct kprobe *, KprobeState *>> g_probes_storage;
std::unordered_map<const struct kprobe *, KprobeState *> &g_probes = g_probes_storage.value;
Immortal<std::map<uint64_t, ProbePoint *>> g_points_storage;
std::map<uint64_t, ProbePoint *> &g_points = g_points_storage.value;  // ordered: the boundary check overlays a range
constinit Immortal<std::vector<uint32_t>> g_free_ids_storage;
std::vector<uint32_t> &g_free_ids = g_free_ids_storage.value;
uint32_t g_next_id = 0;
// Snapshots and points retired by a thread that was itself dispatching their probe point
// (a handler unregistering a sibling): freed by a later registry call once nobody uses them.
struct Retired {
    ProbePoint *pp;
    Members *members;
    KprobeState *ks;
    bool free_point;
};
constinit Immortal<std::vector<Retired>> g_retired_storage;
std::vector<Retired> &g_retired = g_retired_storage.value;

std::atomic<bool> g_optimize{[] {
    const char *e = secure_getenv("LIVEPROBE_OPTIMIZE");
    return !(e && std::strcmp(e, "0") == 0);
}()};

}  // namespace

void (*g_fork_prepare_hook)() noexcept = nullptr;
void (*g_fork_done_hook)(bool child) noexcept = nullptr;

namespace {

bool g_atfork = [] {
    // Lock order: the tracer's (g_fork_prepare_hook: its session locks, under which it
    // registers probes), registry, then symbols (lookups run under the registry mutex). Every
    // lock a child may take is free in it: taken here by the forking thread, so that no other
    // thread holds it across the fork (the tracer's watcher did, and a child's exit blocked for
    // ever on it), and so that what it guards is whole in the child.
    // On the program's thread that forks: the locking is liveprobe's, not the program's (a
    // program that interposes pthread_mutex_lock saw it traced), hence QuietThread.
    pthread_atfork(
        [] {
            QuietThread quiet;
            if (g_fork_prepare_hook) g_fork_prepare_hook();
            g_mu.lock();
            symbols::lock_for_fork();
        },
        [] {
            QuietThread quiet;
            symbols::unlock_after_fork();
            g_mu.unlock();
            if (g_fork_done_hook) g_fork_done_hook(false);
        },
        [] {
            QuietThread quiet;
            symbols::unlock_after_fork();
            g_mu.unlock();
            if (g_fork_done_hook) g_fork_done_hook(true);
            reset_after_fork();  // the other threads' state; this one's quiet level is kept
            os::stop_threads_forget_helper_after_fork();
        });
    return true;
}();

}  // namespace

bool entry_is_jumped_to(uint64_t entry)
{
    auto fn = symbols::function_at(entry);
    if (!fn || fn->start != entry || fn->end <= fn->start) return false;
    RegistryLock lk;  // the original bytes under liveprobe's own int3s and jumps
    std::vector<uint8_t> body = original_code(fn->start, fn->end, g_points);
    std::vector<std::vector<uint8_t>> cold_bodies;
    std::vector<arch::CodeRange> cold;
    cold_bodies.reserve(fn->cold.size());
    for (auto [start, end] : fn->cold) {
        cold_bodies.push_back(original_code(start, end, g_points));
        cold.push_back({start, cold_bodies.back().data(), cold_bodies.back().size()});
    }
    return arch::branches_to({fn->start, body.data(), body.size()}, cold, entry);
}

namespace {

// ---- Arming ----

// Writes the int3 of every point of `pps` not armed yet, then serializes every core once.
// Each point is in the table before its int3 exists: a thread that traps on it finds it.
// Points about to be optimized are prepared first (kOptPending): a trap there goes straight
// to the detour.
Status arm_points(const std::vector<ProbePoint *> &pps)
{
    const uint8_t int3 = 0xcc;
    Status result;
    bool wrote = false;
    for (ProbePoint *pp : pps) {
        if (pp->armed) continue;
        if (pp->opt.load() == kOptRetired) {
            // Armed again on the breakpoint path: its slot first, then traps may use it.
            if (Status s = write_slot(pp); !s.ok()) {
                result = s;
                break;
            }
            pp->opt.store(kOptNone);
        }
        if (pp->opt.load() == kOptNone && optimization_enabled()) {
            std::string why = prepare_point(pp, g_points);
            if (!why.empty()) pp->why_not = why;
        }
        // A prepared point gets its jmp from optimize_points(), in one write when the other
        // threads are stopped: no int3 first.
        if (pp->opt.load() == kOptPending) continue;
        if (Status s = write_slot(pp); !s.ok()) {
            result = s;
            break;
        }
        if (Status s = os::poke_text(pp->addr, &int3, 1); !s.ok()) {
            result = s;
            break;
        }
        pp->armed = true;
        wrote = true;
    }
    if (wrote) os::sync_cores();
    return result;
}

Status arm(ProbePoint *pp) { return arm_points({pp}); }

void disarm(ProbePoint *pp)
{
    if (!pp->armed) return;
    os::poke_text(pp->addr, &pp->orig_byte, 1);
    os::sync_cores();
    pp->armed = false;
}

// Publishes pp's new member list, then its fast-path kprobe (ProbePoint::solo). Between the
// two stores a hit may still run the one kprobe the point had: a kprobe being added is not
// registered yet, and one being removed was disabled first.
void set_members(ProbePoint *pp, Members *m)
{
    pp->members.store(m, std::memory_order_seq_cst);
    KprobeState *solo = nullptr;
    if (m->n == 1 && m->items[0]->kp->pre_handler && !m->items[0]->kp->post_handler) solo = m->items[0];
    pp->solo.store(solo, std::memory_order_seq_cst);
    refresh_light(pp);
}

Members *make_members(const Members *old, KprobeState *add, const KprobeState *drop)
{
    uint32_t n = old ? old->n : 0;
    auto *m = static_cast<Members *>(::operator new(sizeof(Members) + sizeof(KprobeState *) * (n + 1)));
    new (m) Members();
    for (uint32_t i = 0; i < n; ++i)
        if (old->items[i] != drop) m->items[m->n++] = old->items[i];
    if (add) m->items[m->n++] = add;
    // A jprobe's entry runs after every other pre handler at its address (API.md).
    std::stable_partition(m->items, m->items + m->n,
                          [](const KprobeState *ks) { return ks->kp->pre_handler != jprobe_pre; });
    for (uint32_t i = 0; i < m->n; ++i)
        if (m->items[i]->kp->post_handler) m->any_post = true;
    return m;
}

void free_members(Members *m)
{
    if (!m) return;
    m->~Members();
    ::operator delete(m);
}

bool any_enabled(const Members *m)
{
    for (uint32_t i = 0; m && i < m->n; ++i)
        if (m->items[i]->enabled.load()) return true;
    return false;
}

uint32_t alloc_ids()
{
    if (!g_free_ids.empty()) {
        uint32_t id = g_free_ids.back();
        g_free_ids.pop_back();
        return id;
    }
    if (g_next_id + 2 > kMaxCounters) return UINT32_MAX;
    uint32_t id = g_next_id;
    g_next_id += 2;
    return id;
}

bool is_busy_anywhere(const ProbePoint *pp)
{
    for (ThreadRecord *r = all_threads(); r; r = r->next)
        if (r->busy.holds(const_cast<ProbePoint *>(pp))) return true;
    return false;
}

void drain_retired()
{
    for (size_t i = 0; i < g_retired.size();) {
        if (is_busy_anywhere(g_retired[i].pp)) {
            ++i;
            continue;
        }
        free_members(g_retired[i].members);
        delete g_retired[i].ks;
        if (g_retired[i].free_point) delete g_retired[i].pp;
        g_retired[i] = g_retired.back();
        g_retired.pop_back();
    }
}

// Frees what the hit path may still be reading once no other thread dispatches pp. Called
// without the registry mutex (a handler of pp may be waiting for it).
void retire(ProbePoint *pp, Members *old, KprobeState *ks, bool free_point)
{
    wait_quiescent(pp);
    ThreadRecord *self = this_thread_if_any();
    if (self && self->busy.holds(pp)) {
        RegistryLock lk;
        g_retired.push_back({pp, old, ks, free_point});
        return;
    }
    free_members(old);
    delete ks;
    if (free_point) delete pp;
}

// After dlclose: points whose address no longer holds the same object are gone. Their bytes
// are not restored (the memory may belong to another object now); they leave the table and
// their kprobes get KPROBE_FLAG_GONE, staying registered until unregistered.
void objects_unloaded_locked();

void objects_unloaded()
{
    if (tl_holds_registry) return;  // our own lookup's dlclose: it unloads nothing
    RegistryLock lk;
    objects_unloaded_locked();
}

void objects_unloaded_locked()
{
    forget_vector_proofs();
    if (g_points.empty()) return;
    auto maps = os::read_maps();
    std::vector<ProbePoint *> gone;
    for (auto it = g_points.begin(); it != g_points.end();) {
        ProbePoint *pp = it->second;
        bool same = false;
        for (auto &m : maps)
            if (pp->addr >= m.start && pp->addr < m.end) {
                same = m.x && m.path == pp->object;
                break;
            }
        // The same file at the same place may be a new copy of it (unloaded and loaded again
        // while nobody told us): an armed point whose patch is not there any more is gone too.
        if (same && pp->armed) {
            uint8_t first = *reinterpret_cast<const volatile uint8_t *>(pp->addr);
            same = first == (pp->opt.load() == kOptDone ? 0xE9 : 0xCC);
        }
        if (same) {
            ++it;
            continue;
        }
        pp->gone = true;
        pp->armed = false;
        pp->opt.store(kOptNone);
        probe_table().remove(pp->addr);
        Members *m = pp->members.load();
        for (uint32_t i = 0; m && i < m->n; ++i) {
            m->items[i]->enabled.store(false);
            m->items[i]->kp->flags |= KPROBE_FLAG_GONE;
        }
        it = g_points.erase(it);
    }
}

// Objects can leave without the interposed dlclose seeing it: libc's own unloads (NSS, iconv)
// call its internal dlclose, and a library loaded by dlopen (the agent, attached) binds its
// dlclose calls to libc's. Before changing anything, the registry checks the loader's unload
// counter (dl_iterate_phdr's dlpi_subs) and, if it moved, marks what left as gone: never restore
// bytes into memory that now belongs to another object. Called with the registry's lock held
// (so no other thread changes anything on the strength of the old state meanwhile).
void catch_up_with_unloads()
{
    static std::atomic<unsigned long long> seen{0};
    unsigned long long subs = 0;
    dl_iterate_phdr(
        [](struct dl_phdr_info *info, size_t size, void *arg) -> int {
            if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs)
                *static_cast<unsigned long long *>(arg) = info->dlpi_subs;
            return 1;
        },
        &subs);
    if (seen.exchange(subs) != subs) objects_unloaded_locked();
}

Status setup_once()
{
    static bool hooked = (os::set_unload_callback(objects_unloaded), true);
    (void)hooked;
    if (Status s = os::text_write_check(); !s.ok()) return s;
    return os::install_signal_handlers(breakpoint_trap_handler, breakpoint_fault_handler);
}


// Marks the kprobes of pp with its optimization state.
void publish_opt_flags(ProbePoint *pp)
{
    bool opt = pp->opt.load() == kOptDone;
    Members *m = pp->members.load();
    for (uint32_t i = 0; m && i < m->n; ++i) {
        struct kprobe *kp = m->items[i]->kp;
        __atomic_store_n(&kp->flags, opt ? (kp->flags | KPROBE_FLAG_OPTIMIZED) : (kp->flags & ~KPROBE_FLAG_OPTIMIZED),
                         __ATOMIC_RELAXED);
    }
}

// Takes pp off the jump path (if it is on it) and disarms it.
void take_out(ProbePoint *pp)
{
    if (pp->opt.load() != kOptNone) {
        unoptimize_point(pp, false);
        pp->why_not = "the probe is disabled";
    } else {
        disarm(pp);
    }
    publish_opt_flags(pp);
}

// Optimizes what it can of `batch` and publishes the flags.
void optimize_batch(const std::vector<ProbePoint *> &batch)
{
    for (ProbePoint *pp : batch) refresh_vector_need(pp);
    optimize_points(batch, g_points);
    for (ProbePoint *pp : batch) publish_opt_flags(pp);
}

// The point whose jmp covers addr, past its first byte (optimized, or being optimized, by an
// earlier registration), else null. Registry mutex held.
ProbePoint *covering_jump(uint64_t addr)
{
    auto it = g_points.lower_bound(addr);
    if (it == g_points.begin()) return nullptr;
    ProbePoint *pp = std::prev(it)->second;
    const int opt = pp->opt.load();
    if (opt != kOptPending && opt != kOptDone) return nullptr;
    return addr > pp->addr && addr < pp->addr + pp->region.len ? pp : nullptr;
}

// Registers p with the registry mutex held; *out_pp gets its point, *old_members the
// snapshot to retire once the mutex is released.
Status register_locked(struct kprobe *p, bool internal, const os::MapsSnapshot &maps, ProbePoint **out_pp,
                       Members **old_members)
{
    if (g_probes.count(p)) return Fail(-EINVAL, "this struct kprobe is already registered");
    uint64_t addr = 0;
    std::string object;
    if (Status s = resolve_address(p, &addr); !s.ok()) return s;
    if (Status s = check_region(addr, maps, &object); !s.ok()) return s;

    ProbePoint *pp = nullptr;
    bool fresh = false;
    if (auto it = g_points.find(addr); it != g_points.end()) {
        pp = it->second;
    } else {
        auto np = std::make_unique<ProbePoint>();
        np->addr = addr;
        np->object = object;
        if (Status s = check_instruction(addr, maps, g_points, np->insn); !s.ok()) return s;
        // Inside the bytes another point's jmp replaced (a probe placed before, by another
        // session or module): that one goes back to the breakpoint path first, its original
        // bytes back, so that this one's int3 lands on the instruction and not in the middle
        // of the jmp (which crashed the program), as the kernel unoptimizes such a probe.
        if (ProbePoint *cover = covering_jump(addr)) {
            unoptimize_point(cover, true);
            cover->why_not = fmt::format("another probe at +{} lies inside the {} bytes a jmp would replace",
                                         addr - cover->addr, cover->region.len);
            publish_opt_flags(cover);
        }
        os::peek_text(addr, &np->orig_byte, 1);
        if (Status s = prepare_slot(np.get()); !s.ok()) return s;
        pp = np.release();
        fresh = true;
    }
    uint32_t id = alloc_ids();
    if (id == UINT32_MAX) {
        if (fresh) delete pp;
        return Fail(-ENOMEM, "too many probes (at most {})", kMaxCounters / 2);
    }
    auto *ks = new KprobeState();
    ks->kp = p;
    ks->pp = pp;
    ks->id = id;
    ks->fault_id = id + 1;
    ks->hits_base = sum_counter(id);
    ks->faults_base = sum_counter(id + 1);
    ks->enabled.store(!(p->flags & KPROBE_FLAG_DISABLED));
    ks->internal = internal;
    ks->uncounted = tl_register_uncounted && !internal;
    ks->light_fn = light_fn_of(p->pre_handler);
    // Copied: the caller's string need not outlive the registration (lsmod shows it later).
    if (p->symbol_name) ks->symbol = p->symbol_name;

    p->addr = reinterpret_cast<kprobe_opcode_t *>(addr);
    p->flags &= KPROBE_FLAG_DISABLED | KPROBE_FLAG_NOVEC | KPROBE_FLAG_FPREGS;  // the input flags
    p->nmissed = 0;
    p->__lp_state = ks;

    Members *old = pp->members.load();
    set_members(pp, make_members(old, ks, nullptr));
    if (fresh) {
        g_points.emplace(addr, pp);
        probe_table().insert(addr, pp);
    }
    g_probes.emplace(p, ks);
    *out_pp = pp;
    *old_members = old;
    return Status::Ok();
}

}  // namespace

Status prepare_guarded_calls() { return setup_once(); }

Status register_batch(struct kprobe **kps, int num, bool internal, Status *each);

Status register_probes(struct kprobe **kps, int num, bool internal) { return register_batch(kps, num, internal, nullptr); }

void register_probes_each(struct kprobe **kps, int num, Status *each)
{
    Status s = register_batch(kps, num, false, each);
    if (!s.ok())  // the batch as a whole failed (setup, arming): every probe with it
        for (int i = 0; i < num; ++i)
            if (each[i].ok() && kps[i]) {
                unregister_probe(kps[i]);
                each[i] = s;
            }
}

int tally_outcomes(const std::vector<Status> &each, int *results)
{
    int ok = 0;
    const Status *last = nullptr;
    for (size_t i = 0; i < each.size(); ++i) {
        results[i] = each[i].ok() ? 0 : each[i].err;
        if (each[i].ok()) ++ok;
        else last = &each[i];
    }
    if (last) record(*last);
    return ok;
}

Status register_batch(struct kprobe **kps, int num, bool internal, Status *each)
{
    for (int i = 0; i < num; ++i)
        if (!kps[i] && !each) return Fail(-EINVAL, "kprobe {} of {} is NULL", i, num);
    if (Status s = setup_once(); !s.ok()) return s;
    RegistryLock lk;
    catch_up_with_unloads();
    drain_retired();
    os::MapsSnapshot maps;
    std::vector<ProbePoint *> batch;
    std::unordered_set<ProbePoint *> in_batch;
    std::vector<std::pair<ProbePoint *, Members *>> to_retire;
    for (int i = 0; i < num; ++i) {
        ProbePoint *pp = nullptr;
        Members *old = nullptr;
        Status s = kps[i] ? register_locked(kps[i], internal, maps, &pp, &old)
                          : Fail(-EINVAL, "kprobe {} of {} is NULL", i, num);
        if (each) {  // best effort: this one fails, the others go on
            each[i] = s;
            if (!s.ok()) continue;
        }
        if (!s.ok()) {
            lk.unlock();
            for (auto &[rpp, rold] : to_retire) retire(rpp, rold, nullptr, false);
            for (int j = i - 1; j >= 0; --j) unregister_probe(kps[j]);
            if (num > 1) s.reason = fmt::format("kprobe {} of {}: {}", i, num, s.reason);
            return s;
        }
        if (old) to_retire.emplace_back(pp, old);
        if (any_enabled(pp->members.load()) && in_batch.insert(pp).second) batch.push_back(pp);
    }
    // One int3 pass, one serialization, one stop of the other threads for the whole batch.
    if (Status s = arm_points(batch); !s.ok()) {
        lk.unlock();
        for (auto &[rpp, rold] : to_retire) retire(rpp, rold, nullptr, false);
        for (int j = num - 1; j >= 0; --j)
            if (!each || each[j].ok()) unregister_probe(kps[j]);
        if (each)
            for (int j = 0; j < num; ++j)
                if (each[j].ok()) each[j] = s;
        return s;
    }
    optimize_batch(batch);
    lk.unlock();
    for (auto &[rpp, rold] : to_retire) retire(rpp, rold, nullptr, false);
    return Status::Ok();
}

Status register_probe(struct kprobe *p)
{
    if (!p) return Fail(-EINVAL, "the kprobe pointer is NULL");
    return register_probes(&p, 1);
}

// The point just before addr, kept off the jump path only by the probe at addr, which went:
// on the jump path again, if it can. Registry mutex held.
void reoptimize_neighbour(uint64_t addr)
{
    auto it = g_points.lower_bound(addr);
    if (it == g_points.begin()) return;
    ProbePoint *prev = std::prev(it)->second;
    if (!prev->armed || prev->gone || prev->opt.load() != kOptNone || addr - prev->addr > arch::kMaxInsnLen * 2 ||
        prev->why_not.rfind("another probe at +", 0) != 0)
        return;
    optimize_batch({prev});
}

bool unregister_probe(struct kprobe *p)
{
    RegistryLock lk;
    catch_up_with_unloads();
    auto it = g_probes.find(p);
    if (it == g_probes.end()) return false;
    KprobeState *ks = it->second;
    ProbePoint *pp = ks->pp;
    g_probes.erase(it);
    ks->enabled.store(false);
    Members *old = pp->members.load();
    Members *now = make_members(old, nullptr, ks);
    bool last = now->n == 0;
    if (last) {
        // 1. Restore the original bytes: no new hit at this address after sync_cores().
        take_out(pp);
        // 2. Unpublish: a thread that trapped before step 1 finds no point and resumes at
        //    the address, which holds the original instruction again. (A gone point left
        //    the table when its object was unloaded; a new point may hold its address.)
        if (!pp->gone) {
            probe_table().remove(pp->addr);
            g_points.erase(pp->addr);
            reoptimize_neighbour(pp->addr);
        }
        // 3. Its detour waits until no thread can be inside it (core/detour_cache.hpp), unless
        //    a new point at the address (this one being gone) uses it already.
        if (pp->detour) {
            auto other = g_points.find(pp->addr);
            if (other == g_points.end() || other->second->detour != pp->detour) retire_detour(pp->detour, pp);
        }
        free_members(now);
    } else {
        set_members(pp, now);
        if (!any_enabled(now))
            take_out(pp);
        else
            refresh_vector_need(pp);
    }
    p->flags &= ~KPROBE_FLAG_OPTIMIZED;
    g_free_ids.push_back(ks->id);
    p->__lp_state = nullptr;
    lk.unlock();
    // 4. Wait until no other thread runs handlers at this point, then free what it read.
    retire(pp, old, ks, last);
    return true;
}

Status set_enabled(struct kprobe *p, bool enabled)
{
    RegistryLock lk;
    catch_up_with_unloads();
    auto it = g_probes.find(p);
    if (it == g_probes.end()) return Fail(-EINVAL, "this struct kprobe is not registered");
    KprobeState *ks = it->second;
    ProbePoint *pp = ks->pp;
    if (pp->gone)
        return Fail(-EINVAL, "the object that held this probe's address ({}) was unloaded",
                    pp->object.empty() ? "anonymous code" : pp->object);
    ks->enabled.store(enabled);
    if (enabled) {
        p->flags &= ~KPROBE_FLAG_DISABLED;
        if (Status s = arm(pp); !s.ok()) {
            ks->enabled.store(false);
            p->flags |= KPROBE_FLAG_DISABLED;
            return s;
        }
        optimize_batch({pp});
    } else {
        p->flags |= KPROBE_FLAG_DISABLED;
        if (!any_enabled(pp->members.load()))
            take_out(pp);
        else
            refresh_vector_need(pp);
        p->flags &= ~KPROBE_FLAG_OPTIMIZED;
    }
    return Status::Ok();
}

std::vector<ProbeSummary> list_probes()
{
    std::vector<ProbeSummary> all;
    {
        RegistryLock lk;
        for (auto &[kp, ks] : g_probes) {
            if (ks->internal) continue;
            ProbeSummary s;
            s.addr = ks->pp->addr;
            s.kp = kp;
            s.kind = kp->pre_handler == kret_pre ? 'r' : kp->pre_handler == jprobe_pre ? 'j' : 'k';
            s.flags = __atomic_load_n(&kp->flags, __ATOMIC_RELAXED);
            if (s.kind == 'r')
                s.kret_nmissed = static_cast<unsigned>(__atomic_load_n(
                    &reinterpret_cast<const struct kretprobe *>(reinterpret_cast<const char *>(kp) -
                                                               offsetof(struct kretprobe, kp))->nmissed,
                    __ATOMIC_RELAXED));
            s.symbol = ks->symbol;
            s.offset = kp->offset;
            // The code its handlers are: a module's probes are the ones whose struct or handlers
            // lie in it.
            s.code[0] = reinterpret_cast<uint64_t>(kp->post_handler);
            s.code[1] = reinterpret_cast<uint64_t>(kp->fault_handler);
            if (s.kind == 'r') {
                const auto *rp = reinterpret_cast<const struct kretprobe *>(reinterpret_cast<const char *>(kp) -
                                                                           offsetof(struct kretprobe, kp));
                s.code[2] = reinterpret_cast<uint64_t>(rp->handler);
                s.code[3] = reinterpret_cast<uint64_t>(rp->entry_handler);
                s.code[4] = reinterpret_cast<uint64_t>(rp->unwind_handler);
            } else if (s.kind == 'j') {
                s.code[2] = reinterpret_cast<uint64_t>(
                    reinterpret_cast<const struct jprobe *>(reinterpret_cast<const char *>(kp) -
                                                            offsetof(struct jprobe, kp))->entry);
            } else {
                s.code[2] = reinterpret_cast<uint64_t>(kp->pre_handler);
            }
            all.push_back(std::move(s));
        }
    }
    // The caller may free an unregistered struct at once: kp is only a key from here on, and
    // probe_counters reads it under the registry's lock, once it is found registered.
    std::vector<ProbeSummary> out;
    for (ProbeSummary &s : all)
        if (probe_counters(s.kp, &s.counters)) out.push_back(s);
    std::sort(out.begin(), out.end(), [](const ProbeSummary &a, const ProbeSummary &b) { return a.addr < b.addr; });
    return out;
}

void set_light_variant(kprobe_pre_handler_t pre, kprobe_pre_handler_t light)
{
    RegistryLock lk;
    for (auto &v : light_variants())
        if (v.first == pre) {
            v.second = light;
            return;
        }
    light_variants().emplace_back(pre, light);
}

UncountedRegistrations::UncountedRegistrations() : prev_(tl_register_uncounted) { tl_register_uncounted = true; }
UncountedRegistrations::~UncountedRegistrations() { tl_register_uncounted = prev_; }

bool probe_counters(const struct kprobe *p, ProbeCounters *out)
{
    RegistryLock lk;
    auto it = g_probes.find(p);
    if (it == g_probes.end()) return false;
    KprobeState *ks = it->second;
    out->counted = !ks->uncounted;
    out->hits = ks->uncounted ? 0 : sum_counter(ks->id) - ks->hits_base;
    out->faults = sum_counter(ks->fault_id) - ks->faults_base;
    out->nmissed = __atomic_load_n(&p->nmissed, __ATOMIC_RELAXED);
    out->optimized = ks->pp->opt.load() == kOptDone;
    out->light = out->optimized && ks->pp->light.load() == ks;
    out->why_not = nullptr;
    if (!out->optimized) {
        // Reasons are interned: the pointer stays valid for the life of the process.
        static std::set<std::string> &reasons = *new std::set<std::string>;
        std::string why = ks->pp->why_not;
        if (!ks->enabled.load()) why = "the probe is disabled";
        if (why.empty()) why = "not optimized";
        out->why_not = reasons.insert(why).first->c_str();
    }
    return true;
}

void set_optimization(bool enabled)
{
    RegistryLock lk;
    g_optimize.store(enabled);
    std::vector<ProbePoint *> all;
    for (auto &[addr, pp] : g_points) {
        if (enabled) {
            if (pp->armed) all.push_back(pp);
        } else if (pp->opt.load() != kOptNone) {
            unoptimize_point(pp, true);
            pp->why_not = optimization_off_reason();
            publish_opt_flags(pp);
        } else {
            pp->why_not = optimization_off_reason();
        }
    }
    if (enabled) optimize_batch(all);
}
bool optimization_enabled() { return g_optimize.load(); }

}  // namespace liveprobe::core
