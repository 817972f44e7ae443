// The out-of-line copy of one instruction ("slot") for the breakpoint path.
//
// Only the displacement of a RIP-relative operand depends on where an instruction runs, so a
// slot is the original bytes with that displacement rebased, followed by a way back. An
// immediate that follows the displacement (cmpl $imm, disp(%rip)) is left alone: the
// displacement's offset and size come from the decoder, never from guessing the layout.
#include <cerrno>

#include "arch/x86_64/insn.hpp"

namespace liveprobe::arch {

namespace {

constexpr size_t kJmpRel32Len = 5;  // e9 rel32
constexpr size_t kJmpAbsLen = 14;   // ff 25 00 00 00 00; .quad target
constexpr size_t kTrapLen = 1;      // cc

bool fits_i32(int64_t v) {
    return v >= INT32_MIN && v <= INT32_MAX;
}

// Byte by byte: out may be unaligned, and this stays free of library calls.
void put_le(uint8_t *p, uint64_t v, size_t n) {
    for (size_t i = 0; i < n; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

// rel32 of a 5-byte jump at `from` to `to`, when it reaches.
bool jmp_rel32(uint64_t from, uint64_t to, int32_t *rel) {
    const int64_t d = static_cast<int64_t>(to - (from + kJmpRel32Len));
    if (!fits_i32(d)) return false;
    *rel = static_cast<int32_t>(d);
    return true;
}

}  // namespace

int copy_rebased(const Insn &insn, bool rip, uint64_t at, uint8_t *out) {
    const size_t len = insn.len;
    int64_t new_disp = 0;
    const size_t disp_off = insn.zi.raw.disp.offset;
    if (rip) {
        if (insn.zi.raw.disp.size != 32 || disp_off + 4 > len) return -EINVAL;
        // Both copies compute next_ip + disp, and only next_ip moves:
        // new_disp = old_disp + (addr + len) - (at + len).
        new_disp = insn.zi.raw.disp.value + static_cast<int64_t>(insn.addr - at);
        if (insn.zi.address_width == 32) {
            // EIP-relative (0x67): the address is truncated to 32 bits, so any displacement
            // congruent modulo 2^32 addresses the same byte; it always reaches.
            new_disp = static_cast<int32_t>(static_cast<uint32_t>(new_disp));
        } else if (!fits_i32(new_disp)) {
            return -ERANGE;
        }
    }
    for (size_t i = 0; i < len; ++i) out[i] = insn.bytes[i];
    if (rip) put_le(out + disp_off, static_cast<uint64_t>(new_disp), 4);
    return static_cast<int>(len);
}

int build_slot(const Insn &insn, uint64_t at, SlotTail tail, uint8_t *out, size_t cap,
               size_t *trap_offset) {
    if (insn.cls != InsnClass::kOutOfLine || insn.len == 0 || insn.len > kMaxInsnLen)
        return -EINVAL;
    const size_t len = insn.len;
    const uint64_t next = insn.addr + len;  // where the original continues

    int32_t back_rel = 0;
    size_t tail_len = kTrapLen;
    if (tail == SlotTail::kJumpBack)
        tail_len = jmp_rel32(at + len, next, &back_rel) ? kJmpRel32Len : kJmpAbsLen;
    if (cap < len + tail_len) return -ENOSPC;

    if (const int r = copy_rebased(insn, insn.rip_relative, at, out); r < 0) return r;

    uint8_t *t = out + len;
    if (tail == SlotTail::kTrap) {
        t[0] = 0xcc;
        if (trap_offset) *trap_offset = len;
    } else if (tail_len == kJmpRel32Len) {
        t[0] = 0xe9;
        put_le(t + 1, static_cast<uint32_t>(back_rel), 4);
    } else {
        // jmp *0(%rip) reads its target from the 8 bytes right after it: no register is
        // clobbered, and the slot may be anywhere.
        t[0] = 0xff;
        t[1] = 0x25;
        put_le(t + 2, 0, 4);
        put_le(t + 6, next, 8);
    }
    return static_cast<int>(len + tail_len);
}

}  // namespace liveprobe::arch
