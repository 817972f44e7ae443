// liveprobe's C++ API (C++20): the kernel-compatible engine of <liveprobe/kprobes.h> in the
// shape a C++ program expects.
//
//   Probe         an RAII, move-only handle: destroying it unregisters the probe.
//   Result<T>     a value or an Error {code (negative errno), reason (precise text)}.
//   probe(&f)     a typed probe built from f's own type (probe<Sig>("symbol") by name):
//                 .on_entry(...) gets the arguments typed, readable and writable, and may skip
//                 the call; .on_return(...) gets the outcome and the typed return value,
//                 readable and replaceable; .with_slot<T>() gives each call a T.
//   kprobe(t)     untyped kprobes and kretprobes with lambdas (pt_regs&).
//   kretprobe(t)
//   Batch         registers many probes as one transaction.
//
// Every handler is stored by value in the probe's block and called directly: no allocation
// and no std::function on a hit. Cost per hit is the C API's (bench/: liveprobe-cxx-cycles and
// BM_Cxx* measure typed probes against their C counterparts). See README.md, "The C++ API", for
// a complete example.
#pragma once

#include <liveprobe/kprobes.h>

#include <liveprobe/cxx/batch.hpp>
#include <liveprobe/cxx/kprobe.hpp>
#include <liveprobe/cxx/probe.hpp>
#include <liveprobe/cxx/result.hpp>
#include <liveprobe/cxx/sysv.hpp>
#include <liveprobe/cxx/typed.hpp>
