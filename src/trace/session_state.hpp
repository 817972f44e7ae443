// The agent's state of a trace session (trace/session.hpp's start, place, stop): shared by
// session.cpp and session_options.cpp, no one else's.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "trace/filter.hpp"
#include "trace/handlers.hpp"
#include "trace/session.hpp"
#include "trace/spec.hpp"

namespace liveprobe::trace::detail {

// A function a spec names, to probe: at addr (the function's address plus the spec's offset).
struct Target {
    uint64_t addr;
    std::string name;
    uint32_t spec;  // the user's spec (collect), then the resolved one (place)
    const Expr *filter = nullptr;  // --filter, --by, --value resolved for it (place)
    const Expr *key = nullptr;
    const Expr *value = nullptr;
};

// A session (the hit path's state and handlers are in trace/handlers). Under g_mu.
struct Session {
    uint32_t slot = 0;                              // g_slots[slot], g_sessions[slot]
    Started started;                                // what start() said
    Mode mode = Mode::events;
    int maxactive = 0;
    void *base = nullptr;
    size_t bytes = 0;
    std::vector<std::unique_ptr<Probe>> list;       // probe i is list[i]; never shrinks
    std::deque<Spec> specs;                         // resolved (stable: Probe::spec points in)
    std::map<std::string, uint32_t> spec_index;     // a resolved spec's text -> its index
    std::vector<Spec> user;                         // the specs as given, parsed
    std::vector<uint32_t> pending;                  // user specs whose library is not loaded yet
    std::set<std::pair<uint32_t, uint64_t>> seen;   // (spec or UINT32_MAX for calls, address)
    std::optional<Expr> filter, key, value;         // --filter, --by, --value, as given
    ExtraLayout extra;                              // --by's key and --value's value in events
    std::deque<Expr> filters;                       // resolved per probe (Probe's point in)
    std::set<std::string> maps_said;                // "map" lines published (publish_maps)
};
// Appends text to the session's names (the tool reads them): false when it has no room.
bool append_names(Session &ss, const std::string &text);

// One of start()'s spec texts: a session's option (--filter=, --by=, --value=, --stacks=) into
// ss, or a spec into *texts. 0, or -EINVAL with *why.
int session_option(Session &ss, const std::string &t, std::vector<std::string> *texts, std::string *why);
// A session's expression (`given`), resolved for function f of `spec` into *resolved (null
// without one): false, said in out->skipped, if it cannot be.
bool resolve_for(Session &ss, const std::optional<Expr> &given, const char *option, const Spec &spec, const Target &f,
                 const Expr **resolved, Started *out);
// --by caller, --stacks: the process's executable mappings among the names ("map LINE").
void publish_maps(Session &ss);

}  // namespace liveprobe::trace::detail
