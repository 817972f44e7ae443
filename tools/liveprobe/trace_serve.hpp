// liveprobe trace --serve ADDR:PORT|unix:PATH: the --count or --hist aggregates of running
// processes, kept in each target as `trace` keeps them, served as Prometheus metrics for as long
// as the tool runs (trace_serve.cpp). The processes: -p PID, or every process named COMM
// (--follow-name), attached as each one starts, a restarted server included.
#pragma once

#include <string>
#include <vector>

#include "trace_options.hpp"

namespace liveprobe::tool {

// --serve's options checked, and its default mode (--hist) set: false when they do not go
// together (said why).
bool check_serve(Opts &o, const std::vector<std::string> &command);

// Serves until SIGINT, SIGTERM, SIGHUP, --duration, or (-p) the process's end: the exit status.
// `mode` is the sessions' ("count", "hist", or "events" for --by's keys).
int serve_metrics(Opts &o, const char *mode);

}  // namespace liveprobe::tool
