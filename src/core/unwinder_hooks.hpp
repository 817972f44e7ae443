// liveprobe's internal probes on the unwinders, which let them see real return addresses
// where return probes replaced them (core/kret_unwind.cpp).
#pragma once

namespace liveprobe::core {

// Puts the probes on the unwinders loaded in the process and not probed yet: the stack
// walkers (libgcc's and libunwind's _Unwind_Backtrace, libunwind's unw_backtrace: at the entry
// and at every ret), the C++ unwinder's entries (_Unwind_RaiseException, _Unwind_Resume,
// _Unwind_Resume_or_Rethrow, _Unwind_ForcedUnwind, libgcc's and libunwind's) and
// __cxa_begin_catch. Called at every kretprobe registration, outside the registry lock; does
// nothing unless objects were loaded since the last call. A walker whose exits cannot all be
// found (a tail call, an indirect jump) is not probed at all: its walks stop at the first
// replaced return address.
void hook_unwinders();

}  // namespace liveprobe::core
