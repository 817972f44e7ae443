#include "trace/session.hpp"
#include "core/immortal.hpp"

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
#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

#include "agent/channel.hpp"
#include "os/linux/clock.hpp"
#include "os/linux/raw_syscall.hpp"
#include "symbols/dwarf_params.hpp"
#include "symbols/symbols.hpp"
#include "trace/fetch.hpp"
#include "trace/handlers.hpp"
#include "trace/rings.hpp"
#include "trace/spec.hpp"

namespace liveprobe::trace {
namespace {

// The session (the hit path's state and handlers are in trace/handlers).
std::mutex g_mu;
bool g_running = false;
Mode g_mode = Mode::events;
std::vector<std::unique_ptr<Probe>> *g_list = nullptr;
size_t g_bytes = 0;
int g_fd = -1;
core::Immortal<Started> g_started_storage;
Started &g_started = g_started_storage.value;
std::vector<Spec> *g_specs = nullptr;

bool is_glob(const std::string &s) { return s.find_first_of("*?[") != std::string::npos; }

// Parameters by name, from the DWARF of the function at `entry`: each becomes $argN, typed as
// its declaration unless the spec gives a type (char *: a string; pointers: hex; integers:
// signed or unsigned decimal). 0, or -ENOENT with *why.
int resolve_params(Spec *spec, uint64_t entry, std::string *why)
{
    std::vector<symbols::Param> params;
    bool loaded = false;
    for (FetchArg &a : spec->args) {
        if (a.base != FetchBase::param) continue;
        if (!loaded && symbols::function_params(entry, &params, why) < 0) return -ENOENT;
        loaded = true;
        const symbols::Param *p = nullptr;
        for (const symbols::Param &q : params)
            if (q.name == a.symbol) p = &q;
        if (!p) {
            std::string names;
            for (const symbols::Param &q : params) names += (names.empty() ? "" : ", ") + q.name;
            *why = fmt::format("no parameter '{}' (its parameters: {})", a.symbol, names.empty() ? "none" : names);
            return -ENOENT;
        }
        if (p->slot == 0) {
            *why = fmt::format("parameter '{}' ({}) is not in an integer register: {}", a.symbol, p->type, p->why_no_slot);
            return -ENOENT;
        }
        a.base = FetchBase::arg;
        a.n = p->slot;
        if (!a.typed && a.derefs.empty()) {
            static constexpr FetchType kSigned[] = {FetchType::s8, FetchType::s16, FetchType::s32, FetchType::s64};
            static constexpr FetchType kUnsigned[] = {FetchType::u8, FetchType::u16, FetchType::u32, FetchType::u64};
            int k = p->size >= 8 ? 3 : p->size >= 4 ? 2 : p->size >= 2 ? 1 : 0;
            a.type = p->is_char_pointer ? FetchType::string : p->is_pointer ? FetchType::x64 : p->is_signed ? kSigned[k] : kUnsigned[k];
        }
        a.symbol.clear();
    }
    return 0;
}

// FUNC, FUNC+0x10, as the skipped list says a probe.
std::string probe_text(const std::string &name, const Spec &spec)
{
    return spec.offset ? fmt::format("{}+{:#x}", name, spec.offset) : name;
}

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

int start(Mode mode, const std::vector<std::string> &spec_texts, int maxactive, Started *out, std::string *why,
          int given_fd, bool follow_forks)
{
    std::lock_guard lk(g_mu);
    uint64_t t0 = liveprobe_ktime_ns();
    g_follow = follow_forks;
    g_silent.store(false);
    if (g_running) {
        *why = "a trace session already runs in this process";
        return -EBUSY;
    }
    // The specs, parsed and checked against the mode.
    auto specs = std::make_unique<std::vector<Spec>>(spec_texts.size());
    for (size_t i = 0; i < spec_texts.size(); ++i) {
        Spec &spec = (*specs)[i];
        std::string error;
        size_t at = 0;
        if (!parse_spec(spec_texts[i], &spec, &error, &at)) {
            *why = point_at(spec_texts[i], at, error);
            return -EINVAL;
        }
        if (std::string c = mode_conflict(spec, mode == Mode::count, mode == Mode::hist); !c.empty()) {
            *why = c;
            return -EINVAL;
        }
        if (int r = resolve_fetch_symbols(&spec, why); r < 0) return r;
    }
    // The functions: each spec, globs expanded, each address once a spec.
    struct Target {
        uint64_t addr;  // the probe's: the function's plus the spec's offset
        std::string name;
        uint32_t spec;
    };
    std::vector<Target> fns;
    // A probe once: calls (FUNC) once whichever spec names them, others once a spec.
    std::set<std::pair<uint32_t, uint64_t>> seen;
    for (uint32_t si = 0; si < specs->size(); ++si) {
        const Spec &spec = (*specs)[si];
        uint32_t key = spec.kind == SpecKind::call ? UINT32_MAX : si;
        if (is_glob(spec.target)) {
            std::vector<symbols::Match> found;
            if (int r = symbols::match(spec.target, &found, why); r < 0) return r;
            if (found.empty()) out->skipped.push_back(spec.target + ": no function matches");
            for (auto &m : found)
                if (seen.insert({key, m.addr}).second) fns.push_back({m.addr + spec.offset, m.name, si});
        } else {
            uint64_t addr = 0;
            std::string reason;
            if (symbols::resolve(spec.target, &addr, &reason) < 0) {
                out->skipped.push_back(spec.target + ": " + reason);
                continue;
            }
            if (seen.insert({key, addr}).second) fns.push_back({addr + spec.offset, spec.target, si});
        }
    }
    // Each function's spec as it is placed: parameters by name resolved from the function's
    // DWARF into arguments (and their types), so a glob may give one spec per function. The
    // tool reads the resolved specs from the shared memory: they say how each event is laid out.
    auto resolved = std::make_unique<std::vector<Spec>>();
    std::map<std::string, uint32_t> by_text;
    std::vector<Target> placed;
    for (Target &f : fns) {
        Spec spec = (*specs)[f.spec];
        if (int r = resolve_params(&spec, f.addr - spec.offset, why); r < 0) {
            out->skipped.push_back(fmt::format("{}: {}", f.name, *why));
            continue;
        }
        std::string text = to_text(spec);
        auto [it, added] = by_text.emplace(text, static_cast<uint32_t>(resolved->size()));
        if (added) resolved->push_back(std::move(spec));
        f.spec = it->second;
        placed.push_back(std::move(f));
    }
    fns = std::move(placed);
    specs = std::move(resolved);
    if (fns.empty()) {
        *why = out->skipped.empty() ? "no function to trace" : out->skipped.front();
        return -ENOENT;
    }
    // The shared memory, before any probe can fire: the tool's (a program it started), or one of
    // our own that it opens through /proc/PID/fd.
    uint32_t n = static_cast<uint32_t>(fns.size());
    std::string names;
    for (const Spec &spec : *specs) names += "spec " + agent::encode_arg(to_text(spec)) + "\n";
    for (auto &f : fns) names += fmt::format("{:#x} {} {}\n", f.addr, f.spec, f.name);
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
    g_tsc = os::clock::is_tsc();
    g_generation.fetch_add(1, std::memory_order_release);

    // Each probe: a kprobe (--count; an instruction) or a kretprobe (a call; a return).
    auto *list = new std::vector<std::unique_ptr<Probe>>();
    list->reserve(n);
    std::vector<struct kprobe *> kps;
    std::vector<struct kretprobe *> rps;
    std::vector<uint32_t> kp_index, rp_index;
    for (uint32_t i = 0; i < n; ++i) {
        auto p = std::make_unique<Probe>();
        const Spec &spec = (*specs)[fns[i].spec];
        p->index = i;
        p->spec = &spec;
        p->bytes = spec.kind == SpecKind::call ? 0 : static_cast<uint32_t>(payload_bytes(spec));
        p->slots = record_slots(p->bytes);
        if (mode == Mode::count || spec.kind == SpecKind::probe) {
            p->kp.addr = reinterpret_cast<kprobe_opcode_t *>(fns[i].addr);
            p->kp.pre_handler = mode == Mode::count ? count_pre : fetch_pre;
            kps.push_back(&p->kp);
            kp_index.push_back(i);
        } else {
            p->rp.kp.addr = reinterpret_cast<kprobe_opcode_t *>(fns[i].addr);
            bool regs = mode == Mode::events && spec.kind == SpecKind::ret;
            p->rp.entry_handler = regs ? entry_regs : mode == Mode::hist ? entry_cycles : entry_time;
            p->rp.handler = mode == Mode::hist ? hist_return : spec.kind == SpecKind::ret ? fetch_return : event_return;
            p->rp.data_size = regs ? sizeof(EntryData) : sizeof(uint64_t);
            p->rp.maxactive = spec.maxactive ? spec.maxactive : maxactive;
            rps.push_back(&p->rp);
            rp_index.push_back(i);
        }
        list->push_back(std::move(p));
    }
    std::vector<int> results(n), kp_results(kps.size()), rp_results(rps.size());
    int registered = 0;
    if (!kps.empty())
        registered += std::max(0, liveprobe_register_kprobes_each(kps.data(), static_cast<int>(kps.size()), kp_results.data()));
    if (!rps.empty())
        registered += std::max(0, liveprobe_register_kretprobes_each(rps.data(), static_cast<int>(rps.size()), rp_results.data()));
    for (size_t k = 0; k < kps.size(); ++k) results[kp_index[k]] = kp_results[k];
    for (size_t k = 0; k < rps.size(); ++k) results[rp_index[k]] = rp_results[k];
    // The failed ones stay in the list (their index is the shared memory's), unregistered.
    for (uint32_t i = 0; i < n; ++i) {
        out->names.push_back(fns[i].name);
        out->addrs.push_back(fns[i].addr);
        out->specs.push_back(fns[i].spec);
        if (results[i] < 0) {
            (*list)[i]->kp.addr = nullptr;  // not to be unregistered
            (*list)[i]->rp.kp.addr = nullptr;
            out->skipped.push_back(fmt::format("{}: {}", probe_text(fns[i].name, (*specs)[fns[i].spec]),
                                               results[i] == -EILSEQ ? "not the start of an instruction"
                                                                     : std::strerror(-results[i])));
        }
    }
    if (registered <= 0) {
        delete list;
        munmap(base, bytes);
        close(fd);
        g_base = nullptr;
        *why = out->skipped.empty() ? "no probe could be registered" : "no probe could be registered: " + out->skipped.back();
        out->names.clear();
        out->addrs.clear();
        out->specs.clear();
        return -ENOENT;
    }
    out->placed = static_cast<size_t>(registered);
    // Which take the jump path; the reasons of the others, most common first (a probe on the
    // breakpoint path costs a signal, microseconds, a hit: worth saying which and why).
    std::map<std::string, size_t> reasons;
    for (uint32_t i = 0; i < n; ++i) {
        if (results[i] < 0) continue;
        const struct kprobe *kp = (*list)[i]->kp.addr ? &(*list)[i]->kp : &(*list)[i]->rp.kp;
        struct liveprobe_info info {};
        if (liveprobe_kprobe_info(kp, &info) != 0) continue;
        if (kp->flags & KPROBE_FLAG_OPTIMIZED) ++out->optimized;
        else ++reasons[info.why_not_optimized ? info.why_not_optimized : "unknown"];
    }
    std::vector<std::pair<size_t, std::string>> by_count;
    for (auto &[why, count] : reasons) by_count.emplace_back(count, why);
    std::sort(by_count.begin(), by_count.end(), [](auto &a, auto &b) { return a.first > b.first; });
    for (auto &[count, why] : by_count) out->slow.push_back(fmt::format("{}: {}", count, why));
    out->place_ms = static_cast<double>(liveprobe_ktime_ns() - t0) / 1e6;
    g_list = list;
    g_specs = specs.release();
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
        if (r == 0)
            std::fprintf(stderr, "liveprobe: placed %zu probes (%zu jump-optimized) in %.1f ms\n", started.placed,
                         started.optimized, started.place_ms);
        for (size_t i = 0; r == 0 && i < started.slow.size() && i < 3; ++i)
            std::fprintf(stderr, "liveprobe: on the breakpoint path: %s\n", started.slow[i].c_str());
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
    // Each probe of the list as start() registered it (a failed one has no address); in batches.
    std::vector<struct kprobe *> kps;
    std::vector<struct kretprobe *> rps;
    for (auto &p : *g_list) {
        if (p->kp.addr) kps.push_back(&p->kp);
        if (p->rp.kp.addr) rps.push_back(&p->rp);
    }
    if (!kps.empty()) unregister_kprobes(kps.data(), static_cast<int>(kps.size()));
    if (!rps.empty()) unregister_kretprobes(rps.data(), static_cast<int>(rps.size()));
    publish_missed();  // the misses of the calls in flight meanwhile
    g_running = false;
    // Unregistering waited for every handler: nothing touches the mapping any more. The probes'
    // memory goes; the mapping stays the tool's through its own descriptor.
    delete g_list;
    g_list = nullptr;
    delete g_specs;
    g_specs = nullptr;
    munmap(g_base, g_bytes);
    close(g_fd);
    g_fd = -1;
    g_base = nullptr;
    return 0;
}

}  // namespace liveprobe::trace
