// The C API of <liveprobe/kprobes.h>: argument checks, error recording, and the registry.
#include <liveprobe/kprobes.h>

#include <vector>

#include <cerrno>
#include <string>

#include "core/error.hpp"
#include "core/registry.hpp"
#include "core/thread_state.hpp"
#include "symbols/symbols.hpp"

using namespace liveprobe;

extern "C" {

int register_kprobe(struct kprobe *p) { return record(core::register_probe(p)); }

void unregister_kprobe(struct kprobe *p)
{
    if (p) core::unregister_probe(p);
}

int register_kprobes(struct kprobe **kps, int num)
{
    if (!kps || num <= 0) return record(Fail(-EINVAL, "no kprobes to register (kps={}, num={})", fmt::ptr(kps), num));
    return record(core::register_probes(kps, num));
}

int liveprobe_register_kprobes_each(struct kprobe **kps, int num, int *results)
{
    if (!kps || !results || num <= 0)
        return record(Fail(-EINVAL, "no kprobes to register (kps={}, results={}, num={})", fmt::ptr(kps),
                           fmt::ptr(results), num));
    std::vector<Status> each(static_cast<size_t>(num));
    core::register_probes_each(kps, num, each.data());
    return core::tally_outcomes(each, results);
}

void unregister_kprobes(struct kprobe **kps, int num)
{
    for (int i = 0; kps && i < num; ++i)
        if (kps[i]) core::unregister_probe(kps[i]);
}

int disable_kprobe(struct kprobe *p)
{
    if (!p) return record(Fail(-EINVAL, "the kprobe pointer is NULL"));
    return record(core::set_enabled(p, false));
}

int enable_kprobe(struct kprobe *p)
{
    if (!p) return record(Fail(-EINVAL, "the kprobe pointer is NULL"));
    return record(core::set_enabled(p, true));
}

unsigned long kallsyms_lookup_name(const char *name)
{
    if (!name) return 0;
    uint64_t addr = 0;
    std::string why;
    if (symbols::resolve(name, &addr, &why) != 0) return 0;
    return addr;
}

int liveprobe_kprobe_info(const struct kprobe *p, struct liveprobe_info *out)
{
    if (!p || !out) return record(Fail(-EINVAL, "NULL argument"));
    core::ProbeCounters c;
    if (!core::probe_counters(p, &c)) return record(Fail(-EINVAL, "this struct kprobe is not registered"));
    out->hits = c.hits;
    out->nmissed = c.nmissed;
    out->optimized = c.optimized;
    out->why_not_optimized = c.why_not;
    return 0;
}

unsigned long liveprobe_kprobe_faults(const struct kprobe *p)
{
    core::ProbeCounters c;
    if (!p || !core::probe_counters(p, &c)) return 0;
    return c.faults;
}

int liveprobe_get_fpregs(struct liveprobe_fpregs *out)
{
    core::ThreadRecord *rec = core::tl_rec;
    if (!out || !rec || !rec->saved_xmm || !rec->in_handler) return -ENODATA;
    out->xmm = rec->saved_xmm;
    out->xmm_stride = rec->saved_xmm_stride;
    out->st = rec->saved_st;
    return 0;
}

void liveprobe_set_optimization(int enabled) { core::set_optimization(enabled != 0); }

const char *liveprobe_strerror(int err) { return last_reason(err); }

}  // extern "C"
