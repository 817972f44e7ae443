// The operands of filter.hpp's expressions resolved for one function: parameters by name and
// the return value's type from its DWARF (params.hpp), @SYM's address; each operand then read
// as an integer of its width and sign.
#include <cerrno>

#include <fmt/format.h>

#include "trace/fetch.hpp"
#include "trace/filter.hpp"
#include "trace/params.hpp"

namespace liveprobe::trace {
namespace {

// A DWARF type descriptor as an integer's width and sign: false if it is no integer.
bool int_desc(const std::string &desc, uint8_t *width, bool *sign)
{
    const VType &t = *parse_vtype(desc);
    switch (t.kind) {
    case VKind::boolean:
    case VKind::character:
    case VKind::sint:
    case VKind::uint:
    case VKind::pointer:
    case VKind::string:
    case VKind::enumeration: break;
    default: return false;
    }
    if (t.size == 0 || t.size > 8) return false;
    *width = static_cast<uint8_t>(t.size);
    *sign = t.kind == VKind::sint || t.kind == VKind::character || (t.kind == VKind::enumeration && desc[0] == 'E');
    return true;
}

}  // namespace

int resolve_expr(Expr *e, SpecKind kind, uint64_t entry, std::string *why)
{
    if (e->at_return && kind == SpecKind::probe) {
        *why = "retval and duration are known at a return (FUNC, r:), not at an instruction (p:, FUNC+OFF)";
        return -EINVAL;
    }
    // The fetches, and a return value to be typed, resolved as a spec's (params.hpp).
    Spec s;
    s.kind = kind == SpecKind::probe ? SpecKind::probe : SpecKind::ret;
    s.args = e->fetches;
    FetchArg ret;
    ret.base = FetchBase::retval;
    s.args.push_back(ret);
    if (int r = resolve_fetch_symbols(&s, why); r < 0) return r;
    if (int r = resolve_params(&s, entry, false, why); r < 0) return r;
    for (Insn &insn : e->code) {
        if (insn.op != Op::fetch && insn.op != Op::retval) continue;
        const FetchArg &a = insn.op == Op::fetch ? s.args[insn.arg] : s.args.back();
        if (a.type != FetchType::typed || insn.typed) continue;
        if (!int_desc(a.desc, &insn.width, &insn.sign)) {
            *why = fmt::format("'{}' is not an integer (its type: {{{}}})", insn.op == Op::fetch ? a.name : "retval", a.desc);
            return -EINVAL;
        }
    }
    s.args.pop_back();
    for (const FetchArg &a : s.args)
        if (a.base == FetchBase::xmm) {
            *why = fmt::format("'{}' is in a vector register: a floating-point value is not in expressions", a.name);
            return -EINVAL;
        }
    // Each fetch read as its insn's width says (a load from memory reads that many bytes).
    for (const Insn &insn : e->code)
        if (insn.op == Op::fetch) {
            FetchArg &a = s.args[insn.arg];
            a.type = insn.width == 1 ? FetchType::u8 : insn.width == 2 ? FetchType::u16 : insn.width == 4 ? FetchType::u32 : FetchType::u64;
            a.vt.reset();
            a.desc.clear();
        }
    e->fetches = std::move(s.args);
    return 0;
}

}  // namespace liveprobe::trace
