#include "agent/modules.hpp"

#include <dlfcn.h>
#include <execinfo.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <link.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <csignal>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <thread>

#include <fmt/format.h>

#include "agent/guarded_call.hpp"
#include "agent/log_ring.hpp"
#include "agent/module_params.hpp"
#include "agent/module_quiesce.hpp"
#include "core/registry.hpp"
#include "os/linux/raw_syscall.hpp"
#include "os/linux/loader_events.hpp"
#include "symbols/symbols.hpp"

#define LIVEPROBE_MODULE_NO_MARKER 1
#include <liveprobe/module.h>
#undef current
#undef printk
#undef min
#undef max

namespace liveprobe::agent {
namespace {

// ---- what modules' constructors declare ---------------------------------------------------------

struct Info {
    std::string key, name, value;
    const void *where;  // an address inside the declaring object
};

// Declarations are taken only from the thread that is loading a module, while it loads one (the
// module's constructors run there, inside its dlopen): a library the program loads that was
// built with these headers declares nothing that could dangle.
std::mutex g_decl_mu;
std::atomic<pid_t> g_loading_tid{0};
// Never destroyed (no exit-time destructor: the library registers none, see log_ring.cpp).
std::vector<const struct liveprobe_module_param *> &g_params = *new std::vector<const struct liveprobe_module_param *>;
std::vector<Info> &g_infos = *new std::vector<Info>;

// The object (its link_map) holding addr.
const void *object_of(const void *addr)
{
    Dl_info di;
    struct link_map *lm = nullptr;
    if (dladdr1(addr, &di, reinterpret_cast<void **>(&lm), RTLD_DL_LINKMAP) == 0) return nullptr;
    return lm;
}

// ---- the modules ------------------------------------------------------------------------------

struct Param {
    const struct liveprobe_module_param *decl;
    std::string desc;
};

struct Module {
    std::string name, path;
    void *handle = nullptr;
    std::vector<std::pair<uint64_t, uint64_t>> ranges;  // PT_LOAD [start, end)
    std::vector<std::pair<uint64_t, uint64_t>> text;    // the executable ones
    int (*init)() = nullptr;
    void (*exit)() = nullptr;
    std::vector<Param> params;
    std::map<std::string, std::string> info;  // license, author, description, ...
    std::vector<char *> owned;                 // charp values, freed after the module is gone

    uint64_t size() const
    {
        uint64_t s = 0;
        for (auto [a, b] : ranges) s += b - a;
        return s;
    }
    bool contains(uint64_t a, bool text_only) const
    {
        for (auto [s, e] : text_only ? text : ranges)
            if (a >= s && a < e) return true;
        return false;
    }
};

std::mutex g_mu;  // one load or unload at a time; guards g_modules
std::atomic<pid_t> g_mu_owner{0};  // who holds g_mu (a module's init may fork while it runs)

// Holds g_mu, and says who does.
class ModulesLock {
public:
    ModulesLock()
    {
        g_mu.lock();
        g_mu_owner.store(static_cast<pid_t>(syscall(SYS_gettid)));
    }
    ~ModulesLock()
    {
        g_mu_owner.store(0);
        g_mu.unlock();
    }
    ModulesLock(const ModulesLock &) = delete;
    ModulesLock &operator=(const ModulesLock &) = delete;
};

// After fork(), the child must not inherit g_mu or g_decl_mu held by a thread it does not have.
// They are not taken around fork (a thread holding g_mu may be waiting for the registry's lock,
// which the registry's own fork handler holds: a deadlock); the child makes them fresh instead,
// unless the forking thread itself holds them (a module's init that forks). A child forked while
// another thread was changing the module list may see it half-changed; it is a copy, and only
// its own agent reads it.
pid_t g_forking_tid = 0;

[[gnu::constructor]] void modules_atfork()
{
    pthread_atfork([] { g_forking_tid = static_cast<pid_t>(os::raw_gettid()); }, nullptr,
                   [] {
                       pid_t owner = g_mu_owner.load();
                       if (owner != 0 && owner != g_forking_tid) {
                           new (&g_mu) std::mutex();
                           g_mu_owner.store(0);
                       }
                       if (g_loading_tid.load() != g_forking_tid) new (&g_decl_mu) std::mutex();
                   });
}

std::vector<std::unique_ptr<Module>> &g_modules = *new std::vector<std::unique_ptr<Module>>;

Module *find(const std::string &name)
{
    for (auto &m : g_modules)
        if (m->name == name) return m.get();
    return nullptr;
}

std::string module_name(const std::string &path)
{
    std::string base = path.substr(path.rfind('/') + 1);
    if (base.size() > 3 && base.compare(base.size() - 3, 3, ".so") == 0) base.resize(base.size() - 3);
    return base;
}

// Reads the file: an x86-64 shared object with liveprobe's module marker in its dynamic symbols.
int check_file(const std::string &path, std::string *why)
{
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        *why = fmt::format("{}: {}", path, std::strerror(e));
        return -e;
    }
    elf_version(EV_CURRENT);
    Elf *elf = elf_begin(fd, ELF_C_READ, nullptr);
    int r = 0;
    GElf_Ehdr eh;
    if (elf == nullptr || elf_kind(elf) != ELF_K_ELF || gelf_getehdr(elf, &eh) == nullptr) {
        *why = fmt::format("{}: not a probe module: not an ELF file", path);
        r = -ENOEXEC;
    } else if (eh.e_type != ET_DYN || eh.e_machine != EM_X86_64) {
        *why = fmt::format("{}: not a probe module: not an x86-64 shared object (build it with `liveprobe "
                           "build-module`)",
                           path);
        r = -ENOEXEC;
    } else {
        bool marked = false;
        for (Elf_Scn *scn = nullptr; !marked && (scn = elf_nextscn(elf, scn)) != nullptr;) {
            GElf_Shdr sh;
            if (gelf_getshdr(scn, &sh) == nullptr || sh.sh_type != SHT_DYNSYM || sh.sh_entsize == 0) continue;
            Elf_Data *data = elf_getdata(scn, nullptr);
            for (size_t i = 0; data && i < sh.sh_size / sh.sh_entsize; ++i) {
                GElf_Sym sym;
                if (gelf_getsym(data, static_cast<int>(i), &sym) == nullptr || sym.st_shndx == SHN_UNDEF) continue;
                const char *n = elf_strptr(elf, sh.sh_link, sym.st_name);
                if (n && std::strcmp(n, "liveprobe_module_abi_1") == 0) marked = true;
            }
        }
        if (!marked) {
            *why = fmt::format("{}: not a probe module: it was not built with liveprobe's <linux/module.h> (build it "
                               "with `liveprobe build-module`)",
                               path);
            r = -ENOEXEC;
        }
    }
    if (elf) elf_end(elf);
    close(fd);
    return r;
}

// init_module / cleanup_module of the module itself (dlsym also searches its dependencies, and
// libc exports an init_module of its own).
void *own_symbol(void *handle, const char *name)
{
    void *p = dlsym(handle, name);
    return p && object_of(p) == handle ? p : nullptr;
}

void find_ranges(Module *m)
{
    struct Ctx {
        Module *m;
        uint64_t bias;
    } ctx{m, reinterpret_cast<struct link_map *>(m->handle)->l_addr};
    dl_iterate_phdr(
        [](struct dl_phdr_info *info, size_t, void *arg) -> int {
            auto *c = static_cast<Ctx *>(arg);
            if (info->dlpi_addr != c->bias) return 0;
            for (int i = 0; i < info->dlpi_phnum; ++i) {
                const ElfW(Phdr) &ph = info->dlpi_phdr[i];
                if (ph.p_type != PT_LOAD) continue;
                uint64_t start = (info->dlpi_addr + ph.p_vaddr) & ~uint64_t{4095};
                uint64_t end = (info->dlpi_addr + ph.p_vaddr + ph.p_memsz + 4095) & ~uint64_t{4095};
                c->m->ranges.emplace_back(start, end);
                if (ph.p_flags & PF_X) c->m->text.emplace_back(start, end);
            }
            return 1;
        },
        &ctx);
}

// ---- probes of a module -------------------------------------------------------------------------

// Does the probe belong to m: its struct in m's memory, or a handler in m's code (a struct it
// allocated)?
bool belongs(const Module &m, const core::ProbeSummary &s)
{
    if (m.contains(reinterpret_cast<uint64_t>(s.kp), false)) return true;
    for (uint64_t c : s.code)
        if (c && m.contains(c, true)) return true;
    return false;
}

// The registered probes of m.
std::vector<core::ProbeSummary> probes_of(const Module &m)
{
    std::vector<core::ProbeSummary> out;
    for (core::ProbeSummary &s : core::list_probes())
        if (belongs(m, s)) out.push_back(std::move(s));
    return out;
}

void unregister(const core::ProbeSummary &s)
{
    auto *kp = const_cast<struct kprobe *>(s.kp);
    if (s.kind == 'r') unregister_kretprobe(reinterpret_cast<struct kretprobe *>(reinterpret_cast<char *>(kp) -
                                                                                  offsetof(struct kretprobe, kp)));
    else if (s.kind == 'j') unregister_jprobe(reinterpret_cast<struct jprobe *>(reinterpret_cast<char *>(kp) -
                                                                                offsetof(struct jprobe, kp)));
    else unregister_kprobe(kp);
}

// What the kernel's debugfs kprobes/list shows of a probe, and its counters.
std::string probe_line(const core::ProbeSummary &s)
{
    std::string where = s.symbol.empty() ? symbols::describe(s.addr) : fmt::format("{}+{:#x}", s.symbol, s.offset);
    std::string flags;
    if (s.flags & KPROBE_FLAG_GONE) flags += " [GONE]";
    if (s.flags & KPROBE_FLAG_DISABLED) flags += " [DISABLED]";
    if (s.counters.optimized) flags += " [OPTIMIZED]";
    return fmt::format("  {:016x}  {}  {}  hits={} nmissed={}{}", s.addr, s.kind, where,
                       s.counters.hits_text(),
                       s.counters.nmissed + s.kret_nmissed, flags);
}

void log_line(const std::string &text) { log_ring().write(text.data(), text.size(), 4); }

// What a fault was: "SIGSEGV at address 0x10".
std::string fault_text(const GuardedOutcome &g)
{
    const char *abbrev = sigabbrev_np(g.sig);
    return fmt::format("{} at address {:#x}", abbrev ? std::string("SIG") + abbrev : "a signal", g.addr);
}

// Unloads m: its probes left registered, a wait until no thread runs its code, dlclose.
// Returns "" or why it could not (the module stays loaded then).
std::string drop(Module *m)
{
    for (const core::ProbeSummary &s : probes_of(*m)) {
        log_line(fmt::format("liveprobe: module {} left a probe registered at {}: unregistered it", m->name,
                             symbols::describe(s.addr)));
        unregister(s);
    }
    // Handlers are over (unregistering waits for them); a thread may still be in the module's
    // code by another way (a thread of its own, a function pointer it handed out): wait for it,
    // at most 5 s.
    std::string busy;
    for (int attempt = 0; attempt < 250; ++attempt) {
        Occupant who;
        std::string why;
        int r = find_occupant(m->text, &who, &why);
        if (r < 0) {
            busy = fmt::format("cannot see whether a thread is inside it: {}", why);
            break;
        }
        if (r == 0) {
            busy.clear();
            break;
        }
        busy = who.on_stack ? fmt::format("thread {} has a return address into it on its stack ({})", who.tid,
                                          symbols::describe(who.where))
                            : fmt::format("thread {} runs its code ({})", who.tid, symbols::describe(who.where));
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (!busy.empty()) return busy;
    dlclose(m->handle);
    m->handle = nullptr;
    os::notify_unloaded();       // probes on its code are gone (the library's own dlclose is libc's)
    symbols::forget_unloaded();  // its symbol tables: an open file and a mapping of it
    for (char *s : m->owned) std::free(s);
    m->owned.clear();
    // glibc keeps some objects loaded after their last dlclose (a C++ STB_GNU_UNIQUE symbol,
    // -z nodelete): say so, it is still mapped and cannot be loaded again as a module.
    if (void *h = dlopen(m->path.c_str(), RTLD_LAZY | RTLD_NOLOAD)) {
        dlclose(h);
        log_line(fmt::format("liveprobe: module {}: the dynamic loader keeps {} loaded after its unload (a "
                             "STB_GNU_UNIQUE symbol or -z nodelete); it stays mapped",
                             m->name, m->path));
    }
    return "";
}

}  // namespace

int load_module(const std::string &path, const std::vector<std::string> &args, std::string *name, std::string *why)
{
    ModulesLock lk;
    *name = module_name(path);
    if (find(*name)) {
        *why = fmt::format("module {} is already loaded (liveprobe rmmod it first)", *name);
        return -EEXIST;
    }
    if (int r = check_file(path, why); r < 0) return r;

    auto m = std::make_unique<Module>();
    m->name = *name;
    char real[PATH_MAX];
    m->path = realpath(path.c_str(), real) ? real : path;
    // Already in the process (the program loaded it, or it stayed resident after an rmmod): its
    // constructors would not run again, nor declare its parameters.
    if (void *h = dlopen(m->path.c_str(), RTLD_LAZY | RTLD_NOLOAD)) {
        dlclose(h);
        *why = fmt::format("{} is already loaded in this process, not as a module (the program loaded it, or the "
                           "dynamic loader kept it after an rmmod): it cannot be loaded as a module again",
                           m->path);
        return -EEXIST;
    }
    // Its constructors declare its parameters (liveprobe_module_param_declare, below).
    g_loading_tid.store(static_cast<pid_t>(syscall(SYS_gettid)));
    m->handle = dlopen(m->path.c_str(), RTLD_NOW | RTLD_LOCAL);
    g_loading_tid.store(0);
    std::vector<const struct liveprobe_module_param *> params;
    std::vector<Info> infos;
    {
        std::lock_guard dk(g_decl_mu);
        params.swap(g_params);
        infos.swap(g_infos);
    }
    if (m->handle == nullptr) {
        const char *e = dlerror();
        *why = fmt::format("{}: cannot load it: {}", path, e ? e : "dlopen failed");
        return -ENOEXEC;
    }
    for (const auto *p : params)  // the module's own (a dependency it brought may declare some)
        if (object_of(p) == m->handle) m->params.push_back(Param{p, {}});
    for (const Info &i : infos) {
        if (object_of(i.where) != m->handle) continue;
        if (i.key == "parmdesc") {
            for (Param &p : m->params)
                if (i.name == p.decl->name) p.desc = i.value;
        } else {
            m->info[i.key] = i.value;
        }
    }
    find_ranges(m.get());
    m->init = reinterpret_cast<int (*)()>(own_symbol(m->handle, "init_module"));
    m->exit = reinterpret_cast<void (*)()>(own_symbol(m->handle, "cleanup_module"));

    // A failed load unloads the module; if a thread stays inside it, it stays listed (without
    // init or exit: rmmod only unloads it).
    auto fail = [&](int err, std::string reason) {
        *why = std::move(reason);
        if (std::string busy = drop(m.get()); !busy.empty()) {
            *why += fmt::format("; it could not be unloaded ({}), rmmod it later", busy);
            m->init = nullptr;
            m->exit = nullptr;
            g_modules.push_back(std::move(m));
        }
        return err;
    };
    std::vector<const struct liveprobe_module_param *> decls;
    for (const Param &q : m->params) decls.push_back(q.decl);
    for (const std::string &a : args)
        if (std::string e = set_param(decls, m->name, a, &m->owned); !e.empty()) return fail(-EINVAL, e);
    // dump_stack's backtrace() loads libgcc_s on its first call: not in a handler.
    static bool warmed = [] {
        void *pcs[2];
        return backtrace(pcs, 2) >= 0;
    }();
    (void)warmed;
    if (m->init) {
        GuardedOutcome g = run_module_function(m->init, nullptr);
        int r = g.result;
        if (!g.returned) {
            std::string e = fmt::format("module {}: its init faulted ({}) and was abandoned; the module is unloaded",
                                        m->name, fault_text(g));
            log_line("liveprobe: " + e);
            return fail(-EFAULT, e);
        }
        if (r != 0) {
            // As the kernel: a positive return is reported as is; the module is gone either way.
            int err = r < 0 ? -r : r;
            return fail(-err, fmt::format("module {}: its init failed with {} ({})", m->name, -err, std::strerror(err)));
        }
    }
    g_modules.push_back(std::move(m));
    return 0;
}

int unload_module(const std::string &name, std::string *why)
{
    ModulesLock lk;
    Module *m = find(name);
    if (m == nullptr) {
        std::string have;
        for (auto &x : g_modules) have += (have.empty() ? "" : ", ") + x->name;
        *why = fmt::format("module {} is not loaded ({})", name,
                           have.empty() ? std::string("no module is") : "loaded: " + have);
        return -ENOENT;
    }
    if (m->init && !m->exit) {
        *why = fmt::format("module {} has an init and no exit: it cannot be unloaded (as in the kernel)", name);
        return -EBUSY;
    }
    GuardedOutcome g;
    g.returned = true;
    if (m->exit) g = run_module_function(nullptr, m->exit);
    if (!g.returned) {
        *why = fmt::format("module {}: its exit faulted ({}) and was abandoned; it was unloaded anyway", name,
                           fault_text(g));
        log_line("liveprobe: " + *why);
    }
    std::string busy = drop(m);
    if (!busy.empty()) {
        *why = fmt::format("module {}: its exit ran, but a thread stayed inside its code for 5 s ({}); it stays "
                           "loaded",
                           name, busy);
        m->init = nullptr;  // its exit ran: a second rmmod only unloads
        m->exit = nullptr;
        return -EBUSY;
    }
    for (auto it = g_modules.begin(); it != g_modules.end(); ++it)
        if (it->get() == m) {
            g_modules.erase(it);
            break;
        }
    return 0;
}

std::vector<std::string> list_modules()
{
    ModulesLock lk;
    std::vector<std::string> out;
    out.push_back(fmt::format("{:<24} {:>8}  {:>6}  {}", "Module", "Size", "Probes", "Path"));
    std::vector<core::ProbeSummary> all = core::list_probes();
    std::vector<bool> claimed(all.size());
    for (auto &m : g_modules) {
        std::vector<std::string> lines;
        for (size_t i = 0; i < all.size(); ++i)
            if (!claimed[i] && belongs(*m, all[i])) {
                claimed[i] = true;
                lines.push_back(probe_line(all[i]));
            }
        out.push_back(fmt::format("{:<24} {:>8}  {:>6}  {}", m->name, m->size(), lines.size(), m->path));
        out.insert(out.end(), lines.begin(), lines.end());
    }
    std::vector<std::string> rest;
    for (size_t i = 0; i < all.size(); ++i)
        if (!claimed[i]) rest.push_back(probe_line(all[i]));
    if (!rest.empty()) {
        out.push_back(fmt::format("{:<24} {:>8}  {:>6}  {}", "(program)", "-", rest.size(), "probes of no module"));
        out.insert(out.end(), rest.begin(), rest.end());
    }
    return out;
}

size_t module_count()
{
    ModulesLock lk;
    return g_modules.size();
}

std::vector<std::string> module_names()
{
    ModulesLock lk;
    std::vector<std::string> out;
    for (auto &m : g_modules) out.push_back(m->name);
    return out;
}

}  // namespace liveprobe::agent

using namespace liveprobe::agent;

namespace {
bool loading_here() { return g_loading_tid.load() == static_cast<pid_t>(syscall(SYS_gettid)); }
}  // namespace

extern "C" void liveprobe_module_param_declare(const struct liveprobe_module_param *p)
{
    if (p == nullptr || p->size < sizeof(struct liveprobe_module_param) || !loading_here()) return;
    std::lock_guard dk(g_decl_mu);
    g_params.push_back(p);
}

extern "C" void liveprobe_module_info_declare(const char *key, const char *name, const char *value)
{
    if (!key || !name || !value || !loading_here()) return;
    std::lock_guard dk(g_decl_mu);
    g_infos.push_back(Info{key, name, value, value});
}
