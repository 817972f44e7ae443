#include "trace/fetch.hpp"

#include "trace/handlers.hpp"

#include <sys/uio.h>

#include <liveprobe/kprobes.h>

#include <cerrno>

#include "arch/x86_64/value_home.hpp"
#include "core/thread_state.hpp"
#include "os/linux/raw_syscall.hpp"
#include "symbols/symbols.hpp"

namespace liveprobe::trace {
namespace {

size_t type_size(FetchType t)
{
    switch (t) {
    case FetchType::u8: case FetchType::s8: case FetchType::x8: return 1;
    case FetchType::u16: case FetchType::s16: case FetchType::x16: return 2;
    case FetchType::u32: case FetchType::s32: case FetchType::x32: case FetchType::f32: return 4;
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

// The integer argument n (1-based) at the entry: false when its stack word cannot be read.
bool argument(const FetchContext &ctx, uint32_t n, uint64_t *v) noexcept
{
    if (n <= 6) {
        static constexpr int kArgRegs[] = {14, 13, 12, 11, 9, 8};  // di si dx cx r8 r9 in pt_regs
        *v = ctx.entry ? ctx.entry[n - 1] : reinterpret_cast<const uint64_t *>(ctx.regs)[kArgRegs[n - 1]];
        return true;
    }
    // Above the return address at the entry: the 7th argument at sp + 8.
    const uint64_t sp = ctx.entry ? ctx.entry[6] : ctx.regs->sp;
    return load(sp + 8 * (n - 6), 8, v);
}

// The low 8 bytes of xmm i.
bool xmm_low(const FetchContext &ctx, uint32_t i, uint64_t *v) noexcept
{
    if (!ctx.xmm) return false;
    copy_plain(v, ctx.xmm + i * ctx.xmm_stride, 8);
    return true;
}

// A string at addr into out (kStringBytes): its last byte says whether it was cut.
bool read_string(uint64_t addr, unsigned char *out) noexcept
{
    zero_plain(out, kStringBytes);
    size_t got = read_memory(addr, out, kStringBytes - 1);
    if (got == 0) return false;
    size_t len = 0;
    while (len < got && out[len]) ++len;
    if (len == kStringBytes - 1) out[kStringBytes - 1] = kStringCut;  // no NUL within
    else zero_plain(out + len, kStringBytes - len);
    return true;
}

uint64_t base_value(const FetchArg &a, const FetchContext &ctx, bool *ok) noexcept;

// A typed value in memory (a load: its address is the last one, read there) or in a register
// (%REG): a variable at a source line (symbols/dwarf_lines.hpp).
bool fetch_typed_at(const FetchArg &a, const FetchContext &ctx, unsigned char *out, size_t room) noexcept
{
    bool ok = true;
    uint64_t v = base_value(a, ctx, &ok);
    if (!ok) return false;
    const size_t loads = a.derefs.empty() ? 0 : a.derefs.size() - 1;
    for (size_t i = 0; i < loads; ++i)
        if (!load(v + static_cast<uint64_t>(a.derefs[i]), 8, &v)) return false;
    uint64_t addr = 0;
    if (a.derefs.empty()) {  // in the register itself
        if (a.vt->kind == VKind::string) return v == 0 ? (out[kStringBytes - 1] = kStringNull, true) : read_string(v, out);
        if (a.vt->kind == VKind::reference) {
            addr = v;
        } else {
            copy_plain(out, &v, a.image < 8 ? a.image : 8);
            return true;
        }
    } else {
        addr = v + static_cast<uint64_t>(a.derefs.back());
        // A pointer variable whose value is what is shown: the string or referent it points at.
        if (a.vt->kind == VKind::string || a.vt->kind == VKind::reference) {
            if (!load(addr, 8, &addr)) return false;
            if (a.vt->kind == VKind::string) return addr == 0 ? (out[kStringBytes - 1] = kStringNull, true) : read_string(addr, out);
        }
    }
    const size_t n = a.image < room ? a.image : room;
    return read_memory(addr, out, n) == n;
}

// A value of a type from DWARF into out (arg_bytes(a)): its image, from the registers its
// home says ($retval; a parameter: its first register is the argument's or %xmmN), or from
// memory (a reference's referent, a string, a value returned in memory).
bool fetch_typed(const FetchArg &a, const FetchContext &ctx, unsigned char *out) noexcept
{
    using arch::ValueClass;
    const size_t room = arg_bytes(a);
    zero_plain(out, room);
    const auto home = static_cast<ValueClass>(a.home);
    const VKind kind = a.vt->kind;
    uint64_t w[2] = {0, 0};
    // The first eightbyte, and the second: from the integer registers in turn (rax, rdx at a
    // return; the argument's and the next), from the vector registers in turn.
    uint32_t next_int = 0, next_sse = 0;
    auto take = [&](bool sse, uint64_t *v) noexcept {
        if (a.base == FetchBase::retval) {
            if (sse) return xmm_low(ctx, next_sse++, v);
            *v = next_int++ == 0 ? ctx.regs->ax : ctx.regs->dx;
            return true;
        }
        if (sse || a.base == FetchBase::xmm) return xmm_low(ctx, a.n + next_sse++, v);
        return argument(ctx, a.n + next_int++, v);
    };
    if (!a.derefs.empty() || a.base == FetchBase::reg) return fetch_typed_at(a, ctx, out, room);
    bool ok = true;
    switch (home) {
    case ValueClass::none: return true;
    case ValueClass::integer: ok = take(a.base == FetchBase::xmm, &w[0]); break;
    case ValueClass::sse: ok = take(true, &w[0]); break;
    case ValueClass::int_int: ok = take(false, &w[0]) && take(false, &w[1]); break;
    case ValueClass::sse_sse: ok = take(true, &w[0]) && take(true, &w[1]); break;
    case ValueClass::int_sse: ok = take(false, &w[0]) && take(true, &w[1]); break;
    case ValueClass::sse_int: ok = take(true, &w[0]) && take(false, &w[1]); break;
    case ValueClass::x87:
        if (a.base != FetchBase::retval || !ctx.st) return false;
        copy_plain(out, ctx.st, 10);
        return true;
    case ValueClass::memory:
        if (a.base != FetchBase::retval) return false;  // on the stack: not placed (symbols/dwarf_params.cpp)
        w[0] = ctx.regs->ax;  // the callee returns the address it was given
        break;
    }
    if (!ok) return false;
    if (kind == VKind::string) return w[0] == 0 ? (out[kStringBytes - 1] = kStringNull, true) : read_string(w[0], out);
    if (kind == VKind::reference || home == ValueClass::memory) {
        const size_t n = a.image < room ? a.image : room;
        return read_memory(w[0], out, n) == n;
    }
    const size_t n = a.image < sizeof w ? a.image : sizeof w;  // two eightbytes at most
    copy_plain(out, w, n < room ? n : room);
    return true;
}

// The value of one FETCHARG into `out` (8 bytes, or kStringBytes for a string): false on a fault.
// (Inlined: fetch_value, which the filters call, is then as deep as fetch_all for the prover.)
[[gnu::always_inline]] inline bool fetch_one(const FetchArg &a, const FetchContext &ctx, unsigned char *out) noexcept
{
    if (a.type == FetchType::typed) return fetch_typed(a, ctx, out);
    const auto *regs = reinterpret_cast<const uint64_t *>(ctx.regs);
    uint64_t v = 0;
    switch (a.base) {
    case FetchBase::reg: v = regs[a.n]; break;
    case FetchBase::arg:
        if (!argument(ctx, a.n, &v)) return false;
        break;
    case FetchBase::xmm:
        if (!xmm_low(ctx, a.n, &v)) return false;
        break;
    case FetchBase::retval:  // a float or a double comes back in xmm0
        if ((a.type == FetchType::f32 || a.type == FetchType::f64) && !xmm_low(ctx, 0, &v)) return false;
        if (a.type != FetchType::f32 && a.type != FetchType::f64) v = ctx.regs->ax;
        break;
    case FetchBase::stack: v = ctx.regs->sp; break;
    case FetchBase::stack_n:
        if (!load(ctx.regs->sp + 8 * uint64_t{a.n}, 8, &v)) return false;
        break;
    case FetchBase::comm: {
        char name[17];
        os::raw_thread_name(name);
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
    return read_string(v, out);
}

// The value a typed fetch's base names (a register, an argument, $stack...).
uint64_t base_value(const FetchArg &a, const FetchContext &ctx, bool *ok) noexcept
{
    const auto *regs = reinterpret_cast<const uint64_t *>(ctx.regs);
    uint64_t v = 0;
    switch (a.base) {
    case FetchBase::reg: return regs[a.n];
    case FetchBase::arg: *ok = argument(ctx, a.n, &v); return v;
    case FetchBase::xmm: *ok = xmm_low(ctx, a.n, &v); return v;
    case FetchBase::retval: return ctx.regs->ax;
    case FetchBase::stack: return ctx.regs->sp;
    case FetchBase::stack_n: *ok = load(ctx.regs->sp + 8 * uint64_t{a.n}, 8, &v); return v;
    case FetchBase::imm:
    case FetchBase::symbol: return a.value;
    default: *ok = false; return 0;
    }
}

}  // namespace

bool fetch_value(const FetchArg &a, const FetchContext &ctx, uint64_t *v) noexcept
{
    // Never in an expression (filter.cpp), and out of the code the prover follows from here.
    if (a.type == FetchType::typed || a.type == FetchType::string || a.base == FetchBase::comm) return false;
    union {
        unsigned char bytes[8];
        uint64_t word;
    } out{};
    if (!fetch_one(a, ctx, out.bytes)) return false;
    *v = out.word;
    return true;
}

void fetch_fpregs(FetchContext *ctx) noexcept
{
    const core::ThreadRecord *rec = core::tl_rec;
    if (!rec) return;
    ctx->xmm = rec->saved_xmm;
    ctx->xmm_stride = rec->saved_xmm_stride;
    ctx->st = rec->saved_st;
}

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
        size_t size = arg_bytes(a);
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
