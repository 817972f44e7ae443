#include "trace/params.hpp"

#include <cerrno>
#include <vector>

#include <fmt/format.h>

#include "arch/x86_64/value_home.hpp"
#include "symbols/dwarf_params.hpp"

namespace liveprobe::trace {
namespace {

// A fetch of a value whose type comes from DWARF: `desc` parsed into a.
void set_typed(FetchArg &a, const std::string &desc)
{
    a.type = FetchType::typed;
    a.desc = desc;
    a.vt = parse_vtype(desc);
    a.home = static_cast<uint8_t>(arch::classify(*a.vt));
    a.image = image_bytes(*a.vt);
}

}  // namespace

int resolve_params(Spec *spec, uint64_t entry, bool events, std::string *why)
{
    bool wants_ret = events && spec->kind == SpecKind::call && spec->args.empty();
    bool by_name = false;
    for (const FetchArg &a : spec->args) {
        by_name = by_name || a.base == FetchBase::param;
        wants_ret = wants_ret || (a.base == FetchBase::retval && !a.typed && a.derefs.empty());
    }
    if (!by_name && !wants_ret) return 0;
    std::vector<symbols::Param> params;
    std::string ret, no_dwarf;
    if (symbols::function_params(entry, &params, &no_dwarf, &ret) < 0) {
        if (!by_name) return 0;  // the values raw
        *why = no_dwarf;
        return -ENOENT;
    }
    if (events && spec->kind == SpecKind::call && spec->args.empty() && !ret.empty()) {  // else raw
        FetchArg a;
        a.name = "retval";
        a.base = FetchBase::retval;
        spec->args.push_back(std::move(a));
    }
    for (FetchArg &a : spec->args) {
        if (a.base == FetchBase::retval && !a.typed && a.derefs.empty() && !ret.empty()) set_typed(a, ret);
        if (a.base != FetchBase::param) continue;
        const symbols::Param *p = nullptr;
        for (const symbols::Param &q : params)
            if (q.name == a.symbol) p = &q;
        if (!p) {
            std::string names;
            for (const symbols::Param &q : params) names += (names.empty() ? "" : ", ") + q.name;
            *why = fmt::format("no parameter '{}' (its parameters: {})", a.symbol, names.empty() ? "none" : names);
            return -ENOENT;
        }
        if (p->slot == 0 && p->xmm == 0) {
            *why = fmt::format("parameter '{}' ({}) is not in a register: {}", a.symbol, p->type, p->why_no_slot);
            return -ENOENT;
        }
        if (p->slot == 0 && spec->kind != SpecKind::probe) {
            // The return handler has the integer arguments as they were at the entry, not the
            // vector registers, which the function has used since.
            *why = fmt::format("parameter '{}' ({}) is in a vector register, known at the entry only: use p:", a.symbol, p->type);
            return -ENOENT;
        }
        a.base = p->slot ? FetchBase::arg : FetchBase::xmm;
        a.n = p->slot ? p->slot : p->xmm - 1;
        if (!a.typed && a.derefs.empty() && !p->desc.empty()) set_typed(a, p->desc);
        else if (!a.derefs.empty() && a.base == FetchBase::xmm) {
            *why = fmt::format("parameter '{}' ({}) is in a vector register: it cannot be loaded from", a.symbol, p->type);
            return -ENOENT;
        }
        a.symbol.clear();
    }
    return 0;
}

}  // namespace liveprobe::trace
