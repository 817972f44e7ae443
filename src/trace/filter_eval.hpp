// The evaluation of filter.hpp's expressions, on the hit path: inline, compiled into
// trace/handlers.cpp's handlers (-mgeneral-regs-only, no jump tables, no loop made a memcpy
// call), so that the engine's prover, which follows calls two levels deep, sees the fetches
// it makes as deep as fetch_all's, and proves the handlers free of vector instructions. No
// allocation, no lock; a fixed stack of kMaxStack values and at most kMaxInsns steps (the
// parser bounds both).
#pragma once

#include <sys/syscall.h>

#include <liveprobe/kprobes.h>

#include "os/linux/raw_syscall.hpp"
#include "trace/filter.hpp"

namespace liveprobe::trace::eval {

inline int64_t extend(uint64_t v, const Insn &insn) noexcept
{
    if (insn.width >= 8) return static_cast<int64_t>(v);
    const unsigned bits = 8u * insn.width;
    const uint64_t mask = (uint64_t{1} << bits) - 1;
    v &= mask;
    if (insn.sign && (v >> (bits - 1)) != 0) v |= ~mask;
    return static_cast<int64_t>(v);
}

inline bool comm_is(const std::array<char, 16> &name) noexcept
{
    char now[17];
    os::raw_thread_name(now);
    for (size_t i = 0; i < 16; ++i) {
        if (now[i] != name[i]) return false;
        if (now[i] == 0) return true;
    }
    return true;
}

// a OP b, wrapping as unsigned arithmetic does (no signed overflow, no trap).
inline int64_t binary(Op op, int64_t a, int64_t b) noexcept
{
    const auto ua = static_cast<uint64_t>(a), ub = static_cast<uint64_t>(b);
    switch (op) {
    case Op::mul: return static_cast<int64_t>(ua * ub);
    case Op::div: return b == 0 ? 0 : b == -1 ? static_cast<int64_t>(0 - ua) : a / b;
    case Op::mod: return b == 0 || b == -1 ? 0 : a % b;
    case Op::add: return static_cast<int64_t>(ua + ub);
    case Op::sub: return static_cast<int64_t>(ua - ub);
    case Op::shl: return static_cast<int64_t>(ua << (ub & 63));
    case Op::shr: return a >> (ub & 63);
    case Op::lt: return a < b;
    case Op::le: return a <= b;
    case Op::gt: return a > b;
    case Op::ge: return a >= b;
    case Op::eq: return a == b;
    case Op::ne: return a != b;
    case Op::band: return a & b;
    case Op::bxor: return a ^ b;
    case Op::bor: return a | b;
    case Op::land: return a != 0 && b != 0;
    case Op::lor: return a != 0 || b != 0;
    default: return 0;
    }
}

}  // namespace liveprobe::trace::eval

namespace liveprobe::trace {

// The value of e: false if an operand could not be read.
[[gnu::always_inline]] inline bool eval_expr(const Expr &e, const EvalContext &ctx, int64_t *v) noexcept
{
    int64_t st[kMaxStack];
    uint32_t n = 0;
    const Insn *code = e.code.data();
    for (size_t k = 0, end = e.code.size(); k < end; ++k) {
        const Insn &insn = code[k];
        switch (insn.op) {
        case Op::imm: st[n++] = insn.imm; break;
        case Op::fetch: {
            uint64_t raw = 0;
            if (!fetch_value(e.fetches.data()[insn.arg], ctx.fetch, &raw)) return false;
            st[n++] = eval::extend(raw, insn);
            break;
        }
        case Op::retval: st[n++] = eval::extend(ctx.fetch.regs->ax, insn); break;
        case Op::duration: st[n++] = static_cast<int64_t>(ctx.duration); break;
        case Op::tid: st[n++] = ctx.tid ? static_cast<int64_t>(ctx.tid) : os::raw_gettid(); break;
        case Op::pid: st[n++] = os::raw_getpid(); break;
        case Op::caller: st[n++] = static_cast<int64_t>(ctx.caller); break;
        case Op::comm_eq: st[n++] = eval::comm_is(e.strings.data()[insn.arg]); break;
        case Op::neg: st[n - 1] = static_cast<int64_t>(0 - static_cast<uint64_t>(st[n - 1])); break;
        case Op::lnot: st[n - 1] = st[n - 1] == 0; break;
        case Op::bnot: st[n - 1] = ~st[n - 1]; break;
        default:
            --n;
            st[n - 1] = eval::binary(insn.op, st[n - 1], st[n]);
            break;
        }
    }
    *v = n ? st[0] : 0;
    return true;
}

}  // namespace liveprobe::trace
