#include "arch/x86_64/detour.hpp"

#include <cerrno>
#include <cstddef>
#include <cstring>

#include <liveprobe/kprobes.h>

#include "arch/x86_64/jump_light.hpp"
#include "arch/x86_64/light_layout.h"

namespace liveprobe::arch {
namespace {

static_assert(sizeof(struct pt_regs) == kPtRegsSize);
static_assert(offsetof(struct pt_regs, orig_ax) == 120);
static_assert(offsetof(struct pt_regs, ip) == 128);
static_assert(offsetof(struct pt_regs, cs) == 136);
static_assert(offsetof(struct pt_regs, flags) == 144);
static_assert(offsetof(struct pt_regs, sp) == 152);
static_assert(offsetof(struct pt_regs, ss) == 160);

constexpr int32_t kRedZone = 128;

// Flags bits restored exactly by the detour's fast path (sahf, and an add for OF): CF PF AF ZF
// SF OF. The others that user code can set, TF NT AC ID and DF, take the slow path (popfq,
// about 20 cycles): the entry clears them from the live flags when the thread had any of them
// (rare; DF for the ABI of the calls that follow), so on the way out the live flags hold none
// of them; when the saved flags (the handlers' regs->flags) hold none either, restoring the
// six arithmetic bits restores all of them. IF and IOPL cannot change in user mode.
constexpr uint32_t kSlowFlags = 0x100 | 0x400 | 0x4000 | 0x40000 | 0x200000;  // TF DF NT AC ID
static_assert(kSlowFlags == 0x244500, "kretprobe_trampoline.S's SLOW_FLAGS");

// Appends machine code; `ok` turns false on overflow.
struct Writer {
    uint8_t *out;
    size_t pos;
    size_t cap;
    uint64_t base;  // runtime address of out[0]
    bool ok = true;

    void bytes(std::initializer_list<uint8_t> b)
    {
        if (pos + b.size() > cap) {
            ok = false;
            return;
        }
        for (uint8_t x : b) out[pos++] = x;
    }
    void raw(const void *p, size_t n)
    {
        if (pos + n > cap) {
            ok = false;
            return;
        }
        std::memcpy(out + pos, p, n);
        pos += n;
    }
    void u32(uint32_t v) { raw(&v, 4); }
    void u64(uint64_t v) { raw(&v, 8); }
    uint64_t here() const { return base + pos; }
};

// lea disp(%rsp),%rsp: moves the stack pointer without touching flags.
void lea_rsp(Writer &w, int32_t disp)
{
    if (disp >= -128 && disp <= 127) {
        w.bytes({0x48, 0x8d, 0x64, 0x24, static_cast<uint8_t>(disp)});
    } else {
        w.bytes({0x48, 0x8d, 0xa4, 0x24});
        w.u32(static_cast<uint32_t>(disp));
    }
}

// Step 1: build a struct pt_regs at the new stack pointer. `rz` is the red zone skipped
// first; `ip` the address the registers belong to.
void emit_save(Writer &w, int32_t rz, uint64_t ip)
{
    if (rz) lea_rsp(w, -rz);
    w.bytes({0x6a, 0x2b});  // pushq $0x2b: ss
    lea_rsp(w, -8);         // sp, filled below
    w.bytes({0x9c});        // pushfq: flags, before anything changes them
    // testl $kSlowFlags,(%rsp); jz 1f; pushq (%rsp); andl $~kSlowFlags,(%rsp); popfq; 1:
    // The calls below get the ABI's clear direction flag, and TF NT AC ID are off.
    w.bytes({0xf7, 0x04, 0x24});
    w.u32(kSlowFlags);
    w.bytes({0x74, 0x0b});
    w.bytes({0xff, 0x34, 0x24});
    w.bytes({0x81, 0x24, 0x24});
    w.u32(~kSlowFlags);
    w.bytes({0x9d});
    w.bytes({0x6a, 0x33});  // pushq $0x33: cs
    lea_rsp(w, -8);         // ip, filled below
    w.bytes({0x6a, 0xff});  // pushq $-1: orig_ax
    w.bytes({0x57, 0x56, 0x52, 0x51, 0x50});                          // rdi rsi rdx rcx rax
    w.bytes({0x41, 0x50, 0x41, 0x51, 0x41, 0x52, 0x41, 0x53});        // r8 r9 r10 r11
    w.bytes({0x53, 0x55});                                            // rbx rbp
    w.bytes({0x41, 0x54, 0x41, 0x55, 0x41, 0x56, 0x41, 0x57});        // r12 r13 r14 r15
    // sp: the stack pointer the thread had at `ip`.
    w.bytes({0x48, 0x8d, 0x84, 0x24});  // lea disp32(%rsp),%rax
    w.u32(static_cast<uint32_t>(kPtRegsSize + rz));
    w.bytes({0x48, 0x89, 0x84, 0x24, 152, 0, 0, 0});  // mov %rax,152(%rsp)
    w.bytes({0x48, 0xb8});                            // movabs $ip,%rax
    w.u64(ip);
    w.bytes({0x48, 0x89, 0x84, 0x24, 128, 0, 0, 0});  // mov %rax,128(%rsp)
}

// Step 2: call fn(arg, regs), fn being lp_detour_call_pre or _post (detour_call.S: it aligns
// the stack, calls the dispatcher, and its call frame information lets unwinders started in a
// handler walk on into the probed function); rbx keeps regs across the call (it was saved in
// pt_regs). Leaves rsp = regs and the result in eax.
void emit_call(Writer &w, uint64_t fn, uint64_t arg)
{
    w.bytes({0x48, 0x89, 0xe3});  // mov %rsp,%rbx
    w.bytes({0x48, 0x89, 0xe6});  // mov %rsp,%rsi
    w.bytes({0x48, 0xbf});        // movabs $arg,%rdi
    w.u64(arg);
    w.bytes({0x48, 0xb8});  // movabs $fn,%rax
    w.u64(fn);
    w.bytes({0xff, 0xd0});  // call *%rax
}

// mov disp(%rsp),%al (ah: false) or %ah (true), with an 8- or 32-bit displacement.
void mov_rsp_byte(Writer &w, int32_t disp, bool ah)
{
    const uint8_t reg = ah ? 0x20 : 0x00;
    if (disp == 0) {
        w.bytes({0x8a, static_cast<uint8_t>(0x04 | reg), 0x24});
    } else if (disp >= -128 && disp <= 127) {
        w.bytes({0x8a, static_cast<uint8_t>(0x44 | reg), 0x24, static_cast<uint8_t>(disp)});
    } else {
        w.bytes({0x8a, static_cast<uint8_t>(0x84 | reg), 0x24});
        w.u32(static_cast<uint32_t>(disp));
    }
}

// The six arithmetic flags (CF PF AF ZF SF OF) from the flags word at off(%rsp), without popfq
// (about 20 cycles), with rax as scratch (restored after): sahf, and an add for OF.
void emit_arith_flags(Writer &w, int32_t off)
{
    mov_rsp_byte(w, off + 1, false);  // mov off+1(%rsp),%al: flags bits 8..15
    w.bytes({0x24, 0x08});            // and $8,%al: OF
    w.bytes({0x04, 0x78});            // add $0x78,%al: sets OF exactly when al was 8
    mov_rsp_byte(w, off, true);       // mov off(%rsp),%ah: SF ZF AF PF CF
    w.bytes({0x9e});                  // sahf
}

// Restores the flags saved at off(%rsp) (off < 255), with rax as scratch (restored
// after); see kSlowFlags.
void emit_restore_flags(Writer &w, uint8_t off)
{
    w.bytes({0xf7, 0x84, 0x24, off, 0, 0, 0});  // testl $kSlowFlags,off(%rsp)
    w.u32(kSlowFlags);
    w.bytes({0x75, 0x00});  // jnz slow (its offset written below)
    const size_t fast = w.pos;
    emit_arith_flags(w, off);
    w.bytes({0xeb, 0x08});  // jmp over the slow path
    if (w.ok) w.out[fast - 1] = static_cast<uint8_t>(w.pos - fast);
    w.bytes({0xff, 0xb4, 0x24, off, 0, 0, 0});  // slow: pushq off(%rsp)
    w.bytes({0x9d});                            // popfq
}

// Restores every register from the pt_regs at rsp, the stack pointer last (lp_kret_full_tail
// does the same, for case 3).
void emit_restore(Writer &w)
{
    emit_restore_flags(w, 144);
    w.bytes({0x41, 0x5f, 0x41, 0x5e, 0x41, 0x5d, 0x41, 0x5c});  // r15 r14 r13 r12
    w.bytes({0x5d, 0x5b});                                      // rbp rbx
    w.bytes({0x41, 0x5b, 0x41, 0x5a, 0x41, 0x59, 0x41, 0x58});  // r11 r10 r9 r8
    w.bytes({0x58, 0x59, 0x5a, 0x5e, 0x5f});                    // rax rcx rdx rsi rdi
    w.bytes({0x48, 0x8b, 0x64, 0x24, 32});                      // mov 32(%rsp),%rsp: the saved sp
}

// Appends a relocated sub-region (instructions [from, to) of `region`); with `jump_back`
// false, the trailing jump back is dropped (more code follows).
bool emit_relocated(Writer &w, const Region &region, size_t from, size_t to, bool jump_back,
                    RelocMap *map)
{
    Region sub;
    sub.addr = region.insns[from].addr;
    sub.n = to - from;
    sub.len = 0;
    for (size_t i = from; i < to; ++i) {
        sub.insns[i - from] = region.insns[i];
        sub.len += region.insns[i].len;
    }
    RelocMap m;
    int n = relocate_region(sub, w.here(), w.out + w.pos, w.cap - w.pos, &m);
    if (n < 0) return false;
    if (!jump_back) n -= static_cast<int>(kJmpLen);  // the region's trailing e9 rel32
    for (size_t i = 0; i < m.n; ++i) {
        map->orig[map->n] = m.orig[i];
        map->offset[map->n] = static_cast<uint32_t>(w.pos + m.offset[i]);
        ++map->n;
    }
    w.pos += static_cast<size_t>(n);
    return true;
}

// The conditional branches after a call: 0 -> `zero`, 1 -> `one`, else fall through into an
// int3 (resume from regs). Returns the int3's offset; the two rel32 fields are patched later.
struct Branches {
    size_t je_zero, je_one, je_three, trap;
};
Branches emit_dispatch_result(Writer &w, bool has_one, bool has_three)
{
    Branches b{};
    w.bytes({0x85, 0xc0});  // test %eax,%eax
    w.bytes({0x0f, 0x84});  // je rel32
    b.je_zero = w.pos;
    w.u32(0);
    if (has_one) {
        w.bytes({0x83, 0xf8, 0x01});  // cmp $1,%eax
        w.bytes({0x0f, 0x84});        // je rel32
        b.je_one = w.pos;
        w.u32(0);
    }
    if (has_three) {
        w.bytes({0x83, 0xf8, 0x03});  // cmp $3,%eax
        w.bytes({0x0f, 0x84});        // je rel32
        b.je_three = w.pos;
        w.u32(0);
    }
    b.trap = w.pos;
    w.bytes({0xcc});
    return b;
}

void patch_rel32(Writer &w, size_t field, size_t target)
{
    int32_t rel = static_cast<int32_t>(static_cast<int64_t>(target) - static_cast<int64_t>(field + 4));
    std::memcpy(w.out + field, &rel, 4);
}


// ---- The light detour (detour.hpp) ----

// mov %reg,disp(%rsp) (store) or mov disp(%rsp),%reg (load); reg in encoding order, 0..15.
void mov_rsp_slot(Writer &w, unsigned reg, int32_t disp, bool store)
{
    const uint8_t rex = static_cast<uint8_t>(0x48 | (reg >= 8 ? 0x04 : 0));
    const uint8_t op = store ? 0x89 : 0x8b;
    const uint8_t r = static_cast<uint8_t>((reg & 7) << 3);
    if (disp >= -128 && disp <= 127) {
        w.bytes({rex, op, static_cast<uint8_t>(0x44 | r), 0x24, static_cast<uint8_t>(disp)});
    } else {
        w.bytes({rex, op, static_cast<uint8_t>(0x84 | r), 0x24});
        w.u32(static_cast<uint32_t>(disp));
    }
}

constexpr int32_t light_slot(unsigned reg) { return 8 + 8 * static_cast<int32_t>(reg); }

// A jmp rel32 from here to `target`; false when out of reach.
bool jmp_to(Writer &w, uint64_t target)
{
    int64_t rel = static_cast<int64_t>(target) - static_cast<int64_t>(w.here() + 5);
    if (rel < INT32_MIN || rel > INT32_MAX) return false;
    w.bytes({0xe9});
    w.u32(static_cast<uint32_t>(static_cast<int32_t>(rel)));
    return true;
}

// A light entry's way out, the registers but rax already back: the flags (the saved ones hold
// none of kSlowFlags: the entry left those to the full path, so the six arithmetic bits are
// all), rax, and the frame left.
void emit_light_leave(Writer &w, int32_t rz)
{
    emit_arith_flags(w, 0);  // rax, restored next, as scratch
    mov_rsp_slot(w, 0, light_slot(0), false);
    lea_rsp(w, static_cast<int32_t>(kLightFrame) + rz);
}

// The light entry's finish, right after its call (jump_light.S): with rec = core::tl_rec, read
// at its thread-pointer offset `tls`, in rdx, and rdi = 0 (registers the dispatcher writes):
// in_handler, busy's level 0 slot, its depth, and last jump_light (the level's frame, set
// before the level was taken), all 0. Fixed encodings: the dispatcher skips exactly
// LP_LIGHT_FINISH_SIZE bytes to leave it out.
void emit_light_finish(Writer &w, int32_t tls)
{
    const size_t start = w.pos;
    w.bytes({0x64, 0x48, 0x8b, 0x14, 0x25});  // mov %fs:tls,%rdx
    w.u32(static_cast<uint32_t>(tls));
    w.bytes({0x31, 0xff});                               // xor %edi,%edi
    w.bytes({0x89, 0x7a, LP_REC_IN_HANDLER});            // mov %edi,in_handler(%rdx)
    w.bytes({0x48, 0x89, 0x7a, LP_REC_BUSY_SLOT0});      // mov %rdi,busy.slot[0](%rdx)
    w.bytes({0x89, 0x7a, LP_REC_BUSY_DEPTH});            // mov %edi,busy.depth(%rdx)
    w.bytes({0x48, 0x89, 0x7a, LP_REC_JUMP_LIGHT});      // mov %rdi,jump_light(%rdx)
    if (w.ok && w.pos - start != LP_LIGHT_FINISH_SIZE) w.ok = false;
}

// The light entry, emitted after the full detour: `full` is its entry, `plain` the full
// path's relocated region (offsets in the block). With `own`, it has its own copy of the
// relocated region instead (one jump fewer per hit), mapped in *own.
// With `kret_tail` (lp_kret_light_tail; function-entry shape only), a kretprobe's light handler
// may answer kLightKret: the registers but rax restored, the relocated region's address goes to
// sp - 24 (the frame's r13 word, restored already) and kret_tail does the rest, on to
// lp_kret_rsb_call, as the full path's case 3 does.
bool emit_light(Writer &w, bool mid, uint32_t mask, uint64_t light_fn, int32_t tls, uint64_t arg,
                uint32_t full, uint32_t plain, const Region &region, RelocMap *own, uint64_t kret_tail)
{
    const int32_t rz = mid ? kRedZone : 0;
    const int32_t below = rz + static_cast<int32_t>(kLightFrame) - 8;
    mask |= light_dispatcher_writes();  // rax and rdi are the entry's own too
    lea_rsp(w, -below);  // lea changes no flag
    w.bytes({0x9c});     // pushfq
    mov_rsp_slot(w, 0, light_slot(0), true);
    // DF, TF, NT, AC or ID set (rare): the full path, which handles them, by the way out below
    // (it restores rax and the arithmetic flags; the others were never changed).
    w.bytes({0xf7, 0x04, 0x24});  // testl $kSlowFlags,(%rsp)
    w.u32(kSlowFlags);
    w.bytes({0x0f, 0x85});  // jnz full tail (rel32, patched)
    size_t jnz_slow = w.pos;
    w.u32(0);
    for (unsigned r = 1; r < 16; ++r)
        if (mask & (1u << r)) mov_rsp_slot(w, r, light_slot(r), true);
    w.bytes({0x48, 0xbf});  // movabs $arg,%rdi
    w.u64(arg);
    int64_t rel = static_cast<int64_t>(light_fn) - static_cast<int64_t>(w.here() + 5);
    if (rel >= INT32_MIN && rel <= INT32_MAX) {
        w.bytes({0xe8});  // call rel32
        w.u32(static_cast<uint32_t>(static_cast<int32_t>(rel)));
    } else {
        w.bytes({0x48, 0xb8});  // movabs $light_fn,%rax
        w.u64(light_fn);
        w.bytes({0xff, 0xd0});  // call *%rax
    }
    emit_light_finish(w, tls);
    // 0: plain. Else the full path: the point changed, or this hit needs more, or the handler
    // asked to resume at regs->ip, which it could not change: the probed address, where the
    // hit would start again.
    // The registers but rax first (no flag changes), then which way.
    for (unsigned r = 1; r < 16; ++r)
        if (mask & (1u << r)) mov_rsp_slot(w, r, light_slot(r), false);
    w.bytes({0x85, 0xc0, 0x0f, 0x85});  // test %eax,%eax; jne full (rel32, patched)
    const size_t jne = w.pos;
    w.u32(0);
    emit_light_leave(w, rz);
    if (own ? !emit_relocated(w, region, 0, region.n, true, own) : !jmp_to(w, w.base + plain)) return false;
    if (!w.ok) return false;
    patch_rel32(w, jne, w.pos);
    if (kret_tail && !mid) {
        static_assert(kLightFrame - 24 == light_slot(13));
        w.bytes({0x83, 0xf8, kLightKret, 0x0f, 0x85});  // cmp $kLightKret,%eax; jne full tail
        const size_t jne_full = w.pos;
        w.u32(0);
        w.bytes({0x48, 0xb8});  // movabs $relocated,%rax
        w.u64(w.base + (own ? own->offset[0] : plain));
        mov_rsp_slot(w, 0, light_slot(13), true);
        w.bytes({0xff, 0x25, 0, 0, 0, 0});  // jmp *0(%rip)
        w.u64(kret_tail);
        if (!w.ok) return false;
        patch_rel32(w, jne_full, w.pos);
    }
    patch_rel32(w, jnz_slow, w.pos);
    emit_light_leave(w, rz);
    return jmp_to(w, w.base + full) && w.ok;
}

}  // namespace

int build_detour(const Region &region, uint64_t at, bool mid, const DetourFns &fns, uint64_t arg,
                 uint32_t light_mask, bool kret, uint8_t *out, size_t code_offset, size_t cap,
                 DetourLayout *layout)
{
    const uint64_t pre_fn = fns.pre, post_fn = fns.post;
    if (region.n == 0 || region.n > kMaxRegionInsns) return -EINVAL;
    Writer w{out, code_offset, cap, at};
    DetourLayout L;
    const Insn &first = region.insns[0];
    // A post handler runs after the first instruction; a control transfer there has no
    // "after" inside the detour (the dispatcher emulates it on the post path instead).
    L.has_post_path = first.cls == InsnClass::kOutOfLine;

    L.entry = static_cast<uint32_t>(w.pos);
    emit_save(w, mid ? kRedZone : 0, region.addr);
    emit_call(w, pre_fn, arg);
    Branches pre = emit_dispatch_result(w, L.has_post_path, true);
    L.resume_trap = static_cast<uint32_t>(pre.trap);

    // Plain path.
    patch_rel32(w, pre.je_zero, w.pos);
    const size_t plain_path = w.pos;
    emit_restore(w);
    if (!emit_relocated(w, region, 0, region.n, true, &L.plain)) return -ERANGE;

    if (L.has_post_path) {
        patch_rel32(w, pre.je_one, w.pos);
        emit_restore(w);
        RelocMap one;
        if (!emit_relocated(w, region, 0, 1, false, &one)) return -ERANGE;
        L.post_insn1 = one.offset[0];
        L.post_after1 = static_cast<uint32_t>(w.pos);
        // After the first instruction the thread is mid-function: skip the red zone.
        emit_save(w, kRedZone, region.addr + first.len);
        emit_call(w, post_fn, arg);
        Branches post = emit_dispatch_result(w, false, false);
        L.post_resume_trap = static_cast<uint32_t>(post.trap);
        patch_rel32(w, post.je_zero, w.pos);
        emit_restore(w);
        if (region.n > 1) {
            if (!emit_relocated(w, region, 1, region.n, true, &L.post_rest)) return -ERANGE;
        } else {
            // Only one instruction was replaced: jump back after it.
            if (!jmp_to(w, region.addr + region.len)) return -ERANGE;
        }
    }
    // Case 3: a kretprobe's return slot replaced (function entries only: the words below the
    // stack pointer there are free, and lp_kret_rsb_call's relies on it).
    if (kret && !mid) {
        L.kret_path = static_cast<uint32_t>(w.pos);
        patch_rel32(w, pre.je_three, w.pos);
        w.bytes({0x48, 0xb8});  // movabs $relocated,%rax
        w.u64(at + L.plain.offset[0]);
        w.bytes({0x48, 0x89, 0x44, 0x24, 120});  // mov %rax,120(%rsp): orig_ax
        w.bytes({0xff, 0x25, 0, 0, 0, 0});       // jmp *0(%rip)
        w.u64(fns.kret_full_tail);
    } else {
        patch_rel32(w, pre.je_three, plain_path);
    }
    L.full_entry = L.entry;
    if (!w.ok) return -ENOSPC;
    if (light_mask && fns.light_tls) {
        // With its own copy of the relocated region when there is room, else with a jump to the
        // full path's; without room for either (a long relocated region, a full mask), the
        // detour has no light entry.
        const uint64_t light_fn = mid ? fns.light_mid : kret ? fns.kret_light_entry : fns.light_entry;
        Writer lw = w;
        auto try_light = [&](RelocMap *own) {
            lw = w;
            return emit_light(lw, mid, light_mask, light_fn, fns.light_tls, arg, L.full_entry, L.plain.offset[0],
                              region, own, kret ? fns.kret_light_tail : 0);
        };
        RelocMap own;
        bool fits = try_light(&own) && own.n == L.plain.n;
        if (fits) {
            for (size_t i = 0; i < own.n; ++i) L.light_plain[i] = static_cast<uint16_t>(own.offset[i]);
        } else {
            fits = try_light(nullptr);
        }
        if (fits) {
            L.entry = static_cast<uint32_t>(w.pos);
            L.light_mask = light_mask;
            L.light_kret = kret && !mid;
            w = lw;
        }
    }
    L.end = static_cast<uint32_t>(w.pos);
    *layout = L;
    return 0;
}

}  // namespace liveprobe::arch
