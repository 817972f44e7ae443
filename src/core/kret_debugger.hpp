// Debuggers see through return probes (a process stopped with calls in flight whose return
// addresses are replaced): call frame information for the byte before the trampoline, given
// to GDB through its JIT interface (os/linux/gdb_jit.hpp).
#pragma once

namespace liveprobe::core {

// Registers it once per process (the first kretprobe). It costs a probe hit nothing: the
// debugger's own DWARF evaluation finds the real return address of a replaced slot by walking
// every thread record's return stack (ThreadRecord::ret_top, then Inst::below) for the entry
// of that slot.
void describe_trampoline_to_debuggers();

}  // namespace liveprobe::core
