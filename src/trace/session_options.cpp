// A trace session's options among its specs (--filter=, --by=, --value=, --stacks=), their
// expressions resolved per function, and the mappings published for callers and stacks
// (session_state.hpp).
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "trace/session_state.hpp"

namespace liveprobe::trace::detail {

// One of start()'s spec texts: a session's option (--filter=, --by=, --value=) into ss, or a spec
// into *texts. 0, or -EINVAL with *why.
int session_option(Session &ss, const std::string &t, std::vector<std::string> *texts, std::string *why)
{
    if (t.rfind(kStacksOption, 0) == 0) {
        const long depth = std::strtol(t.c_str() + std::strlen(kStacksOption), nullptr, 10);
        if (depth < 1 || depth > static_cast<long>(kMaxStackDepth) || (ss.mode != Mode::events)) {
            *why = fmt::format("--stacks: 1 to {} frames, per event (not with --count, --hist, --tree)", kMaxStackDepth);
            return -EINVAL;
        }
        ss.extra.stack_depth = static_cast<uint32_t>(depth);
        return 0;
    }
    std::optional<Expr> *into = nullptr;
    const char *prefix = nullptr;
    for (auto [opt, where] : {std::pair{kFilterOption, &ss.filter}, std::pair{kByOption, &ss.key},
                              std::pair{kValueOption, &ss.value}})
        if (t.rfind(opt, 0) == 0) prefix = opt, into = where;
    if (!into) {
        texts->push_back(t);
        return 0;
    }
    const std::string expr = t.substr(std::strlen(prefix));
    const std::string name(prefix, std::strlen(prefix) - 1);
    if (ss.mode == Mode::tree || (into != &ss.filter && ss.mode != Mode::events)) {
        *why = name + ": not in this mode (" + (ss.mode == Mode::tree ? "--tree" : "--count, --hist") + ")";
        return -EINVAL;
    }
    if (into == &ss.key && expr == "comm") {
        ss.extra.key = ss.extra.key_comm = true;
        return 0;
    }
    std::string error;
    size_t at = 0;
    if (!parse_expr(expr, &into->emplace(), &error, &at)) {
        *why = name + ": " + point_at(expr, at, error);
        return -EINVAL;
    }
    ss.extra.key = ss.extra.key || into == &ss.key;
    ss.extra.value = ss.extra.value || into == &ss.value;
    return 0;
}

// An expression of the session (`given`), resolved for function f of `spec` into *out (null
// without one): false, said in out->skipped, if it cannot be.
bool resolve_for(Session &ss, const std::optional<Expr> &given, const char *option, const Spec &spec, const Target &f,
                 const Expr **resolved, Started *out)
{
    if (!given) return true;
    Expr e = *given;
    std::string why;
    if (resolve_expr(&e, spec.kind, f.addr - spec.offset, &why) < 0) {
        out->skipped.push_back(fmt::format("{}: {}: {}", f.name, option, why));
        return false;
    }
    *resolved = &ss.filters.emplace_back(std::move(e));
    return true;
}

// Places probes on `fns` (user spec indices): each function's spec resolved (parameters by
// name, from its DWARF), the names published, then the probes registered in one batch. Fills
// *out's lists, placed, optimized and slow.
// --by caller, --stacks: the process's executable mappings (/proc/self/maps' lines) among the
// names, as "map LINE", those not said yet: the tool names callers and frames by them, also
// after the process is gone (a program that ends at once), and keeps them in trace files.
void publish_maps(Session &ss)
{
    std::ifstream in("/proc/self/maps");
    std::string text;
    for (std::string line; std::getline(in, line);) {
        std::istringstream l(line);
        std::string range, perms;
        l >> range >> perms;
        if (perms.size() < 3 || perms[2] != 'x' || line.find(" /") == std::string::npos) continue;
        if (ss.maps_said.insert(line).second) text += "map " + line + "\n";
    }
    if (!text.empty()) append_names(ss, text);
}

}  // namespace liveprobe::trace::detail
