// jprobes: a handler with the probed function's own prototype, called at its entry with the
// same arguments (registers and at least 64 bytes of stack), whose changes to them do not
// reach the probed function (it gets copies). Ends with jprobe_return().
//
// A jprobe is a kprobe at a function's entry whose pre handler (jprobe_pre) calls the entry
// through lp_jprobe_call (arch/x86_64/jprobe_call.S). The registry orders it after every other
// kprobe at the address. The vector arguments come from where the dispatcher saved the vector
// state (ThreadRecord::saved_xmm): the live registers may have been used by the other pre
// handlers that ran first, and on the breakpoint path they are the signal handler's.
#include "core/jprobe.hpp"
#include "core/immortal.hpp"

#include <cerrno>
#include <mutex>
#include <unordered_map>

#include "core/error.hpp"
#include "core/registry.hpp"

namespace liveprobe::core {
namespace {

std::mutex g_mu;
Immortal<std::unordered_map<uint64_t, struct jprobe *>> g_by_addr_storage;
std::unordered_map<uint64_t, struct jprobe *> &g_by_addr = g_by_addr_storage.value;  // one jprobe per address
Immortal<std::unordered_map<const struct jprobe *, uint64_t>> g_addr_of_storage;
std::unordered_map<const struct jprobe *, uint64_t> &g_addr_of = g_addr_of_storage.value;

}  // namespace

Status register_jprobe(struct jprobe *jp)
{
    if (!jp) return Fail(-EINVAL, "the jprobe pointer is NULL");
    if (!jp->entry) return Fail(-EINVAL, "jprobe entry is NULL");
    struct kprobe &kp = jp->kp;
    if (Status s = check_no_handlers(kp, "a jprobe"); !s.ok()) return s;
    uint64_t addr = 0;
    if (Status s = check_function_entry(kp, "a jprobe", &addr); !s.ok()) return s;
    std::lock_guard lk(g_mu);  // before the registry's mutex
    if (g_addr_of.count(jp)) return Fail(-EINVAL, "this jprobe is already registered");
    if (g_by_addr.count(addr)) return Fail(-EBUSY, "there is already a jprobe at {:#x}", addr);
    kp.pre_handler = jprobe_pre;
    if (Status s = register_probe(&kp); !s.ok()) {
        kp.pre_handler = nullptr;
        return s;
    }
    g_by_addr[addr] = jp;
    g_addr_of[jp] = addr;
    return Status::Ok();
}

void unregister_jprobe(struct jprobe *jp)
{
    {
        std::lock_guard lk(g_mu);
        auto it = g_addr_of.find(jp);
        if (it == g_addr_of.end()) return;
        g_by_addr.erase(it->second);
        g_addr_of.erase(it);
    }
    unregister_probe(&jp->kp);
    jp->kp.pre_handler = nullptr;
}

}  // namespace liveprobe::core

using namespace liveprobe;

extern "C" {

int register_jprobe(struct jprobe *jp) { return record(core::register_jprobe(jp)); }

void unregister_jprobe(struct jprobe *jp)
{
    if (jp) core::unregister_jprobe(jp);
}

}  // extern "C"
