#include "core/probe_address.hpp"

#include <dlfcn.h>
#include <link.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/optimizer.hpp"
#include "os/linux/code_alloc.hpp"
#include "os/linux/signals.hpp"
#include "symbols/symbols.hpp"

namespace liveprobe::core {
namespace {

struct SelfRange {
    uint64_t lo = 0, hi = 0;
};

// The text of liveprobe's own object: probing it would recurse into the hit path.
SelfRange self_range()
{
    static SelfRange r = [] {
        SelfRange out;
        Dl_info info;
        if (!dladdr(reinterpret_cast<void *>(&self_range), &info)) return out;
        struct Ctx {
            uint64_t base;
            SelfRange *r;
        } ctx{reinterpret_cast<uint64_t>(info.dli_fbase), &out};
        dl_iterate_phdr(
            [](struct dl_phdr_info *i, size_t, void *data) {
                auto *c = static_cast<Ctx *>(data);
                uint64_t lo = UINT64_MAX, hi = 0;
                for (int k = 0; k < i->dlpi_phnum; ++k) {
                    const auto &ph = i->dlpi_phdr[k];
                    if (ph.p_type != PT_LOAD) continue;
                    lo = std::min<uint64_t>(lo, i->dlpi_addr + ph.p_vaddr);
                    hi = std::max<uint64_t>(hi, i->dlpi_addr + ph.p_vaddr + ph.p_memsz);
                }
                if (c->base >= lo && c->base < hi) {
                    c->r->lo = lo;
                    c->r->hi = hi;
                    return 1;
                }
                return 0;
            },
            &ctx);
        return out;
    }();
    return r;
}

}  // namespace

Status check_region(uint64_t addr, const os::MapsSnapshot &maps, std::string *object)
{
    SelfRange self = self_range();
    if (addr >= self.lo && addr < self.hi)
        return Fail(-EINVAL, "{:#x} is inside liveprobe itself ({})", addr, symbols::describe(addr));
    if (os::is_liveprobe_code(addr))
        return Fail(-EINVAL, "{:#x} is inside liveprobe's own out-of-line code", addr);
    uint64_t restorer = os::signal_restorer();
    if (restorer && addr >= restorer && addr < restorer + 16)
        return Fail(-EINVAL,
                    "{:#x} is on the blacklist: it is the signal-return trampoline "
                    "(__restore_rt), which liveprobe's own breakpoint path returns through",
                    addr);
    const os::Mapping *m = maps.at(addr);
    if (!m) return Fail(-EINVAL, "{:#x} is not mapped in this process", addr);
    if (!m->x)
        return Fail(-EINVAL, "{:#x} is not in executable code (mapping {:#x}-{:#x} {} is not executable)",
                    addr, m->start, m->end, m->path.empty() ? "[anonymous]" : m->path);
    if (m->path == "[vdso]" || m->path == "[vsyscall]")
        return Fail(-EINVAL, "{:#x} is on the blacklist: the {} is kernel-provided code shared by every process", addr, m->path);
    *object = m->path;
    return Status::Ok();
}

// Decodes from the start of the function containing addr, with the original bytes under
// liveprobe's own int3s, and checks that addr starts an instruction; then decodes it.
Status check_instruction(uint64_t addr, const os::MapsSnapshot &maps, const std::map<uint64_t, ProbePoint *> &points,
                         arch::Insn &insn)
{
    auto fn = symbols::function_at(addr);
    if (!fn)
        return Fail(-EILSEQ,
                    "no function covers {:#x} (no symbol and no .eh_frame FDE), so liveprobe "
                    "cannot verify that it is an instruction boundary",
                    addr);
    const os::Mapping *m = maps.at(addr);
    uint64_t end = std::min<uint64_t>(addr + arch::kMaxInsnLen, m ? m->end : addr + 1);
    if (end <= fn->start || !maps.at(fn->start)) return Fail(-EILSEQ, "bad function bounds for {:#x}", addr);
    std::vector<uint8_t> code = original_code(fn->start, end, points);

    uint64_t at = fn->start;
    while (at < addr) {
        size_t len = arch::insn_length(code.data() + (at - fn->start), end - at);
        if (len == 0)
            return Fail(-EILSEQ, "cannot decode the instruction at {:#x} ({}) while walking to {:#x}",
                        at, symbols::describe(at), addr);
        if (at + len > addr) {
            return Fail(-EILSEQ, "{:#x} is not on an instruction boundary: it is inside the {}-byte instruction at {}",
                        addr, len, symbols::describe(at));
        }
        at += len;
    }
    const char *why = nullptr;
    int err = arch::decode(addr, code.data() + (addr - fn->start), end - addr, insn, &why);
    if (err == -EOPNOTSUPP)
        return Fail(-EOPNOTSUPP, "the instruction at {} cannot be probed: {}", symbols::describe(addr), why ? why : "unsupported");
    if (err != 0)
        return Fail(-EILSEQ, "cannot decode the instruction at {}: {}", symbols::describe(addr), why ? why : "invalid");
    return Status::Ok();
}

Status resolve_address(struct kprobe *p, uint64_t *out)
{
    if ((p->addr && p->symbol_name) || (!p->addr && !p->symbol_name))
        return p->addr ? Fail(-EINVAL, "both addr and symbol_name are set; set one of them")
                       : Fail(-EINVAL, "neither addr nor symbol_name is set");
    uint64_t addr = reinterpret_cast<uint64_t>(p->addr);
    if (p->symbol_name) {
        std::string why;
        int err = symbols::resolve(p->symbol_name, &addr, &why);
        if (err != 0) return Status{err, why};
    }
    *out = addr + p->offset;
    return Status::Ok();
}


Status check_no_handlers(const struct kprobe &kp, const char *what)
{
    if (kp.pre_handler || kp.post_handler || kp.fault_handler)
        return Fail(-EINVAL, "{}'s kp must have no handlers of its own (liveprobe sets kp.pre_handler)", what);
    return Status::Ok();
}

Status check_function_entry(const struct kprobe &kp, const char *what, uint64_t *out)
{
    if ((kp.addr && kp.symbol_name) || (!kp.addr && !kp.symbol_name))
        return Fail(-EINVAL, "{}", kp.addr ? "both kp.addr and kp.symbol_name are set; set one of them"
                                           : "neither kp.addr nor kp.symbol_name is set");
    uint64_t addr = reinterpret_cast<uint64_t>(kp.addr);
    if (kp.symbol_name) {
        std::string why;
        if (int err = symbols::resolve(kp.symbol_name, &addr, &why); err != 0) return Status{err, why};
    }
    addr += kp.offset;
    auto fn = symbols::function_at(addr);
    if (!fn || fn->start != addr)
        return Fail(-EINVAL, "{} must be at a function's entry; {:#x} is {}", what, addr,
                    fn ? fmt::format("{}+{:#x}", fn->name.empty() ? "inside a function" : fn->name, addr - fn->start)
                       : std::string("in no known function"));
    if (symbols::returns_twice(fn->name))
        return Fail(-EINVAL,
                    "{} cannot be at {}: it returns twice (setjmp's family, vfork, getcontext), and the second return "
                    "would find no record of the first",
                    what, fn->name);
    // A symbol's start that is no entry: a function's cold part (GCC jumps there from inside
    // the function), or code whose call frame information has a frame set up. What a return
    // probe would replace there is not a return address.
    if (std::string why; symbols::function_entry(addr, &why) == 0)
        return Fail(-EINVAL, "{} must be at a function's entry; {:#x} is not: {}", what, addr, why);
    if (out) *out = addr;
    return Status::Ok();
}

}  // namespace liveprobe::core
