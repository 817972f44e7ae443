// trace --by and --hist-of, aggregated by the tool (keyed_totals.hpp).
#include "keyed_totals.hpp"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <tuple>
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

void KeyedTotals::Row::add(const Row &r)
{
    calls += r.calls;
    negative += r.negative;
    faults += r.faults;
    for (size_t b = 0; b < ns.size(); ++b) ns[b] += r.ns[b], values[b] += r.values[b];
}

// The key as printed: a thread's id, a name, a value, a caller or a stack named (a frame a line;
// --folded: by function, outermost first, ';' between).
namespace {

// A row's key, as take() makes it: the function's id (4 bytes), the process (4), a flag (1), the
// key's bytes.
uint32_t raw_id(const std::string &raw)
{
    uint32_t id = 0;
    std::memcpy(&id, raw.data(), 4);
    return id;
}

int32_t raw_pid(const std::string &raw)
{
    int32_t pid = 0;
    std::memcpy(&pid, raw.data() + 4, 4);
    return pid;
}

}  // namespace

std::string KeyedTotals::key_text(int pid, const std::string &key, char flag)
{
    using Key = KeyedOptions::Key;
    const bool faulted = flag == 1;
    if (flag == kOther) return "(other)";
    if (o_.key == Key::none) return "";
    if (o_.key == Key::tid) {
        uint32_t tid = 0;
        std::memcpy(&tid, key.data(), 4);
        return std::to_string(tid);
    }
    if (o_.key == Key::comm) return std::string(key.c_str());  // NUL-terminated within its 16 bytes
    if (o_.key != Key::stack) {
        if (faulted) return "(fault)";
        int64_t v = 0;
        std::memcpy(&v, key.data(), 8);
        return o_.key == Key::caller ? symbols_.describe(pid, static_cast<uint64_t>(v), true) : std::to_string(v);
    }
    std::string text;
    for (size_t i = 0; i + 8 <= key.size(); i += 8) {
        uint64_t frame = 0;
        std::memcpy(&frame, key.data() + i, 8);
        std::string name = symbols_.describe(pid, frame, i > 0);
        if (!o_.folded) {
            text += (i ? "\n" : "") + name;
            continue;
        }
        if (const size_t plus = name.rfind('+'); plus != std::string::npos && name.compare(0, 2, "0x") != 0)
            name.resize(plus);  // the function, not the place in it
        text = name + (i ? ";" : "") + text;
    }
    return text;
}

void KeyedTotals::take(const std::vector<TraceEvent> &batch, const TraceProbes &probes, const PrintOptions &o)
{
    using Key = KeyedOptions::Key;
    const trace::ExtraLayout l = o_.layout();
    if (probes_seen_ != &probes || id_of_probe_.size() != probes.names.size()) {  // (probes placed since)
        probes_seen_ = &probes;
        id_of_probe_.clear();
        for (uint32_t p = 0; p < probes.names.size(); ++p) {
            const std::string name = o_.folded ? std::string() : probes.name_of(p);
            auto [it, added] = ids_.try_emplace(name, static_cast<uint32_t>(names_.size()));
            if (added) names_.push_back(name);
            id_of_probe_.push_back(it->second);
        }
    }
    std::string key;
    for (const TraceEvent &e : batch) {
        if (e.r.probe >= id_of_probe_.size() || trace::is_tree_marker(e.r)) continue;
        if (o.tid && static_cast<int>(e.r.tid) != o.tid) continue;
        // What the target put after the spec's values (ExtraLayout): the events' last bytes.
        if (e.values.size() < probes.extra_bytes || probes.extra_bytes < l.bytes()) continue;
        const char *extra = e.values.data() + e.values.size() - probes.extra_bytes;
        uint64_t faults = 0;
        if (probes.extra_bytes) std::memcpy(&faults, extra, 8);
        const int32_t pid = e.pid ? e.pid : o.pid;
        key.assign(reinterpret_cast<const char *>(&id_of_probe_[e.r.probe]), 4);
        key.append(reinterpret_cast<const char *>(&pid), 4);
        key += static_cast<char>(faults & 1);
        if (o_.key == Key::tid) key.append(reinterpret_cast<const char *>(&e.r.tid), 4);
        else if (o_.key == Key::comm) key.append(extra + l.key_at(), 16);
        else if (o_.key == Key::caller || o_.key == Key::expr) key.append(extra + l.key_at(), 8);
        else if (o_.key == Key::stack && probes.stack_depth) {
            const char *stack = e.values.data() + e.values.size() - 8 - 8 * size_t{probes.stack_depth};
            uint64_t n = 0;
            std::memcpy(&n, stack, 8);
            key.append(stack + 8, 8 * std::min<uint64_t>(n, probes.stack_depth));
        }
        if (limit_ && rows_.size() >= limit_ && rows_.find(key) == rows_.end()) {  // a new key, no room
            key.resize(8);
            key += kOther;
            if (!told_) {
                told_ = true;
                std::fprintf(stderr, "liveprobe: --by: more than %zu keys: the calls of the keys after them are "
                             "counted under the key (other) (--max-keys)\n", limit_);
            }
        }
        Row &r = rows_[key];
        ++r.calls;
        r.ns[hist_bucket(e.r.exit_ns >= e.r.entry_ns ? e.r.exit_ns - e.r.entry_ns : 0)]++;
        if (!l.value) continue;
        int64_t v = 0;
        std::memcpy(&v, extra + l.value_at(), 8);
        if (faults & 2) ++r.faults;
        else if (v < 0) ++r.negative;
        else r.values[hist_bucket(static_cast<uint64_t>(v))]++;
    }
}

void KeyedTotals::visit(const Visit &fn)
{
    std::map<std::tuple<int, std::string, std::string>, Row> named;
    for (const auto &[raw, r] : rows_) {
        const uint32_t id = raw_id(raw);
        const int32_t pid = raw_pid(raw);
        named[{pid, names_[id], key_text(pid, raw.substr(9), raw[8])}].add(r);
    }
    for (const auto &[k, r] : named) fn(std::get<0>(k), std::get<1>(k), std::get<2>(k), r.calls, r.ns);
}

void KeyedTotals::forget(int pid)
{
    for (auto it = rows_.begin(); it != rows_.end();) {
        it = raw_pid(it->first) == pid ? rows_.erase(it) : std::next(it);
    }
}

void KeyedTotals::print()
{
    // Named now: raw keys that read the same (a stack's frames by function, two processes'
    // threads of one name) are one row.
    std::map<std::pair<std::string, std::string>, Row> named;
    for (const auto &[raw, r] : rows_) {
        const uint32_t id = raw_id(raw);
        const int32_t pid = raw_pid(raw);
        named[{names_[id], key_text(pid, raw.substr(9), raw[8])}].add(r);
    }
    std::vector<std::pair<std::pair<std::string, std::string>, const Row *>> rows;
    for (const auto &[k, r] : named) rows.emplace_back(k, &r);
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
        for (const auto &[k, r] : named) folded[k.second] += r.calls;
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
