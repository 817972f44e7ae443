// The GDB JIT interface (gdb's manual, "JIT Compilation Interface"): in-memory ELF objects a
// debugger reads as if they were object files of the process, for code or unwind information
// no file on disk describes. GDB reads them when it attaches, and is told of later ones by a
// breakpoint on __jit_debug_register_code.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace liveprobe::os {

// Registers an object with one function symbol `name` covering [addr, addr + size) and the
// call frame information `eh_frame` (CIEs and FDEs with absolute addresses, DW_EH_PE_absptr,
// without the zero terminator). Never unregistered. Thread-safe.
void gdb_jit_register(const std::string &name, uint64_t addr, uint64_t size, const std::vector<uint8_t> &eh_frame);

}  // namespace liveprobe::os
