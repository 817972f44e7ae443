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

// The target of a direct call or jmp at addr (reading its bytes from memory), 0 if it is not
// one. For NoReturnTest implementations: a PLT stub's `jmp *got(%rip)` gives its GOT slot.
uint64_t direct_call_target(uint64_t addr);
uint64_t plt_got_slot(uint64_t plt_stub);

}  // namespace liveprobe::arch
