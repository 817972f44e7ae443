// What `liveprobe trace` says on stderr at the end: the summary of calls, drops and misses, and
// with --verbose the functions on the breakpoint path that were called and those of the
// missed calls (trace_summary.cpp).
#pragma once

#include <cstdint>
#include <string>

#include "trace_images.hpp"

namespace liveprobe::tool {

void print_summary(const Folded &f, uint64_t events, const std::string &read);
void print_breakpoint_calls(const Folded &f, const TraceProbes &names);
void print_missed_by_function(const Folded &f, const TraceProbes &names);

}  // namespace liveprobe::tool
