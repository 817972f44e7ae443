// A module's init or exit, run under the fault guard of probe handlers (core::run_guarded): a
// fault abandons it and is reported instead of killing the process.
//
// Built uninstrumented in sanitizer builds: the guard's longjmp skips the frames between it and
// the fault, and TSan's shadow call stack, which saw them pushed, would be left inconsistent.
#pragma once

#include <cstdint>

namespace liveprobe::agent {

struct GuardedOutcome {
    bool returned = false;  // false: it faulted
    int result = 0;         // an init's return value
    int sig = 0;            // the fault's signal
    uint64_t addr = 0;      // and address
};

// Runs exactly one of init() and exit_fn() (the other null).
GuardedOutcome run_module_function(int (*init)(), void (*exit_fn)());

}  // namespace liveprobe::agent
