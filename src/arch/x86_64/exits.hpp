// Where a function leaves: every `ret` of its code, for probes that must see each exit (the
// unwinder hooks of core/unwinder_hooks.cpp). Pure, over the function's original bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace liveprobe::arch {

// Whether the function at `target` never returns (abort, __stack_chk_fail, ...).
using NoReturnTest = std::function<bool(uint64_t target)>;

// Decodes [start, start + len) (one whole function) and fills *rets with the address of every
// ret / ret imm16. A jump out of the function is allowed only to code that at once calls a
// function that never returns (GCC's f.cold blocks calling abort). Returns nullptr, or a fixed
// reason why the rets are not all its exits: "an indirect jump", "a jump out of the function
// (tail call)", "an undecodable byte", "an int3" (a breakpoint, maybe a probe's, hides the
// byte under it), "no ret".
const char *function_returns(uint64_t start, const uint8_t *code, size_t len, const NoReturnTest &noreturn,
                             std::vector<uint64_t> *rets);

// The GOT slot a PLT stub (`endbr64; jmp *got(%rip)`, read from memory) jumps through, 0 if
// plt_stub is not one. For NoReturnTest implementations.
uint64_t plt_got_slot(uint64_t plt_stub);

}  // namespace liveprobe::arch
