// Jump tables: the targets of a function's indirect `jmp` when it is a compiler's switch
// dispatch of a shape read here, so that the function can still be jump-optimized (region.cpp:
// an indirect jump whose targets are unknown refuses the whole function, as the kernel's
// optprobes do).
//
// Two shapes, the ones GCC and Clang emit on x86-64:
//   - position-independent (PIE and shared objects): 32-bit entries relative to the table,
//         lea   TABLE(%rip), %rB
//         movslq (%rB,%rI,4), %rE        (movsxd)
//         add   %rB, %rE                 (or add %rE, %rB, jumping through %rB)
//         jmp   *%rE                     (notrack or not)
//     the four instructions in a straight line in this order, other instructions between them
//     allowed when they write none of the registers involved (rB, rE; the index is not needed);
//     or the lea hoisted out of the switch's loop into rB (callee-saved when the loop calls), when no other value
//     of rB reaches the jmp (jump_table.cpp hoisted_table);
//   - absolute (non-PIE code): `jmp *TABLE(,%rI,8)`, 64-bit entries.
// The table's length comes from the bounds check right before the dispatch (`cmp $N-1, %eI;
// ja default`, the index not changed between but by `mov %eI, %eI`), and every entry must then
// target an instruction of the function (or of one of its cold parts). Without such a check,
// entries are taken while each targets one, which every entry of a real table does, so the
// scan covers the whole table; what it reads past the end (often the next table, read against
// the wrong base) only adds targets, that is refusals, and mostly stops at once: an entry read
// against the wrong base seldom lands on an instruction's first byte.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

namespace liveprobe::arch {

// Reads n bytes of the process's memory at addr; false when they are not all readable.
using ReadMemory = bool (*)(uint64_t addr, void *out, size_t n);

struct JumpTable {
    uint64_t table = 0;        // the table's address
    uint64_t first_site = 0;   // the first instruction of the dispatch sequence (its bounds
                               // check, else its lea; else the jmp itself)
    size_t entries = 0;        // the count the bounds check allows, 0 when none was found
    bool relative = false;     // 32-bit entries relative to the table (a movsxd reads them)
    // When no table is read: the jump goes through a pointer loaded from memory (`jmp *8(%rax)`,
    // or `jmp *%rax` right after `mov 8(%rdi),%rax`), not through a sum of registers: an
    // unread relative table cannot be what it jumps through.
    bool through_pointer = false;
    std::vector<uint64_t> targets;  // one per entry read, in table order
};

// One part of a function (the function itself, or a cold part): `code` holds its bytes from
// `start`; `starts` the offsets of the instructions a linear decode found, in order.
struct CodePart {
    uint64_t start = 0;
    const uint8_t *code = nullptr;
    size_t len = 0;
    const std::vector<uint32_t> *starts = nullptr;
};

// The dispatch is in parts[part] (parts[0] is the function, the others its cold parts): the
// first `n_before` of its instructions come before the jmp, at `jmp_off`.
// `in_function(target)` says whether an address is an instruction's start in the function or
// one of its parts (where each entry of a real table leads: reading stops at one that is not).
// Returns nullptr and fills *out, or why the jump is not a table of a known shape.
// `known`: the targets of the function's other dispatches read already (by their jmp's site),
// which the proof of a hoisted table register follows instead of giving up at their jumps.
// `narrow`: when the table's lea comes before the entry's load, try to prove the register
// hoisted anyway, so that first_site is the load (a jump landing between them is then fine):
// a whole-function proof, asked for only when the wider span is refused.
using KnownJumps = std::map<uint64_t, std::vector<uint64_t>>;
const char *read_jump_table(const std::vector<CodePart> &parts, size_t part, size_t n_before, uint32_t jmp_off,
                            ReadMemory read, bool (*in_function)(uint64_t target, const void *ctx), const void *ctx,
                            JumpTable *out, const KnownJumps *known = nullptr, bool narrow = false);

// At most this many entries are read from one table.
constexpr size_t kMaxJumpTableEntries = 1u << 16;

}  // namespace liveprobe::arch
