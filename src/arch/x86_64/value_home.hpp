// Where the SysV x86-64 calling convention puts a value of a type (trace/value_type.hpp): a
// function's return value, or one of its parameters, for the tracer's typed fetches. The
// classification of the psABI (3.2.3): each eightbyte of a value of 16 bytes or fewer is
// INTEGER or SSE by the scalars in it; larger values, and those holding a long double, go in
// memory.
#pragma once

#include <cstdint>

#include "trace/value_type.hpp"

namespace liveprobe::arch {

enum class ValueClass : uint8_t {
    none,     // void
    integer,  // one eightbyte in an integer register (rax; an argument's register)
    sse,      // one in a vector register (xmm0)
    int_int,  // two: rax, rdx (or two argument registers)
    sse_sse,  // xmm0, xmm1
    int_sse,  // rax, xmm0
    sse_int,  // xmm0, rax
    x87,      // a long double: st(0) on return, in memory as a parameter
    memory,   // in memory: returned at the address rax holds, passed on the stack
};

ValueClass classify(const trace::VType &t);

// How many integer and vector registers a parameter of class c takes.
inline int integer_registers(ValueClass c)
{
    return c == ValueClass::integer ? 1 : c == ValueClass::int_int ? 2 : c == ValueClass::int_sse || c == ValueClass::sse_int ? 1 : 0;
}
inline int sse_registers(ValueClass c)
{
    return c == ValueClass::sse ? 1 : c == ValueClass::sse_sse ? 2 : c == ValueClass::int_sse || c == ValueClass::sse_int ? 1 : 0;
}

}  // namespace liveprobe::arch
