// The process-wide view of loaded objects behind symbols.hpp: which objects are mapped where
// (dl_iterate_phdr), their parsed tables (ElfObject, cached by path and load bias), and the
// name rules of API.md "Symbol names".
#include "symbols/symbols.hpp"

#include <fmt/format.h>
#include "core/immortal.hpp"

#include <dlfcn.h>
#include <fnmatch.h>
#include <link.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "symbols/elf_object.hpp"
#include "symbols/names.hpp"

namespace liveprobe::symbols {
namespace {

struct Module {
    std::string path;       // the object's path; the real path of the main program
    std::string open_path;  // what to open: "/proc/self/exe" for the main program
    uint64_t bias = 0;      // dlpi_addr: runtime address = bias + file address
    std::vector<std::pair<uint64_t, uint64_t>> ranges;  // PT_LOAD [start, end), runtime
    bool is_main = false;
    bool is_own = false;  // liveprobe's own shared object: never searched by name
    std::shared_ptr<ElfObject> elf;
    bool load_failed = false;

    bool contains(uint64_t addr) const {
        for (auto [start, end] : ranges)
            if (addr >= start && addr < end) return true;
        return false;
    }
};

// All of it protected by g_mutex.
std::timed_mutex g_mutex;

constinit core::Immortal<std::vector<Module>> g_modules_storage;
std::vector<Module> &g_modules = g_modules_storage.value;  // in dl_iterate_phdr order: the main program first
unsigned long long g_adds = 0, g_subs = 0;
bool g_valid = false;

struct Counters {
    unsigned long long adds = 0, subs = 0;
};

int read_counters(dl_phdr_info *info, size_t size, void *data) {
    auto *c = static_cast<Counters *>(data);
    if (size >= offsetof(dl_phdr_info, dlpi_subs) + sizeof(info->dlpi_subs)) {
        c->adds = info->dlpi_adds;
        c->subs = info->dlpi_subs;
    }
    return 1;  // the counters are global: the first object is enough
}

std::string main_program_path() {
    char buf[PATH_MAX];
    ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n <= 0) return "/proc/self/exe";
    std::string path(buf, static_cast<size_t>(n));
    // A program replaced on disk after it started reads as "... (deleted)"; its name still
    // matches, and /proc/self/exe still opens the right file.
    constexpr std::string_view deleted = " (deleted)";
    if (path.ends_with(deleted)) path.resize(path.size() - deleted.size());
    return path;
}

int collect(dl_phdr_info *info, size_t, void *data) {
    auto *out = static_cast<std::vector<Module> *>(data);
    Module m;
    m.is_main = out->empty();
    m.bias = info->dlpi_addr;
    for (int i = 0; i < info->dlpi_phnum; ++i) {
        const ElfW(Phdr) &ph = info->dlpi_phdr[i];
        if (ph.p_type == PT_LOAD && ph.p_memsz > 0)
            m.ranges.emplace_back(m.bias + ph.p_vaddr, m.bias + ph.p_vaddr + ph.p_memsz);
    }
    if (m.is_main) {
        m.path = main_program_path();
        m.open_path = "/proc/self/exe";
    } else {
        // Objects without a file: the vDSO (named linux-vdso.so.1, but nothing on disk by
        // that name) and anything else unnamed.
        const char *name = info->dlpi_name;
        if (name == nullptr || name[0] == '\0' || std::string_view(name).starts_with("linux-vdso"))
            return 0;
        m.path = name;
        m.open_path = name;
    }
    out->push_back(std::move(m));
    return 0;
}

// Brings g_modules up to date with the loader's list, keeping parsed tables of objects still
// loaded at the same path and bias. Cheap when nothing was loaded or unloaded since last time.
void refresh() {
    Counters c;
    dl_iterate_phdr(read_counters, &c);
    if (g_valid && c.adds == g_adds && c.subs == g_subs) return;

    std::vector<Module> fresh;
    dl_iterate_phdr(collect, &fresh);
    // liveprobe's own object holds this function. When liveprobe is linked statically into
    // the main program (the unit tests), the main program is searched as usual.
    auto self = reinterpret_cast<uint64_t>(&refresh);
    for (Module &m : fresh) {
        m.is_own = !m.is_main && m.contains(self);
        for (Module &old : g_modules) {
            if (old.path == m.path && old.bias == m.bias && old.open_path == m.open_path) {
                m.elf = std::move(old.elf);
                m.load_failed = old.load_failed;
                break;
            }
        }
    }
    g_modules = std::move(fresh);
    g_adds = c.adds;
    g_subs = c.subs;
    g_valid = true;
}

ElfObject *tables(Module &m) {
    if (!m.elf && !m.load_failed) {
        m.elf = ElfObject::load(m.open_path, true, nullptr);
        m.load_failed = !m.elf;
    }
    return m.elf.get();
}

Module *module_at(uint64_t addr) {
    for (Module &m : g_modules)
        if (m.contains(addr)) return &m;
    return nullptr;
}

std::string hex(uint64_t v) {
    char buf[24];
    std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
    return buf;
}

struct Candidate {
    std::string object;   // base name of the object, for messages
    std::string display;  // the name as listed in an ambiguity ("_Z..." or demangled)
    std::string lookup;   // the base name to give dlsym for an IFUNC
    std::string version;  // for dlvsym, when the user asked for one
    std::string open_path;
    bool is_main = false;
    bool ifunc = false;  // an IFUNC not resolved (yet): addr is its resolver's
    bool global = false;
    uint64_t addr = 0;  // runtime address; for an IFUNC, its resolver until resolved
    std::vector<std::pair<uint64_t, uint64_t>> ranges;
};

// The candidates for spec in one module: raw names and demangled names, the default version
// unless one was named, one per distinct address.
void match_module(Module &m, const names::Spec &spec, const std::string &normalized,
                  std::vector<Candidate> *out) {
    ElfObject *elf = tables(m);
    if (elf == nullptr) return;
    const std::vector<Symbol> &syms = elf->symbols();
    std::vector<std::pair<uint32_t, bool>> hits;  // index, matched by demangled name
    if (const std::vector<uint32_t> *raw = elf->by_name(spec.name))
        for (uint32_t i : *raw) hits.emplace_back(i, false);
    for (uint32_t i : elf->by_demangled(normalized)) hits.emplace_back(i, true);

    if (!spec.version.empty()) {
        std::erase_if(hits, [&](auto h) { return syms[h.first].version != spec.version; });
    } else if (std::any_of(hits.begin(), hits.end(),
                           [&](auto h) { return !syms[h.first].hidden_version; })) {
        // "memcpy" means memcpy@@GLIBC_2.14, not the compatibility memcpy@GLIBC_2.2.5.
        std::erase_if(hits, [&](auto h) { return syms[h.first].hidden_version; });
    }
    std::string object(names::base_name(m.path));
    for (auto [i, demangled] : hits) {
        const Symbol &s = syms[i];
        uint64_t addr = m.bias + s.value;
        auto seen = std::find_if(out->begin(), out->end(), [&](const Candidate &c) {
            return c.open_path == m.open_path && c.addr == addr;
        });
        if (seen != out->end()) {
            // An alias, or the same symbol in .symtab and .dynsym: one candidate, global
            // when any of its names is.
            seen->global = seen->global || s.global;
            seen->ifunc = seen->ifunc || s.type == STT_GNU_IFUNC;
            continue;
        }
        Candidate c;
        c.object = object;
        std::string_view version;
        bool hidden = false;
        c.lookup = std::string(names::split_version(s.name, &version, &hidden));
        c.display = demangled ? names::demangle(c.lookup.c_str()) : c.lookup;
        c.version = std::string(spec.version);
        c.open_path = m.open_path;
        c.is_main = m.is_main;
        c.ifunc = s.type == STT_GNU_IFUNC;
        c.global = s.global;
        c.addr = addr;
        c.ranges = m.ranges;
        out->push_back(std::move(c));
    }
}

// Replaces an IFUNC candidate's resolver address by the implementation the resolver chose,
// as the dynamic linker's own lookup (dlsym) reports it. Runs without g_mutex held: dlopen
// takes the loader lock, which a thread running constructors holds while it may be waiting
// for g_mutex. Returns false with *why when the implementation cannot be known.
bool resolve_ifunc(Candidate *c, std::string *why) {
    void *handle = c->is_main ? dlopen(nullptr, RTLD_LAZY)
                              : dlopen(c->open_path.c_str(), RTLD_LAZY | RTLD_NOLOAD);
    void *target = nullptr;
    if (handle != nullptr) {
        target = c->version.empty() ? dlsym(handle, c->lookup.c_str())
                                    : dlvsym(handle, c->lookup.c_str(), c->version.c_str());
        dlclose(handle);
    }
    auto addr = reinterpret_cast<uint64_t>(target);
    bool inside = false;
    for (auto [start, end] : c->ranges) inside = inside || (addr >= start && addr < end);
    // A symbol that the object does not export (a local IFUNC) is either not found or found
    // in another object; its resolver's choice is then unknown.
    if (!inside) {
        if (why)
            *why = "IFUNC '" + c->display + "' in " + c->object +
                   " is not exported, so the implementation its resolver selected is unknown";
        return false;
    }
    c->addr = addr;
    return true;
}

// Among the candidates of one search, a definition other objects or compilation units can
// bind to (GLOBAL or WEAK) hides static ones of the same name, as it does for the static and
// dynamic linkers: "getpid" is libc's, not the private copy in ld.so's .symtab (visible when
// libc6-dbg is installed). Static definitions count only when nothing global has the name.
void prefer_global(std::vector<Candidate> *cands) {
    bool any =
        std::any_of(cands->begin(), cands->end(), [](const Candidate &c) { return c.global; });
    if (any) std::erase_if(*cands, [](const Candidate &c) { return !c.global; });
}

std::string list(const std::vector<Candidate> &cands) {
    std::string out;
    for (const Candidate &c : cands) {
        if (!out.empty()) out += ", ";
        out += c.object + ":" + c.display + " at " + hex(c.addr);
        if (c.ifunc) out += " (IFUNC resolver)";
    }
    return out;
}

}  // namespace

int resolve(std::string_view spec_text, uint64_t *addr, std::string *why) {
    names::Spec spec;
    if (!names::parse_spec(spec_text, &spec, why)) return -EINVAL;
    std::string normalized = names::normalize(spec.name);
    std::string name(spec.name);

    std::vector<Candidate> cands;
    {
        std::lock_guard lock(g_mutex);
        refresh();
        if (!spec.object.empty()) {
            bool any = false, own = false;
            std::string searched;
            for (Module &m : g_modules) {
                if (!names::object_matches(spec.object, m.path)) continue;
                if (m.is_own) {
                    own = true;
                    continue;
                }
                if (any) searched += ", ";
                searched += names::base_name(m.path);
                any = true;
                match_module(m, spec, normalized, &cands);
            }
            if (!any) {
                if (why)
                    *why = own ? "'" + std::string(spec.object) +
                                     "' is liveprobe's own object, which is never searched"
                               : "no loaded object matches '" + std::string(spec.object) + "'";
                return -ENOENT;
            }
            prefer_global(&cands);
            if (cands.empty()) {
                if (why) *why = "no symbol '" + name + "' in " + searched;
                return -ENOENT;
            }
        } else {
            // The main program first: a definition there wins, as with the dynamic linker.
            if (!g_modules.empty() && g_modules[0].is_main)
                match_module(g_modules[0], spec, normalized, &cands);
            if (cands.empty()) {
                for (Module &m : g_modules)
                    if (!m.is_main && !m.is_own) match_module(m, spec, normalized, &cands);
            }
            prefer_global(&cands);
            if (cands.empty()) {
                if (why) *why = "no symbol '" + name + "' in any loaded object";
                return -ENOENT;
            }
        }
    }

    // An IFUNC whose choice cannot be known still counts as a definition (at its resolver's
    // address) for ambiguity; only as the one candidate is it an error.
    std::string ifunc_why;
    for (Candidate &c : cands) {
        if (c.ifunc && resolve_ifunc(&c, &ifunc_why)) c.ifunc = false;
    }
    // Distinct addresses count, not names: two IFUNCs may select one implementation.
    std::vector<Candidate> distinct;
    for (Candidate &c : cands) {
        bool seen = std::any_of(distinct.begin(), distinct.end(),
                                [&](const Candidate &d) { return d.addr == c.addr; });
        if (!seen) distinct.push_back(std::move(c));
    }
    if (distinct.size() > 1) {
        if (why) *why = "symbol '" + std::string(spec_text) + "' is ambiguous: " + list(distinct);
        return -EINVAL;
    }
    if (distinct[0].ifunc) {
        if (why) *why = ifunc_why;
        return -ENOENT;
    }
    *addr = distinct[0].addr;
    return 0;
}

namespace {

// function_at under g_mutex.
std::optional<Function> function_at_locked(uint64_t addr, Module **module) {
    refresh();
    Module *m = module_at(addr);
    *module = m;
    if (m == nullptr) return std::nullopt;
    ElfObject *elf = tables(*m);
    if (elf == nullptr) return std::nullopt;
    uint64_t file_addr = addr - m->bias;
    Function f;
    f.object = m->path;
    if (const Symbol *s = elf->function_containing(file_addr)) {
        f.start = m->bias + s->value;
        f.end = f.start + s->size;
        f.name = s->name;
        if (const std::vector<uint32_t> *parts = elf->by_name(f.name + ".cold")) {
            for (uint32_t i : *parts) {
                const Symbol &c = elf->symbols()[i];
                if ((c.type == STT_FUNC || c.type == STT_GNU_IFUNC) && c.size > 0)
                    f.cold.emplace_back(m->bias + c.value, m->bias + c.value + c.size);
            }
        }
        return f;
    }
    uint64_t start = 0, end = 0;
    if (!elf->fde_range(file_addr, &start, &end)) return std::nullopt;
    f.start = m->bias + start;
    f.end = m->bias + end;
    f.from_eh_frame = true;
    // A sizeless symbol (hand-written assembly without .size) still names the FDE's function.
    if (const Symbol *s = elf->function_starting(start)) f.name = s->name;
    return f;
}

}  // namespace

std::string jump_slot_symbol(uint64_t got) {
    std::lock_guard lock(g_mutex);
    refresh();
    Module *m = module_at(got);
    if (m == nullptr) return {};
    ElfObject *elf = tables(*m);
    return elf ? elf->jump_slot_symbol(got - m->bias) : std::string();
}

bool object_loaded(std::string_view object) {
    std::lock_guard lock(g_mutex);
    refresh();
    for (const Module &m : g_modules)
        if (!m.is_own && names::object_matches(object, m.path)) return true;
    return false;
}

bool object_is_own(std::string_view object) {
    std::lock_guard lock(g_mutex);
    refresh();
    for (const Module &m : g_modules)
        if (m.is_own && names::object_matches(object, m.path)) return true;
    return false;
}

unsigned long long load_count() {
    unsigned long long adds = 0;
    dl_iterate_phdr(
        [](struct dl_phdr_info *info, size_t, void *data) {
            *static_cast<unsigned long long *>(data) = info->dlpi_adds;
            return 1;  // the first object says it
        },
        &adds);
    return adds;
}

bool object_at(uint64_t addr, std::string *open_path, std::string *path, uint64_t *bias) {
    std::lock_guard lock(g_mutex);
    refresh();
    Module *m = module_at(addr);
    if (m == nullptr) return false;
    *open_path = m->open_path;
    *path = m->path;
    *bias = m->bias;
    return true;
}

bool is_cold_part(std::string_view name) {
    name = name.substr(0, name.find('@'));
    if (name.size() > 14 && name.substr(name.size() - 14) == " [clone .cold]") return true;
    const size_t dot = name.rfind(".cold");
    if (dot == std::string_view::npos || dot == 0) return false;
    std::string_view rest = name.substr(dot + 5);  // "" or ".N"
    if (rest.empty()) return true;
    return rest.size() > 1 && rest[0] == '.' && rest.find_first_not_of("0123456789", 1) == std::string_view::npos;
}

bool returns_twice(std::string_view name) {
    name = name.substr(0, name.find('@'));
    if (name.substr(0, 5) == "__GI_") name.remove_prefix(5);
    static constexpr std::string_view kNames[] = {"setjmp",  "_setjmp",      "__setjmp",    "__sigsetjmp", "sigsetjmp",
                                                  "vfork",   "__vfork",      "__libc_vfork", "getcontext", "__getcontext",
                                                  "savectx", "__libc_sigsetjmp"};
    for (std::string_view n : kNames)
        if (name == n) return true;
    return false;
}

int function_entry(uint64_t addr, std::string *why) {
    std::lock_guard lock(g_mutex);
    refresh();
    Module *m = module_at(addr);
    ElfObject *elf = m ? tables(*m) : nullptr;
    if (elf == nullptr) return -1;
    const uint64_t file_addr = addr - m->bias;
    if (const Symbol *s = elf->function_starting(file_addr); s && is_cold_part(s->name)) {
        *why = fmt::format("{} is a cold part of a function (code it jumps to from inside, never called)",
                           s->name.substr(0, s->name.find('@')));
        return 0;
    }
    std::string cfa;
    const int r = elf->return_address_at_sp(file_addr, &cfa);
    if (r == 0)
        *why = fmt::format("the call frame information puts the frame at {} there, not rsp+8: the return address "
                           "is not at the stack pointer (not a function's entry)",
                           cfa);
    return r;
}

bool jump_is_return(uint64_t site, int dwarf_reg) {
    std::lock_guard lock(g_mutex);
    refresh();
    Module *m = module_at(site);
    ElfObject *elf = m ? tables(*m) : nullptr;
    return elf && dwarf_reg >= 0 && elf->return_address_register(site - m->bias) == dwarf_reg;
}

uint64_t padding_end(const Function &f) {
    std::lock_guard lock(g_mutex);
    refresh();
    Module *m = module_at(f.start);
    ElfObject *elf = m ? tables(*m) : nullptr;
    if (elf == nullptr || f.from_eh_frame || f.end <= f.start) return f.end;
    const uint64_t end = f.end - m->bias;
    uint64_t limit = std::min((end + 15) & ~uint64_t{15}, elf->next_function_start(end));
    for (uint64_t a = end; a < limit; ++a) {
        uint64_t s = 0, e = 0;
        if (elf->fde_range(a, &s, &e)) limit = a;
    }
    if (!m->contains(m->bias + limit - (limit > end ? 1 : 0))) return f.end;
    return m->bias + limit;
}

int code_address_stored(uint64_t from, uint64_t to) {
    std::lock_guard lock(g_mutex);
    refresh();
    Module *m = module_at(from);
    ElfObject *elf = m ? tables(*m) : nullptr;
    if (elf == nullptr || to <= from || module_at(to - 1) != m) return -1;
    return elf->stores_code_address(from - m->bias, to - m->bias);
}

std::optional<Function> function_at(uint64_t addr) {
    std::lock_guard lock(g_mutex);
    Module *m = nullptr;
    return function_at_locked(addr, &m);
}

std::string describe(uint64_t addr) {
    std::lock_guard lock(g_mutex);
    Module *m = nullptr;
    std::optional<Function> f = function_at_locked(addr, &m);
    // Symbol names stay as in the file (mangled), as the kernel's %pS prints them: short,
    // exact, and accepted back by resolve().
    if (f && !f->name.empty()) return f->name + "+" + hex(addr - f->start);
    if (m != nullptr) return std::string(names::base_name(m->path)) + "+" + hex(addr - m->bias);
    return hex(addr);
}

void forget_unloaded() {
    std::lock_guard lock(g_mutex);
    refresh();
}

void invalidate() {
    std::lock_guard lock(g_mutex);
    g_modules.clear();
    g_valid = false;
}

void lock_for_fork() { g_mutex.lock(); }
void unlock_after_fork() { g_mutex.unlock(); }

}  // namespace liveprobe::symbols

namespace liveprobe::symbols {

size_t symbolize(uint64_t addr, bool with_offset, bool return_address, char* buf, size_t n) {
    // Bounded: a thread that holds the tables (or a handler that interrupted this thread's own
    // lookup) costs at most 50 ms and an address printed raw.
    std::unique_lock lock(g_mutex, std::chrono::milliseconds(50));
    if (!lock.owns_lock() || n == 0) return 0;
    Module* m = nullptr;
    std::optional<Function> f = function_at_locked(return_address ? addr - 1 : addr, &m);
    if (!f || f->name.empty() || m == nullptr) return 0;
    std::string text = f->name;
    if (with_offset) text += "+" + hex(addr - f->start) + "/" + hex(f->end - f->start);
    if (!m->is_main) {
        std::string_view base = names::base_name(m->path);
        if (base.size() > 3 && base.substr(base.size() - 3) == ".so") base.remove_suffix(3);
        text += " [";
        text += base;
        text += "]";
    }
    size_t len = std::min(n, text.size());
    std::memcpy(buf, text.data(), len);
    return len;
}

}  // namespace liveprobe::symbols

namespace liveprobe::symbols {

int match(std::string_view pattern, std::vector<Match> *out, std::string *why) {
    out->clear();
    std::string object, glob(pattern);
    if (size_t colon = pattern.find(':'); colon != std::string_view::npos && pattern.substr(colon, 2) != "::") {
        object = std::string(pattern.substr(0, colon));
        glob = std::string(pattern.substr(colon + 1));
    }
    if (glob.empty()) {
        *why = "no function pattern after the object (write OBJECT:* for all of them)";
        return -EINVAL;
    }
    std::lock_guard lock(g_mutex);
    refresh();
    bool any_object = false;
    for (Module &m : g_modules) {
        if (m.is_own) continue;
        if (object.empty() ? !m.is_main : !names::object_matches(object, m.path)) continue;
        any_object = true;
        ElfObject *elf = tables(m);
        if (elf == nullptr) continue;
        std::string prefix = m.is_main && object.empty() ? "" : std::string(names::base_name(m.path)) + ":";
        std::map<uint64_t, Match> found;  // one per address
        for (const Symbol &sym : elf->symbols()) {
            if (sym.type != STT_FUNC || sym.size == 0) continue;
            std::string base = sym.name.substr(0, sym.name.find('@'));
            if (base == "_start" || base == "_init" || base == "_fini") continue;
            bool hit = fnmatch(glob.c_str(), base.c_str(), 0) == 0;
            if (!hit && base.rfind("_Z", 0) == 0) {
                std::string d = names::demangle(base.c_str());
                hit = !d.empty() && fnmatch(glob.c_str(), d.c_str(), 0) == 0;
            }
            if (!hit) continue;
            uint64_t addr = m.bias + sym.value;
            if (found.count(addr)) continue;
            // Not functions: cold parts, and anything entered with a frame already set up.
            std::string cfa;
            if (is_cold_part(base) || elf->return_address_at_sp(sym.value, &cfa) == 0) continue;
            const Symbol *best = elf->function_starting(sym.value);
            std::string name = best ? best->name.substr(0, best->name.find('@')) : base;
            found.emplace(addr, Match{addr, sym.size, prefix + name});
        }
        for (auto &[a, mt] : found) out->push_back(std::move(mt));
    }
    if (!any_object) {
        *why = object.empty() ? "no main program" : "no loaded object matches '" + object + "'";
        return -ENOENT;
    }
    std::sort(out->begin(), out->end(), [](const Match &a, const Match &b) { return a.addr < b.addr; });
    return 0;
}

}  // namespace liveprobe::symbols
