#include "core/unwinder_hooks.hpp"
#include "core/immortal.hpp"

#include <link.h>

#include <deque>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "arch/x86_64/exits.hpp"
#include "core/kretprobe.hpp"
#include "core/registry.hpp"
#include "symbols/symbols.hpp"

namespace liveprobe::core {
namespace {

enum class Kind { kWalker, kThrow, kCatch };

struct Target {
    const char *spec;
    Kind kind;
};

constexpr Target kTargets[] = {
    {"libgcc_s.so.1:_Unwind_Backtrace", Kind::kWalker},
    {"libunwind.so.8:_Unwind_Backtrace", Kind::kWalker},
    {"libunwind.so.8:unw_backtrace", Kind::kWalker},
    {"libgcc_s.so.1:_Unwind_RaiseException", Kind::kThrow},
    {"libgcc_s.so.1:_Unwind_Resume", Kind::kThrow},
    {"libgcc_s.so.1:_Unwind_Resume_or_Rethrow", Kind::kThrow},
    {"libgcc_s.so.1:_Unwind_ForcedUnwind", Kind::kThrow},
    // libunwind's own _Unwind_* (a program linked with -lunwind throws through them).
    {"libunwind.so.8:_Unwind_RaiseException", Kind::kThrow},
    {"libunwind.so.8:_Unwind_Resume", Kind::kThrow},
    {"libunwind.so.8:_Unwind_Resume_or_Rethrow", Kind::kThrow},
    {"libunwind.so.8:_Unwind_ForcedUnwind", Kind::kThrow},
    {"libstdc++.so.6:__cxa_begin_catch", Kind::kCatch},
};

std::mutex g_mu;
Immortal<std::deque<struct kprobe>> g_probes_storage;
std::deque<struct kprobe> &g_probes = g_probes_storage.value;  // never unregistered: stable addresses
Immortal<std::set<uint64_t>> g_done_storage;
std::set<uint64_t> &g_done = g_done_storage.value;  // function entries probed (or found unprobeable)
unsigned long long g_seen_loads = ~0ull;

unsigned long long objects_loaded()
{
    unsigned long long adds = 0;
    dl_iterate_phdr(
        [](struct dl_phdr_info *info, size_t size, void *data) {
            if (size >= offsetof(struct dl_phdr_info, dlpi_adds) + sizeof info->dlpi_adds)
                *static_cast<unsigned long long *>(data) = info->dlpi_adds;
            return 1;
        },
        &adds);
    return adds;
}

// Whether the function at `target` (a PLT stub, typically) is one of libc's that never return.
bool never_returns(uint64_t target)
{
    static const std::set<std::string> &names = *new std::set<std::string>{"abort", "__stack_chk_fail", "__assert_fail", "__libc_fatal",
                                                 "exit", "_exit", "__fortify_fail", "__chk_fail"};
    std::string name;
    if (uint64_t got = arch::plt_got_slot(target)) {
        name = symbols::jump_slot_symbol(got);
    } else if (std::optional<symbols::Function> fn = symbols::function_at(target); fn && fn->start == target) {
        name = fn->name;
    }
    if (size_t at = name.find('@'); at != std::string::npos) name.resize(at);
    return names.count(name) != 0;
}

struct kprobe *new_probe(uint64_t addr, kprobe_pre_handler_t pre)
{
    struct kprobe &kp = g_probes.emplace_back();
    kp.addr = reinterpret_cast<kprobe_opcode_t *>(addr);
    kp.pre_handler = pre;
    kp.flags = KPROBE_FLAG_NOVEC;  // kret_unwind.cpp has no vector instruction
    return &kp;
}

void hook(const Target &t)
{
    uint64_t addr = 0;
    std::string why;
    if (symbols::resolve(t.spec, &addr, &why) != 0 || g_done.count(addr)) return;
    g_done.insert(addr);
    std::vector<struct kprobe *> kps;
    switch (t.kind) {
    case Kind::kWalker: {
        std::optional<symbols::Function> fn = symbols::function_at(addr);
        if (!fn || fn->start != addr) return;
        std::vector<uint64_t> rets;
        if (arch::function_returns(fn->start, reinterpret_cast<const uint8_t *>(fn->start), fn->end - fn->start,
                                   never_returns, &rets))
            return;
        kps.push_back(new_probe(addr, kret_walk_enter));
        for (uint64_t r : rets) kps.push_back(new_probe(r, kret_walk_exit));
        break;
    }
    case Kind::kThrow:
        kps.push_back(new_probe(addr, kret_throw_enter));
        break;
    case Kind::kCatch:
        kps.push_back(new_probe(addr, kret_catch_enter));
        break;
    }
    (void)register_probes(kps.data(), static_cast<int>(kps.size()), true);
}

}  // namespace

void hook_unwinders()
{
    std::lock_guard lk(g_mu);
    unsigned long long loads = objects_loaded();
    if (loads == g_seen_loads) return;
    g_seen_loads = loads;
    for (const Target &t : kTargets) hook(t);
}

}  // namespace liveprobe::core
