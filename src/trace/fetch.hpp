// Fetching a probe spec's values (trace/spec.hpp) inside the target, from a handler: registers,
// the arguments, the stack and memory. Memory is read with process_vm_readv on the process
// itself, so a bad pointer reads as "(fault)" and never faults the traced thread. Nothing here
// allocates, takes a lock or touches a vector register (built as trace/handlers.cpp is).
#pragma once

#include <cstdint>
#include <string>

#include "trace/spec.hpp"

struct pt_regs;

namespace liveprobe::trace {

struct FetchContext {
    const struct pt_regs *regs = nullptr;  // at the probe (a return probe: at the return)
    // A return probe's registers at the function's entry, for $argN: di si dx cx r8 r9, then sp.
    const uint64_t *entry = nullptr;
    // The thread's vector and x87 registers as saved for the handlers (a spec that
    // needs_fpregs: its probes are registered so that they are): xmm i at xmm + i * stride,
    // st(0) at st (null: the x87 stack was empty). Null xmm: none saved, those values fault.
    const unsigned char *xmm = nullptr;
    uint64_t xmm_stride = 0;
    const unsigned char *st = nullptr;
};

// ctx's xmm and st, from the calling thread's record (the handler's own, core/thread_state.hpp).
void fetch_fpregs(FetchContext *ctx) noexcept;

// Fills `out` (payload_bytes(spec) bytes: the fault mask, then each value).
void fetch_all(const Spec &spec, const FetchContext &ctx, unsigned char *out) noexcept;

// One FETCHARG's value (not a string nor a typed value: 8 bytes): false on a fault.
bool fetch_value(const FetchArg &a, const FetchContext &ctx, uint64_t *v) noexcept;

// Resolves each @SYM of the spec into its address: 0, or -ENOENT with *why.
int resolve_fetch_symbols(Spec *spec, std::string *why);

// Reads up to n bytes at addr of this process: how many could be read.
size_t read_memory(uint64_t addr, void *dst, size_t n) noexcept;

}  // namespace liveprobe::trace
