// The options of `liveprobe trace` that become the session's (trace_options.hpp).
#include "trace_options.hpp"

#include <fmt/format.h>

#include "commands.hpp"
#include "trace/filter.hpp"
#include "trace/session.hpp"

namespace liveprobe::tool {
namespace {

// An expression of `option`, parsed: false, said with a caret under the mistake, if it is not
// one; or if it reads retval or duration and a spec is an instruction's (p:, FUNC+OFF).
bool parse_checked(const Opts &o, const char *option, const std::string &text, trace::Expr *e)
{
    std::string error;
    size_t at = 0;
    if (!trace::parse_expr(text, e, &error, &at)) {
        complain(fmt::format("trace: {}: {}", option, trace::point_at(text, at, error)));
        return false;
    }
    for (const std::string &spec_text : o.specs) {
        trace::Spec spec;
        if (e->at_return && trace::parse_spec(spec_text, &spec, &error, &at) && spec.kind == trace::SpecKind::probe) {
            complain(fmt::format("trace: {}: retval and duration are known at a return (FUNC, r:): not at {}", option,
                                 spec_text));
            return false;
        }
    }
    return true;
}

}  // namespace

// --filter: parsed here to point at a mistake before anything is attached, then sent among the
// specs as the session's option (trace/session.hpp's kFilterOption).
bool add_filter(Opts &o)
{
    if (o.tree) {
        complain("trace: --filter: not with --tree, which draws every call as it begins (trace -o FILE, then "
                 "liveprobe replay FILE, takes filters)");
        return false;
    }
    trace::Expr e;
    if (!parse_checked(o, "--filter", o.filter, &e)) return false;
    o.specs.push_back(trace::kFilterOption + o.filter);
    return true;
}

// --stacks, --stack-depth, --folded, --by stack: every event with its stack (the session's
// option, trace/session.hpp's kStacksOption); counted per stack with --count and --hist.
bool add_stacks(Opts &o)
{
    o.stacks = o.stacks || o.folded || o.by == "stack";
    if (!o.stacks) return true;
    if (o.tree) {
        complain("trace: --stacks: not with --tree (replay the calls of a trace file)");
        return false;
    }
    if ((!o.by.empty() && o.by != "stack") || !o.hist_of.empty()) {
        complain("trace: --stacks is a key of its own: not with --by " + o.by + " or --hist-of (--count --stacks "
                 "counts per stack)");
        return false;
    }
    if ((o.count || o.hist) && o.by.empty() && !o.folded) o.by = "stack";  // counts and histograms per stack
    o.specs.push_back(trace::kStacksOption + std::to_string(o.stack_depth));
    o.print.frame_name = [&o](int pid, uint64_t addr, bool ret) { return o.symbols.describe(pid, addr, ret); };
    return true;
}

// --by KEY, --hist-of EXPR: the session runs per event, each event with its key and value
// (computed in the target: trace/session.hpp's ExtraLayout), aggregated here (keyed_totals.hpp).
bool add_keys(Opts &o)
{
    if (!o.by.empty() && !o.count && !o.hist && o.hist_of.empty() && !o.folded) {
        complain("trace: --by KEY groups what --count, --hist or --hist-of aggregate: give one of them");
        return false;
    }
    if (o.tree || o.print.json || o.print.chrome || !o.output.empty()) {
        complain("trace: --by and --hist-of aggregate: not with --tree, --json, --chrome or -o");
        return false;
    }
    KeyedOptions k;
    k.count = o.count;
    k.hist = o.hist;
    k.value = o.hist_of;
    using Key = KeyedOptions::Key;
    k.key = o.folded || o.by == "stack" ? Key::stack
            : o.by.empty()               ? Key::none
            : o.by == "tid"              ? Key::tid
            : o.by == "comm"             ? Key::comm
            : o.by == "caller"           ? Key::caller
                                         : Key::expr;
    k.folded = o.folded;
    k.count = k.count || o.folded;
    for (auto [text, option] : {std::pair{&o.by, "--by"}, std::pair{&o.hist_of, "--hist-of"}}) {
        trace::Expr e;
        if (!text->empty() && *text != "tid" && *text != "comm" && *text != "stack" && !parse_checked(o, option, *text, &e))
            return false;
    }
    if (k.key == Key::comm || k.key == Key::caller || k.key == Key::expr) o.specs.push_back(trace::kByOption + o.by);
    if (o.folded && (o.hist || !o.hist_of.empty() || (!o.by.empty() && o.by != "stack"))) {
        complain("trace: --folded counts the calls of each stack: not with --hist, --hist-of or --by");
        return false;
    }
    if (!o.hist_of.empty()) o.specs.push_back(trace::kValueOption + o.hist_of);
    o.keyed = std::make_unique<KeyedTotals>(k);
    o.print.sink = o.keyed.get();
    o.count = o.hist = false;  // the session runs per event; the aggregates are the tool's
    return true;
}

}  // namespace liveprobe::tool
