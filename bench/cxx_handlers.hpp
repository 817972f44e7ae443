// The work the C handlers of the typed-vs-C benchmarks do (bench/cxx_bench.cpp,
// bench/programs/cxx_cycles.cpp), the same as their typed counterparts do: an entry handler
// stamps a counter ("timestamp-ish": cheap, so the probe machinery dominates what is
// measured) into the call's slot; the return handler adds return value - stamp to a total.
// Included inside each program's anonymous namespace, once per program, after
// <liveprobe/kprobes.h> and <cstdint> (so it includes nothing itself).
#pragma once

std::uint64_t g_tick;   // the entry handlers' "timestamp"
std::uint64_t g_total;  // what the return handlers add up

int c_empty_pre(kprobe *, pt_regs *) { return 0; }

int c_stamp_entry(kretprobe_instance *ri, pt_regs *)
{
    *reinterpret_cast<std::uint64_t *>(ri->data) = g_tick++;
    return 0;
}

int c_sum_return(kretprobe_instance *ri, pt_regs *regs)
{
    g_total += static_cast<std::uint64_t>(static_cast<int>(regs_return_value(regs))) -
               *reinterpret_cast<std::uint64_t *>(ri->data);
    return 0;
}

// The typed return probe's slot.
struct Stamp {
    std::uint64_t t0;
};
