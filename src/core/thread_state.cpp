#include "core/thread_state.hpp"
#include "core/dispatch.hpp"

#include <pthread.h>
#include <sys/syscall.h>
#include <sys/mman.h>

#include <cerrno>

#include "os/linux/raw_syscall.hpp"
#include "os/linux/text_poke.hpp"

namespace liveprobe::core {

constinit thread_local ThreadRecord *tl_rec = nullptr;
void (*g_thread_gone_hook)(ThreadRecord *) noexcept = nullptr;
void (*g_thread_forked_hook)(ThreadRecord *, int) noexcept = nullptr;

namespace {

constexpr size_t kChunkRecords = 64;
constexpr size_t kCountersAt = 0x800;

std::atomic<ThreadRecord *> g_head{nullptr};
pthread_key_t g_exit_key;
// A record made ready for another thread: nothing of its last thread's dispatch, handlers or
// calls is left (its calls in flight are given back by g_thread_gone_hook first).
void reset_record(ThreadRecord *rec) noexcept
{
    rec->busy.clear();
    rec->kret_busy.clear();
    rec->in_handler = 0;
    rec->quiet = 0;
    rec->quiet_sp = 0;
    rec->level_sp = 0;
    rec->handler_sp = 0;
    rec->guard = nullptr;
    rec->jump_regs = nullptr;
    rec->jump_light = nullptr;
    rec->kret_guard.regs = nullptr;
    rec->kret_light = nullptr;
}

// At the thread's exit, in it: its calls in flight given back, its state reset. The record
// stays its own (exiting): libc's teardown runs after this, and its hits are the thread's
// (with owner 0 they were filed under tid 0, and a new thread could claim the record while
// the old one still used it).
bool g_key_ok = [] { return pthread_key_create(&g_exit_key, [](void *p) {
                         auto *rec = static_cast<ThreadRecord *>(p);
                         ++rec->in_handler;  // the hook's calls are liveprobe's (QuietThread's state)
                         rec->quiet_sp = 0;
                         ++rec->quiet;
                         if (g_thread_gone_hook) g_thread_gone_hook(rec);
                         reset_record(rec);
                         rec->exiting.store(true, std::memory_order_release);
                     }) == 0; }();

// Whether thread tid of this process no longer exists (it ran no code since).
bool thread_gone(int tid) noexcept
{
    return tid > 0 && os::raw_syscall(SYS_tgkill, os::raw_syscall(SYS_getpid), tid, 0) == -ESRCH;
}

ThreadRecord *new_chunk() noexcept
{
    void *mem = os::raw_mmap(nullptr, sizeof(ThreadRecord) * kChunkRecords,
                             PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS);
    if (!mem) return nullptr;
    auto *recs = static_cast<ThreadRecord *>(mem);
    for (size_t i = 0; i < kChunkRecords; ++i) new (&recs[i]) ThreadRecord();
    for (size_t i = 0; i + 1 < kChunkRecords; ++i) recs[i].next = &recs[i + 1];
    // Publish the chunk at the head of the list.
    ThreadRecord *head = g_head.load(std::memory_order_acquire);
    do {
        recs[kChunkRecords - 1].next = head;
    } while (!g_head.compare_exchange_weak(head, &recs[0], std::memory_order_acq_rel));
    return recs;
}

// A free record, or one whose exiting thread is gone (reset again: its teardown ran probes), or
// one of a new chunk.
ThreadRecord *claim(int tid) noexcept
{
    for (int attempt = 0; attempt < 2; ++attempt) {
        for (ThreadRecord *r = g_head.load(std::memory_order_acquire); r; r = r->next) {
            int expected = 0;
            if (r->owner.load(std::memory_order_relaxed) == 0 &&
                r->owner.compare_exchange_strong(expected, tid, std::memory_order_acq_rel))
                return r;
        }
        for (ThreadRecord *r = g_head.load(std::memory_order_acquire); r; r = r->next) {
            int old = r->owner.load(std::memory_order_acquire);
            if (!r->exiting.load(std::memory_order_acquire) || !thread_gone(old) ||
                !r->owner.compare_exchange_strong(old, tid, std::memory_order_acq_rel))
                continue;
            r->exiting.store(false, std::memory_order_relaxed);
            reset_record(r);
            return r;
        }
        if (!new_chunk()) return nullptr;
    }
    return nullptr;
}

}  // namespace

ThreadRecord *this_thread_if_any() noexcept { return tl_rec; }

ThreadRecord *this_thread_claim() noexcept
{
    if (tl_rec) return tl_rec;
    ThreadRecord *r = claim(os::raw_gettid());
    if (!r) return nullptr;
    // Calls left by a previous owner that died without its exit handlers (SYS_exit).
    if (r->ret_top && g_thread_gone_hook) {
        tl_rec = r;
        g_thread_gone_hook(r);
        tl_rec = nullptr;
    }
    if (!r->counters.load(std::memory_order_relaxed)) {
        void *c = os::raw_mmap(nullptr, sizeof(uint64_t) * kMaxCounters + kCountersAt, PROT_READ | PROT_WRITE,
                               MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE);
        if (!c) {  // no record without counters (the light dispatcher relies on them)
            r->owner.store(0, std::memory_order_release);
            return nullptr;
        }
        r->counters.store(reinterpret_cast<std::atomic<uint64_t> *>(static_cast<char *>(c) + kCountersAt),
                          std::memory_order_release);
    }
    tl_rec = r;
    // Release the record at thread exit. pthread_setspecific on a key of the first block
    // writes into the thread descriptor, without allocating. A probe hit inside it counts a
    // miss (in_handler), so it cannot recurse.
    enter_handler(r, __builtin_frame_address(0));  // a jump out of a signal landing here: abandoned
    if (g_key_ok) pthread_setspecific(g_exit_key, r);
    leave_handler(r);
    return r;
}

ThreadRecord *all_threads() noexcept { return g_head.load(std::memory_order_acquire); }

const void *thread_list_head() noexcept { return &g_head; }

namespace {

// The writer's half of the busy protocols: every thread's store to `field` before this point is
// made visible (membarrier), then each other thread is waited for until its field is not p.
template <typename T>
void wait_until_none_is(BusySlots<T> ThreadRecord::*field, T p)
{
    os::barrier_all_threads();
    ThreadRecord *self = tl_rec;
    for (ThreadRecord *r = all_threads(); r; r = r->next) {
        if (r == self) continue;
        for (int spins = 0; (r->*field).holds(p); ++spins) {
            if (spins < 64)
                __builtin_ia32_pause();
            else
                os::raw_sched_yield();
            // Long: maybe a handler r left by a longjmp, and no hit of r's since to notice it.
            if (spins % 16384 == 16383) nudge_thread(r);
        }
    }
}

}  // namespace

void wait_quiescent(const ProbePoint *pp)
{
    // Pairs with dispatch.hpp's mark_busy().
    wait_until_none_is(&ThreadRecord::busy, const_cast<ProbePoint *>(pp));
}

void wait_kret_quiescent(const void *p) { wait_until_none_is(&ThreadRecord::kret_busy, p); }

uint64_t sum_counter(uint32_t id)
{
    uint64_t sum = 0;
    for (ThreadRecord *r = all_threads(); r; r = r->next)
        if (std::atomic<uint64_t> *cs = r->counters.load(std::memory_order_acquire))
            sum += cs[id].load(std::memory_order_relaxed);
    return sum;
}

void reset_after_fork()
{
    // Once in each child, by the first atfork handler that asks: the agent's starts its threads
    // in the child (agent.cpp after_fork_in_child), and a reset after theirs (the registry's
    // handler, registered later) freed the records they had claimed: their calls, no longer
    // quiet, were traced as the program's, under tid 0.
    static pid_t reset_for = 0;  // the child's one thread only
    const pid_t pid = static_cast<pid_t>(os::raw_getpid());
    if (reset_for == pid) return;
    reset_for = pid;
    ThreadRecord *self = tl_rec;
    int tid = os::raw_gettid();
    for (ThreadRecord *r = all_threads(); r; r = r->next) {
        if (r == self) {
            r->owner.store(tid);
            if (g_thread_forked_hook) g_thread_forked_hook(r, tid);
            continue;
        }
        reset_record(r);
        r->ret_top = nullptr;  // those threads and their frames do not exist in the child
        for (auto &c : r->kret_cache) c = {};
        r->exiting.store(false);
        r->owner.store(0);
    }
}

}  // namespace liveprobe::core
