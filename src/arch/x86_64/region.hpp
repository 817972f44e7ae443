// Jump optimization, the instruction side: may the bytes at a probe address be replaced by a
// 5-byte `jmp rel32` to a detour, and what does the detour execute in their place?
// (The kernel's optprobes rules, arch/x86/kernel/kprobes/opt.c can_optimize(), extended:
// a `ret` or a `call` may end the region.) Pure functions over bytes; the policy of when to
// optimize lives in src/core.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "arch/x86_64/insn.hpp"
#include "arch/x86_64/jump_table.hpp"

namespace liveprobe::arch {

constexpr size_t kJmpLen = 5;           // e9 rel32
constexpr size_t kMaxRegionInsns = 5;   // a region is at most 5 instructions (5..19 bytes)

// A stretch of a function's code with its ORIGINAL bytes (liveprobe's own int3s already
// replaced by the bytes under them).
struct CodeRange {
    uint64_t start = 0;
    const uint8_t *bytes = nullptr;
    size_t len = 0;
};

// The replaced region at a probe address.
struct Region {
    uint64_t addr = 0;
    size_t len = 0;  // >= kJmpLen: whole instructions, and the padding below
    size_t n = 0;
    Insn insns[kMaxRegionInsns];
    // A function shorter than the jump that ends in a ret (or a jump through a pointer): the
    // jmp also covers the alignment padding after it, never executed (nops or int3s that no
    // function, FDE or branch claims). Their original bytes, put back with the others.
    uint8_t pad[kJmpLen] = {};
    size_t pad_len = 0;
};

// Decides whether the probe at `addr` can be jump-optimized. `fn` is the function holding
// addr; `cold` are its other parts (GCC's f.cold, which jump back into f), possibly empty;
// `other_probes` are addresses of other probe points (any function). Rules:
//   - the region is the instructions from addr until >= 5 bytes, all inside fn;
//   - each is relocatable: a plain instruction (RIP-relative operands are fine), a direct
//     jmp/jcc whose target lies outside the region, or, as the LAST instruction only, a
//     `ret`/`ret imm16`, a jump through a pointer (`jmp *%rax`, `jmp *ptr(%rip)`: a tail call)
//     or a direct `call rel32`; no indirect call, loop/jrcxz, or
//     anything decode() refuses;
//   - no direct branch anywhere in fn or cold targets bytes (addr, addr + len);
//   - every indirect jmp of fn (and of its cold parts) is a jump table that `read` can read
//     (jump_table.hpp), whose targets then count as direct branches, or a return
//     (`is_return`: its target is outside the function), or a jump through a pointer whose
//     target can be no byte of (addr, addr + len): see below. Any other has invisible targets
//     and refuses the function, as the kernel's optprobes refuse every indirect jump;
//   - no code of fn or its cold parts computes the address of a byte in (addr, addr + len)
//     (a RIP-relative operand, an absolute immediate or displacement);
//   - no other probe point inside (addr, addr + len).
// A jump through a pointer (a tail call `jmp *%rax` after the epilogue, `jmp *8(%rdi)`, a
// computed goto) goes, as the kernel's rule assumes, to another function's entry or into its
// own function, there where a stored or computed address points. In a linked object the only
// code addresses that are neither stored in its data nor computed by its code are those a
// switch table holds as offsets from the table, which a table read here explains, and return
// addresses, which only a call pushes. So such a jump cannot land inside the region when
// (1) every relative table entry the function reads (movsxd from a 4-scaled index) belongs
// to a table read here (no unread table whose sum the jump could be), (2) `stored` says that
// the object's data stores no address in (addr, addr + len), and (3) the function's code
// computes none (above).
// `padding`: how many bytes after fn's end are its alignment padding, belonging to no function
// (fn.bytes holds them after fn.len): a region that ends in fn's last instruction, a ret or a
// jump through a pointer, short of 5 bytes, takes as many of them as are nops or int3s.
// Returns nullptr and fills *out, or a fixed, precise reason (static storage), e.g.
// "the function has an indirect jump at +0x1c whose targets are unknown (...)",
// "a jump at 0x... targets byte 3 of the region", "the function ends 2 bytes after the
// probe", "a call is not the last instruction of the region", "another probe at +2".
// Whether the indirect `jmp *%REG` at `site` is a return: the call frame information there says
// the frame's return address is in that register (DWARF number `dwarf_reg`), as at the end of
// __builtin_eh_return (libgcc's _Unwind_Resume and _Unwind_RaiseException jump so to a landing
// pad): its target is the caller's code, never this function's. Null: none is.
using JumpIsReturn = bool (*)(uint64_t site, int dwarf_reg);

// Whether the data of the object holding [from, to) stores an address inside it (a pointer a
// jump could load, symbols::code_address_stored): 0 none, 1 some, -1 not known (no object,
// unreadable). Null: not known.
using AddressStored = int (*)(uint64_t from, uint64_t to);

const char *plan_region(uint64_t addr, const CodeRange &fn, const std::vector<CodeRange> &cold,
                        const std::vector<uint64_t> &other_probes, Region *out,
                        ReadMemory read = nullptr, JumpIsReturn is_return = nullptr,
                        AddressStored stored = nullptr, size_t padding = 0);

// Whether a direct branch of fn or of its cold parts targets `target` (fn's entry: a loop whose
// head is the function's first instruction, or a tail call to itself, jumps there). False
// when a part cannot be decoded.
bool branches_to(const CodeRange &fn, const std::vector<CodeRange> &cold, uint64_t target);

// Where a relocated instruction of a region landed in the detour, so a thread stopped inside
// the region, or faulting in the copy, can be mapped between the two.
struct RelocMap {
    uint32_t n = 0;
    uint32_t offset[kMaxRegionInsns];  // offset in `out` of relocate_region of instruction i
    uint64_t orig[kMaxRegionInsns];    // its original address
};

// Writes the region's instructions, relocated to execute at `at`, followed by a jump back to
// region.addr + region.len (e9 rel32; -ERANGE if out of reach):
//   - RIP-relative operands rebased (as build_slot);
//   - jmp/jcc rel8 or rel32 re-encoded as rel32 to the same absolute target;
//   - a final `call rel32` becomes "push the ORIGINAL return address, jmp target", without
//     touching flags or any register: lea -8(%rsp),%rsp; push %rax; movabs $ret,%rax;
//     mov %rax,8(%rsp); pop %rax; jmp target (rel32) -- so the callee returns straight into
//     the original function and unwinders never see the detour; no jump back after it;
//   - a final `ret` is copied as is, and a final jump through a pointer too (its
//     disp32(%rip) rebased); no jump back after them.
// Returns the bytes written, or -ERANGE / -ENOSPC. `map` gets each instruction's offset.
int relocate_region(const Region &region, uint64_t at, uint8_t *out, size_t cap, RelocMap *map);

// True if the code reachable from `entry` (the function containing it and the functions it
// calls directly, up to `depth` levels) provably never touches vector or x87 state: no
// operand of register class xmm/ymm/zmm/k/mmx/x87, no SSE/AVX/AVX-512/x87/MMX instruction
// (by Zydis' category / ISA set), and no indirect call or jump, nor a call to a function whose
// bounds are unknown (PLT stubs are indirect jumps: a handler calling memcpy is not proven).
// On false, *why says what was found, e.g. "vmovdqu at handler+0x12", "indirect call at
// handler+0x8 (cannot follow)". Uses symbols::function_at for bounds; reads code directly.
// With `writes`, the general registers that code writes (gpr_bit masks; all of them when not
// proven), for the light detour (detour.hpp).
bool vector_free(uint64_t entry, int depth, const char **why, uint32_t *writes = nullptr);

// A reason kept for the life of the process (the provers' answers hand out these pointers).
const char *intern_reason(std::string s);

// Where a PLT stub at `at` leads (the function it is bound, or will be bound, to), or 0 when
// `at` is not a PLT stub or its target is unknown.
uint64_t plt_target(uint64_t at);

// General registers as bits: 1 << (register number in the instruction encoding), rax = bit 0
// ... r15 = bit 15 (rsp, bit 4, is never in a mask).
uint32_t gpr_bit(ZydisRegister r);
constexpr uint32_t kAllGprs = 0xffef;
// rax rcx rdx rsi rdi r8-r11: what the SysV ABI lets a call clobber.
constexpr uint32_t kCallerSavedGprs = 0x0fc7;

// The general registers the function at `entry` writes, its calls not followed (a direct call
// counts as the caller-saved registers; the callees keep the others by the ABI; a call or a
// jump through a pointer counts for nothing); a direct jump out of the function makes it every
// register. For the light dispatcher, which jumps to handlers through a pointer: those are
// proven apart.
uint32_t function_writes(uint64_t entry);

// True if the function at `entry` never reads its second argument (rsi at entry: a handler's
// struct pt_regs *) while it may still hold it: on every path from the entry, rsi is
// overwritten before anything reads it, copies it, or passes it on (a call or jump out with rsi
// possibly unchanged is followed into the callee, up to `depth` levels; an indirect one, or a
// syscall, counts as a read). *why gets the first read found.
bool ignores_second_arg(uint64_t entry, int depth, const char **why);

// The same, but the function may also load and store, through rsi as it came in, the fields of
// struct pt_regs whose bits are set in `fields` (bit i: the 8-byte field at offset 8 i; an
// access must stay inside one field, as [rsi + displacement] with no index): it uses regs for
// nothing else. For the light return, whose regs has only some fields.
bool regs_fields_only(uint64_t entry, int depth, uint32_t fields, const char **why);

}  // namespace liveprobe::arch
