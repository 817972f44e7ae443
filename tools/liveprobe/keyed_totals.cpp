// trace --by and --hist-of, aggregated by the tool (keyed_totals.hpp).
#include "keyed_totals.hpp"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <fmt/format.h>

namespace liveprobe::tool {

trace::ExtraLayout KeyedOptions::layout() const
{
    trace::ExtraLayout l;
    l.key = key == Key::comm || key == Key::caller || key == Key::expr;  // (stack: the layout's stack_depth)
    l.key_comm = key == Key::comm;
    l.value = !value.empty();
    return l;
}

std::string KeyedTotals::key_of(const TraceEvent &e, const TraceProbes &probes, const unsigned char *extra, int pid)
{
    if (o_.key == KeyedOptions::Key::stack) {  // frames innermost first, a line each; --folded: by function, outermost first
        std::string key;
        const std::vector<uint64_t> frames = event_stack(e, probes);
        for (size_t i = 0; i < frames.size(); ++i) {
            std::string name = symbols_.describe(pid, frames[i]);
            if (!o_.folded) {
                key += (i ? "\n" : "") + name;
                continue;
            }
            if (const size_t plus = name.rfind('+'); plus != std::string::npos && name.compare(0, 2, "0x") != 0)
                name.resize(plus);  // the function, not the place in it
            key = name + (i ? ";" : "") + key;
        }
        return key;
    }
    const trace::ExtraLayout l = o_.layout();
    uint64_t faults = 0;
    if (probes.extra_bytes) std::memcpy(&faults, extra, 8);
    switch (o_.key) {
    case KeyedOptions::Key::none: return "";
    case KeyedOptions::Key::tid: return std::to_string(e.r.tid);
    case KeyedOptions::Key::comm: {
        char name[17] = {};
        std::memcpy(name, extra + l.key_at(), 16);
        return name;
    }
    default: break;
    }
    if (faults & 1) return "(fault)";
    int64_t v = 0;
    std::memcpy(&v, extra + l.key_at(), 8);
    if (o_.key == KeyedOptions::Key::caller) return symbols_.describe(pid, static_cast<uint64_t>(v));
    return std::to_string(v);
}

void KeyedTotals::take(const std::vector<TraceEvent> &batch, const TraceProbes &probes, const PrintOptions &o)
{
    const trace::ExtraLayout l = o_.layout();
    const int pid = o.pid;
    for (const TraceEvent &e : batch) {
        if (e.r.probe >= probes.names.size() || trace::is_tree_marker(e.r)) continue;
        if (o.tid && static_cast<int>(e.r.tid) != o.tid) continue;
        // What the target put after the spec's values (ExtraLayout): the events' last bytes.
        if (e.values.size() < probes.extra_bytes || probes.extra_bytes < l.bytes()) continue;
        const auto *extra = reinterpret_cast<const unsigned char *>(e.values.data()) + e.values.size() - probes.extra_bytes;
        Row &r = rows_[{o_.folded ? std::string() : probes.name_of(e.r.probe), key_of(e, probes, extra, e.pid ? e.pid : pid)}];
        ++r.calls;
        r.ns[hist_bucket(e.r.exit_ns >= e.r.entry_ns ? e.r.exit_ns - e.r.entry_ns : 0)]++;
        if (!l.value) continue;
        uint64_t faults = 0;
        int64_t v = 0;
        std::memcpy(&faults, extra, 8);
        std::memcpy(&v, extra + l.value_at(), 8);
        if (faults & 2) ++r.faults;
        else if (v < 0) ++r.negative;
        else r.values[hist_bucket(static_cast<uint64_t>(v))]++;
    }
}

void KeyedTotals::print() const
{
    std::vector<std::pair<std::pair<std::string, std::string>, const Row *>> rows;
    for (const auto &[k, r] : rows_) rows.emplace_back(k, &r);
    // The most called first; then by function, and by key (numbers as numbers).
    const auto number = [](const std::string &k, long long *v) {
        char *end = nullptr;
        *v = std::strtoll(k.c_str(), &end, 10);
        return !k.empty() && *end == 0;
    };
    std::stable_sort(rows.begin(), rows.end(), [&](const auto &a, const auto &b) {
        if (a.second->calls != b.second->calls) return a.second->calls > b.second->calls;
        if (a.first.first != b.first.first) return a.first.first < b.first.first;
        long long x = 0, y = 0;
        if (number(a.first.second, &x) && number(b.first.second, &y)) return x < y;
        return a.first.second < b.first.second;
    });
    if (o_.folded) {
        std::map<std::string, uint64_t> folded;
        for (const auto &[k, r] : rows_) folded[k.second] += r.calls;
        for (const auto &[stack, n] : folded) std::printf("%s %" PRIu64 "\n", stack.c_str(), n);
        std::fflush(stdout);
        return;
    }
    const auto label = [&](const std::pair<std::string, std::string> &k) {
        if (o_.key == KeyedOptions::Key::stack) {  // as bpftrace prints a ustack key: a frame a line
            std::string s = k.first + ",\n";
            for (size_t at = 0; at <= k.second.size();) {
                const size_t nl = std::min(k.second.find('\n', at), k.second.size());
                s += "    " + k.second.substr(at, nl - at) + "\n";
                at = nl + 1;
            }
            return s;
        }
        return k.second.empty() ? k.first : k.first + ", " + k.second;
    };
    if (o_.count)
        for (const auto &[k, r] : rows) std::printf("@[%s]: %" PRIu64 "\n", label(k).c_str(), r->calls);
    if (o_.count && (o_.hist || !o_.value.empty())) std::printf("\n");
    for (const auto &[k, r] : rows) {
        if (o_.hist) {
            std::printf("@ns[%s]: %" PRIu64 " calls\n", label(k).c_str(), r->calls);
            print_buckets(r->ns.data(), r->ns.size());
            std::printf("\n");
        }
        if (o_.value.empty()) continue;
        std::string also;
        if (r->negative) also += fmt::format(", {} below 0", r->negative);
        if (r->faults) also += fmt::format(", {} not read (a fault)", r->faults);
        std::printf("@[%s](%s): %" PRIu64 " values%s\n", label(k).c_str(), o_.value.c_str(), r->calls, also.c_str());
        print_buckets(r->values.data(), r->values.size());
        std::printf("\n");
    }
    std::fflush(stdout);
}

}  // namespace liveprobe::tool
