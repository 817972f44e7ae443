// The options of `liveprobe trace` (cmd_trace.cpp), and those that become the session's own
// among its specs (trace/session.hpp's --filter=, --by=, --value=, --stacks=), checked here
// before anything is attached (trace_options.cpp).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "keyed_totals.hpp"
#include "target_symbols.hpp"
#include "trace_output.hpp"
#include "tree_printer.hpp"

namespace liveprobe::tool {

struct Opts {
    int pid = 0;
    bool count = false, hist = false, no_follow = false, verbose = false;
    std::string chrome;  // --chrome FILE
    std::string output;  // -o FILE: a trace file
    std::string input;   // -i FILE: show a trace file
    PrintOptions print;
    int maxactive = 16384;
    double duration = 0;
    std::vector<std::string> specs;
    bool raw = false;  // --raw: calls' values as the bare register, no DWARF
    bool tree = false;  // --tree: the calls drawn as they begin and end
    std::string filter;  // --filter EXPR (trace/filter.hpp)
    std::string by, hist_of;  // --by KEY, --hist-of EXPR: aggregated by the tool (keyed)
    double interval = 0;      // --interval SECONDS
    std::unique_ptr<KeyedTotals> keyed;
    bool stacks = false, folded = false;  // --stacks, --folded
    uint32_t stack_depth = 32;            // --stack-depth
    TargetSymbols symbols;                // names the frames of printed events
    TreePrinter tree_printer;
    TraceProbes probes;  // -i FILE: the trace file's probes
    std::string serve;        // --serve ADDR:PORT | unix:PATH (trace_serve.hpp)
    std::string follow_name;  // --follow-name COMM
    size_t max_keys = 0;      // --max-keys: --by's rows kept (0: 10,000 with --serve, else no limit)
    bool serve_hist = false;  // --serve: durations served (--hist, kept when --by makes the session per event)
};

// --filter EXPR; --stacks, --stack-depth, --folded, --by stack; --by KEY, --hist-of EXPR: each
// checked (false: said why) and added to o.specs as the session's option.
bool add_filter(Opts &o);
bool add_stacks(Opts &o);
bool add_keys(Opts &o);

// -i FILE: the file shown as the options ask (trace_input.cpp).
int show_file(Opts &o);

}  // namespace liveprobe::tool
