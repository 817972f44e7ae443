// A spec's values typed and placed by the DWARF of the function a probe is on, when the probe
// is placed (trace/session.cpp): parameters by name, $retval, and a call's return value.
#pragma once

#include <cstdint>
#include <string>

#include "trace/spec.hpp"

namespace liveprobe::trace {

// Types and places from the DWARF of the function at `entry`: each parameter by name becomes
// $argN or %xmmN, typed as declared unless the spec gives a type; $retval (r:) without a type
// gets the declared return type; and a call (FUNC) in the event mode (`events`) gets $retval
// so typed. Without DWARF the values stay raw, but a parameter by name cannot be found. 0, or
// -ENOENT with *why.
int resolve_params(Spec *spec, uint64_t entry, bool events, std::string *why);

}  // namespace liveprobe::trace
