#include "trace/session.hpp"

#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <liveprobe/kprobes.h>
#include <liveprobe/ktime.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <memory>
#include <new>
#include <mutex>
#include <set>

#include <fmt/format.h>

#include "agent/channel.hpp"
#include "os/linux/raw_syscall.hpp"
#include "symbols/symbols.hpp"
#include "trace/rings.hpp"

namespace liveprobe::trace {
namespace {

struct Probe {
    struct kretprobe rp {};  // events, hist (rp.kp is the entry kprobe)
    struct kprobe kp {};     // count
    uint32_t index = 0;
};

struct EntryData {  // a kretprobe instance's data
    uint64_t entry_ns;
    uint64_t args[4];
};

// The session. Handlers read g_base, g_probes and g_generation; they change only while no probe
// is registered.
std::mutex g_mu;
bool g_running = false;
Mode g_mode = Mode::events;
std::vector<std::unique_ptr<Probe>> *g_list = nullptr;
void *g_base = nullptr;
size_t g_bytes = 0;
int g_fd = -1;
uint32_t g_probes = 0;
std::atomic<uint64_t> g_generation{0};
Started g_started;

thread_local int32_t t_ring = -1;
thread_local uint64_t t_generation = 0;
// After fork, the child's threads take rings of their own (the mapping is shared, so a child is
// traced with its parent: its events come with its own thread ids); without following
// (LIVEPROBE_TRACE_NOFOLLOW, `--no-follow`), a child's handlers write nothing.
bool g_follow = true;
std::atomic<bool> g_silent{false};

[[gnu::constructor]] void trace_atfork()
{
    pthread_atfork(nullptr, nullptr, [] {
        g_generation.fetch_add(1, std::memory_order_release);
        if (!g_follow) g_silent.store(true, std::memory_order_relaxed);
    });
}

// The calling thread's ring, claimed on its first event: -1 when every ring is taken (rings of
// threads that have exited, drained, are taken back).
int32_t my_ring() noexcept
{
    uint64_t gen = g_generation.load(std::memory_order_acquire);
    if (t_generation == gen && t_ring >= 0) return t_ring;
    t_generation = gen;
    t_ring = -1;
    int32_t tid = os::raw_gettid();
    int32_t pid = os::raw_getpid();
    for (uint32_t pass = 0; pass < 2 && t_ring < 0; ++pass) {
        for (uint32_t i = 0; i < kRings; ++i) {
            RingHead *h = ring_head(g_base, i);
            int32_t owner = h->tid.load(std::memory_order_relaxed);
            if (pass == 1 && owner != 0 && owner != tid && h->head.load() == h->tail.load() &&
                os::raw_syscall(SYS_tgkill, pid, owner, 0) == -ESRCH) {
                // Its thread is gone and the reader has everything: take it.
                if (h->tid.compare_exchange_strong(owner, tid)) {
                    t_ring = static_cast<int32_t>(i);
                    break;
                }
                continue;
            }
            int32_t free = 0;
            if (owner == 0 && h->tid.compare_exchange_strong(free, tid)) {
                t_ring = static_cast<int32_t>(i);
                break;
            }
        }
    }
    return t_ring;
}

uint32_t index_of(const struct kretprobe *rp) noexcept
{
    return reinterpret_cast<const Probe *>(reinterpret_cast<const char *>(rp) - offsetof(Probe, rp))->index;
}

int count_pre(struct kprobe *kp, struct pt_regs *) noexcept
{
    if (g_silent.load(std::memory_order_relaxed)) return 0;
    int32_t ring = my_ring();
    if (ring < 0) {
        header_of(g_base)->unringed.fetch_add(1, std::memory_order_relaxed);
        return 0;
    }
    uint32_t idx = reinterpret_cast<const Probe *>(reinterpret_cast<const char *>(kp) - offsetof(Probe, kp))->index;
    std::atomic<uint64_t> *c = count_of(g_base, g_probes, static_cast<uint32_t>(ring), idx);
    c->store(c->load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);  // this thread's row only
    return 0;
}

int entry_stamp(struct kretprobe_instance *ri, struct pt_regs *regs) noexcept
{
    auto *d = reinterpret_cast<EntryData *>(ri->data);
    d->args[0] = regs->di;
    d->args[1] = regs->si;
    d->args[2] = regs->dx;
    d->args[3] = regs->cx;
    d->entry_ns = liveprobe_ktime_ns();  // last: the arguments' copy is not timed
    return 0;
}

int event_return(struct kretprobe_instance *ri, struct pt_regs *regs) noexcept
{
    if (g_silent.load(std::memory_order_relaxed)) return 0;
    uint64_t now = liveprobe_ktime_ns();
    const auto *d = reinterpret_cast<const EntryData *>(ri->data);
    uint32_t idx = index_of(ri->rp);
    int32_t ring = my_ring();
    if (ring < 0) {
        header_of(g_base)->unringed.fetch_add(1, std::memory_order_relaxed);
        return 0;
    }
    RingHead *h = ring_head(g_base, static_cast<uint32_t>(ring));
    std::atomic<uint64_t> *c = count_of(g_base, g_probes, static_cast<uint32_t>(ring), idx);
    c->store(c->load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    uint64_t head = h->head.load(std::memory_order_relaxed);
    if (head - h->tail.load(std::memory_order_acquire) >= kRingRecords) {
        h->dropped.fetch_add(1, std::memory_order_relaxed);
        return 0;
    }
    Record *r = ring_records(g_base, static_cast<uint32_t>(ring)) + head % kRingRecords;
    r->probe = idx;
    r->tid = static_cast<uint32_t>(ri->tid);
    r->entry_ns = d->entry_ns;
    r->exit_ns = now;
    r->retval = regs->ax;
    for (int i = 0; i < 4; ++i) r->args[i] = d->args[i];
    h->head.store(head + 1, std::memory_order_release);
    return 0;
}

int hist_return(struct kretprobe_instance *ri, struct pt_regs *) noexcept
{
    if (g_silent.load(std::memory_order_relaxed)) return 0;
    uint64_t delta = liveprobe_ktime_ns() - reinterpret_cast<const EntryData *>(ri->data)->entry_ns;
    uint32_t idx = index_of(ri->rp);
    int32_t ring = my_ring();
    if (ring < 0) {
        header_of(g_base)->unringed.fetch_add(1, std::memory_order_relaxed);
        return 0;
    }
    uint32_t bucket = delta == 0 ? 0 : 64 - static_cast<uint32_t>(__builtin_clzll(delta));
    if (bucket >= kHistBuckets) bucket = kHistBuckets - 1;
    std::atomic<uint32_t> *b = hist_of(g_base, g_probes, static_cast<uint32_t>(ring), idx) + bucket;
    b->store(b->load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    std::atomic<uint64_t> *c = count_of(g_base, g_probes, static_cast<uint32_t>(ring), idx);
    c->store(c->load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    return 0;
}

bool is_glob(const std::string &s) { return s.find_first_of("*?[") != std::string::npos; }

// Copies each kretprobe's nmissed into the shared memory (the reader may outlive the process).
void publish_missed() noexcept
{
    if (!g_running || !g_list) return;
    for (auto &p : *g_list)
        missed_of(g_base, p->index)
            ->store(static_cast<uint64_t>(p->rp.nmissed) + p->rp.kp.nmissed + p->kp.nmissed, std::memory_order_relaxed);
    header_of(g_base)->final.store(1, std::memory_order_release);
}

[[gnu::constructor]] void publish_at_exit() { std::atexit([] { publish_missed(); }); }

}  // namespace

int start(Mode mode, const std::vector<std::string> &specs, int maxactive, Started *out, std::string *why, int given_fd,
          bool follow_forks)
{
    std::lock_guard lk(g_mu);
    g_follow = follow_forks;
    g_silent.store(false);
    if (g_running) {
        *why = "a trace session already runs in this process";
        return -EBUSY;
    }
    // The functions: each spec, globs expanded, each address once.
    std::vector<std::pair<uint64_t, std::string>> fns;
    std::set<uint64_t> seen;
    for (const std::string &spec : specs) {
        if (is_glob(spec)) {
            std::vector<symbols::Match> found;
            if (int r = symbols::match(spec, &found, why); r < 0) return r;
            if (found.empty()) out->skipped.push_back(spec + ": no function matches");
            for (auto &m : found)
                if (seen.insert(m.addr).second) fns.emplace_back(m.addr, m.name);
        } else {
            uint64_t addr = 0;
            std::string reason;
            if (symbols::resolve(spec, &addr, &reason) < 0) {
                out->skipped.push_back(spec + ": " + reason);
                continue;
            }
            if (seen.insert(addr).second) fns.emplace_back(addr, spec);
        }
    }
    if (fns.empty()) {
        *why = out->skipped.empty() ? "no function to trace" : out->skipped.front();
        return -ENOENT;
    }
    // The shared memory, before any probe can fire: the tool's (a program it started), or one of
    // our own that it opens through /proc/PID/fd.
    uint32_t n = static_cast<uint32_t>(fns.size());
    std::string names;
    for (auto &[addr, name] : fns) names += fmt::format("{:#x} {}\n", addr, name);
    size_t bytes = (names_offset(n, mode == Mode::hist) + names.size() + 4095) & ~size_t{4095};
    int fd = given_fd;
    if (fd >= 0) {
        struct stat st {};
        if (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) < bytes) {
            *why = fmt::format("the tool's shared memory (descriptor {}) is too small for {} probes", fd, n);
            return -ENOSPC;
        }
        bytes = static_cast<size_t>(st.st_size);
    } else {
        fd = static_cast<int>(syscall(SYS_memfd_create, "liveprobe-trace", 1u /* MFD_CLOEXEC */));
        if (fd < 0 || ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
            int e = errno;
            if (fd >= 0) close(fd);
            *why = fmt::format("cannot make the trace's shared memory ({} MiB): {}", bytes >> 20, std::strerror(e));
            return -e;
        }
    }
    void *base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) {
        int e = errno;
        close(fd);
        *why = fmt::format("cannot map the trace's shared memory: {}", std::strerror(e));
        return -e;
    }
    Header *h = new (base) Header();
    h->magic = kRingsMagic;
    h->rings = kRings;
    h->records = kRingRecords;
    h->probes = n;
    h->hist = mode == Mode::hist;
    h->names_offset = names_offset(n, mode == Mode::hist);
    h->names_bytes = names.size();
    std::memcpy(static_cast<char *>(base) + h->names_offset, names.data(), names.size());
    g_base = base;
    g_bytes = bytes;
    g_fd = fd;
    g_probes = n;
    g_mode = mode;
    g_generation.fetch_add(1, std::memory_order_release);

    auto *list = new std::vector<std::unique_ptr<Probe>>();
    list->reserve(n);
    for (uint32_t i = 0; i < n; ++i) {
        auto p = std::make_unique<Probe>();
        p->index = i;
        if (mode == Mode::count) {
            p->kp.addr = reinterpret_cast<kprobe_opcode_t *>(fns[i].first);
            p->kp.pre_handler = count_pre;
            p->kp.flags = KPROBE_FLAG_NOVEC;
        } else {
            p->rp.kp.addr = reinterpret_cast<kprobe_opcode_t *>(fns[i].first);
            p->rp.entry_handler = entry_stamp;
            p->rp.handler = mode == Mode::hist ? hist_return : event_return;
            p->rp.kp.flags = KPROBE_FLAG_NOVEC;
            p->rp.data_size = sizeof(EntryData);
            p->rp.maxactive = maxactive;
        }
        list->push_back(std::move(p));
    }
    std::vector<int> results(n);
    int registered;
    if (mode == Mode::count) {
        std::vector<struct kprobe *> kps;
        for (auto &p : *list) kps.push_back(&p->kp);
        registered = liveprobe_register_kprobes_each(kps.data(), static_cast<int>(n), results.data());
    } else {
        std::vector<struct kretprobe *> rps;
        for (auto &p : *list) rps.push_back(&p->rp);
        registered = liveprobe_register_kretprobes_each(rps.data(), static_cast<int>(n), results.data());
    }
    // The failed ones stay in the list (their index is the shared memory's), unregistered.
    for (uint32_t i = 0; i < n; ++i) {
        out->names.push_back(fns[i].second);
        out->addrs.push_back(fns[i].first);
        if (results[i] < 0) out->skipped.push_back(fmt::format("{}: {}", fns[i].second, std::strerror(-results[i])));
    }
    if (registered <= 0) {
        delete list;
        munmap(base, bytes);
        close(fd);
        g_base = nullptr;
        *why = out->skipped.empty() ? "no probe could be registered" : "no probe could be registered: " + out->skipped.back();
        out->names.clear();
        out->addrs.clear();
        return -ENOENT;
    }
    g_list = list;
    g_running = true;
    out->memfd = fd;
    g_started = *out;
    h->ready.store(1, std::memory_order_release);
    return 0;
}

int running(Started *out, Mode *mode)
{
    std::lock_guard lk(g_mu);
    if (!g_running) return -ENOENT;
    *out = g_started;
    *mode = g_mode;
    return 0;
}

bool parse_mode(const std::string &word, Mode *mode)
{
    if (word == "events") *mode = Mode::events;
    else if (word == "count") *mode = Mode::count;
    else if (word == "hist") *mode = Mode::hist;
    else return false;
    return true;
}

int start_from_environment()
{
    const char *spec = std::getenv("LIVEPROBE_TRACE");
    if (spec == nullptr) return 0;
    std::vector<std::string> words;
    std::istringstream in(spec);
    for (std::string w; in >> w;) words.push_back(agent::decode_arg(w));
    unsetenv("LIVEPROBE_TRACE");  // not again in the programs it runs
    Mode mode;
    std::string why;
    int r = -EINVAL;
    if (words.size() < 3 || !parse_mode(words[0], &mode)) {
        why = "LIVEPROBE_TRACE is not \"MODE MAXACTIVE SPEC...\"";
    } else {
        Started started;
        const char *fd = std::getenv("LIVEPROBE_TRACE_FD");
        unsetenv("LIVEPROBE_TRACE_FD");
        bool follow = std::getenv("LIVEPROBE_TRACE_NOFOLLOW") == nullptr;
        unsetenv("LIVEPROBE_TRACE_NOFOLLOW");
        r = start(mode, {words.begin() + 2, words.end()}, std::atoi(words[1].c_str()), &started, &why,
                  fd ? std::atoi(fd) : -1, follow);
        // As `liveprobe trace -p` says them: the first five, then how many more.
        for (size_t i = 0; r == 0 && i < started.skipped.size() && i < 5; ++i)
            std::fprintf(stderr, "liveprobe: not traced: %s\n", started.skipped[i].c_str());
        if (r == 0 && started.skipped.size() > 5)
            std::fprintf(stderr, "liveprobe: ... and %zu more not traced\n", started.skipped.size() - 5);
    }
    if (r < 0) {
        std::fprintf(stderr, "liveprobe: trace in process %d: %s\n", getpid(), why.c_str());
        std::exit(1);
    }
    return 0;
}

int stop(std::string *why)
{
    std::lock_guard lk(g_mu);
    if (!g_running) {
        *why = "no trace session runs in this process";
        return -ENOENT;
    }
    publish_missed();
    for (auto &p : *g_list) {
        if (g_mode == Mode::count) unregister_kprobe(&p->kp);
        else unregister_kretprobe(&p->rp);
    }
    publish_missed();  // the misses of the calls in flight meanwhile
    g_running = false;
    // Unregistering waited for every handler: nothing touches the mapping any more. The probes'
    // memory goes; the mapping stays the tool's through its own descriptor.
    delete g_list;
    g_list = nullptr;
    munmap(g_base, g_bytes);
    close(g_fd);
    g_fd = -1;
    g_base = nullptr;
    return 0;
}

}  // namespace liveprobe::trace
