#include "trace/fetch.hpp"

#include "trace/handlers.hpp"

#include <sys/prctl.h>
#include <sys/uio.h>

#include <liveprobe/kprobes.h>

#include <cerrno>

#include "os/linux/raw_syscall.hpp"
#include "symbols/symbols.hpp"

namespace liveprobe::trace {
namespace {

size_t type_size(FetchType t)
{
    switch (t) {
    case FetchType::u8: case FetchType::s8: case FetchType::x8: return 1;
    case FetchType::u16: case FetchType::s16: case FetchType::x16: return 2;
    case FetchType::u32: case FetchType::s32: case FetchType::x32: return 4;
    default: return 8;
    }
}

bool load(uint64_t addr, size_t size, uint64_t *v) noexcept
{
    uint64_t x = 0;
    if (read_memory(addr, &x, size) != size) return false;
    *v = x;
    return true;
}

// The value of one FETCHARG into `out` (8 bytes, or kStringBytes for a string): false on a fault.
bool fetch_one(const FetchArg &a, const FetchContext &ctx, unsigned char *out) noexcept
{
    const auto *regs = reinterpret_cast<const uint64_t *>(ctx.regs);
    uint64_t v = 0;
    switch (a.base) {
    case FetchBase::reg: v = regs[a.n]; break;
    case FetchBase::arg:
        if (a.n <= 6) {
            static constexpr int kArgRegs[] = {14, 13, 12, 11, 9, 8};  // di si dx cx r8 r9 in pt_regs
            v = ctx.entry ? ctx.entry[a.n - 1] : regs[kArgRegs[a.n - 1]];
        } else {
            // Above the return address at the entry: the 7th argument at sp + 8.
            uint64_t sp = ctx.entry ? ctx.entry[6] : ctx.regs->sp;
            if (!load(sp + 8 * (a.n - 6), 8, &v)) return false;
        }
        break;
    case FetchBase::retval: v = ctx.regs->ax; break;
    case FetchBase::stack: v = ctx.regs->sp; break;
    case FetchBase::stack_n:
        if (!load(ctx.regs->sp + 8 * uint64_t{a.n}, 8, &v)) return false;
        break;
    case FetchBase::comm: {
        char name[17] = {};
        os::raw_syscall(SYS_prctl, PR_GET_NAME, reinterpret_cast<long>(name));
        zero_plain(out, kStringBytes);
        copy_plain(out, name, 16);
        return true;
    }
    case FetchBase::imm:
    case FetchBase::symbol: v = a.value; break;
    case FetchBase::param: return false;  // resolved into an argument before any probe is placed
    }
    bool string = a.type == FetchType::string;
    for (size_t i = 0; i < a.derefs.size(); ++i) {
        uint64_t at = v + static_cast<uint64_t>(a.derefs[i]);
        bool last = i + 1 == a.derefs.size();
        if (last && string) {  // the string is at the last address, not loaded from it
            v = at;
            break;
        }
        if (!load(at, last ? type_size(a.type) : 8, &v)) return false;
    }
    if (!string) {
        copy_plain(out, &v, 8);
        return true;
    }
    zero_plain(out, kStringBytes);
    size_t got = read_memory(v, out, kStringBytes - 1);
    if (got == 0) return false;
    size_t len = 0;
    while (len < got && out[len]) ++len;
    if (len == kStringBytes - 1) out[kStringBytes - 1] = 1;  // no NUL within: cut
    else zero_plain(out + len, kStringBytes - len);
    return true;
}

}  // namespace

size_t read_memory(uint64_t addr, void *dst, size_t n) noexcept
{
    if (n == 0 || addr + n < addr) return 0;
    // Split at the page boundary: a partial read stops at an iovec's edge.
    uint64_t page_end = (addr | 4095) + 1;
    struct iovec local = {dst, n};
    struct iovec remote[2] = {{reinterpret_cast<void *>(addr), n}, {nullptr, 0}};
    int count = 1;
    if (addr + n > page_end) {
        remote[0].iov_len = page_end - addr;
        remote[1] = {reinterpret_cast<void *>(page_end), n - (page_end - addr)};
        count = 2;
    }
    long r = os::raw_syscall(SYS_process_vm_readv, os::raw_getpid(), reinterpret_cast<long>(&local), 1,
                             reinterpret_cast<long>(remote), count, 0);
    return r < 0 ? 0 : static_cast<size_t>(r);
}

void fetch_all(const Spec &spec, const FetchContext &ctx, unsigned char *out) noexcept
{
    uint64_t faults = 0;
    size_t off = 8;
    for (size_t i = 0; i < spec.args.size(); ++i) {
        const FetchArg &a = spec.args[i];
        size_t size = a.type == FetchType::string ? kStringBytes : 8;
        if (!fetch_one(a, ctx, out + off)) {
            faults |= uint64_t{1} << i;
            zero_plain(out + off, size);
        }
        off += size;
    }
    copy_plain(out, &faults, 8);
}

int resolve_fetch_symbols(Spec *spec, std::string *why)
{
    for (FetchArg &a : spec->args) {
        if (a.base != FetchBase::symbol) continue;
        uint64_t addr = 0;
        std::string reason;
        if (symbols::resolve(a.symbol, &addr, &reason) < 0) {
            *why = "@" + a.symbol + ": " + reason;
            return -ENOENT;
        }
        a.value = addr;
    }
    return 0;
}

}  // namespace liveprobe::trace
