// Decoder, classifier and slot builder (src/arch/x86_64/{insn,relocate}.cpp).
//
// Every case is the machine code it is about, annotated with its disassembly. Slots are
// checked byte for byte and then decoded again, to show that a RIP-relative operand still
// addresses the same byte from the slot and that the tail jumps back to the next instruction.
#include <Zydis/Zydis.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <ostream>
#include <string>
#include <vector>

#include "arch/x86_64/insn.hpp"

namespace liveprobe::arch {
namespace {

using Bytes = std::vector<uint8_t>;

// Where the probed instruction lives, and a slot 4 KiB below it: every RIP-relative
// displacement grows by exactly 0x1000, and the jump back is `jmp .+0x1000` (e9 fb 0f 00 00).
constexpr uint64_t kAddr = 0x555555554000;
constexpr uint64_t kNear = kAddr - 0x1000;
constexpr uint64_t kFar = kAddr + 0x100000000;  // 4 GiB away: beyond any rel32

Insn decode_ok(const Bytes &b, uint64_t addr = kAddr) {
    Insn insn;
    const char *why = "unset";
    const int rc = decode(addr, b.data(), b.size(), insn, &why);
    EXPECT_EQ(rc, 0) << (why ? why : "");
    return insn;
}

int decode_err(const Bytes &b, const char **why) {
    Insn insn;
    return decode(kAddr, b.data(), b.size(), insn, why);
}

// Absolute address of the first RIP-relative memory operand of the instruction at buf,
// decoded as if it lived at `runtime`.
uint64_t rip_target(const uint8_t *buf, size_t n, uint64_t runtime) {
    ZydisDecoder d;
    ZydisDecoderInit(&d, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
    ZydisDecodedInstruction zi;
    ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
    EXPECT_TRUE(ZYAN_SUCCESS(ZydisDecoderDecodeFull(&d, buf, n, &zi, ops)));
    for (size_t i = 0; i < zi.operand_count_visible; ++i) {
        const ZydisDecodedOperand &op = ops[i];
        const bool rel = op.type == ZYDIS_OPERAND_TYPE_IMMEDIATE && op.imm.is_relative;
        const bool rip = op.type == ZYDIS_OPERAND_TYPE_MEMORY &&
                         (op.mem.base == ZYDIS_REGISTER_RIP || op.mem.base == ZYDIS_REGISTER_EIP);
        if (rel || rip) {
            ZyanU64 a = 0;
            EXPECT_TRUE(ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(&zi, &op, runtime, &a)));
            return a;
        }
    }
    ADD_FAILURE() << "no RIP-relative operand";
    return 0;
}

// ---------------------------------------------------------------------------------------------
// Slots
// ---------------------------------------------------------------------------------------------

struct SlotCase {
    const char *name;
    Bytes in;    // at kAddr
    Bytes slot;  // at kNear, tail included
};

// clang-format off
const SlotCase kSlotCases[] = {
    // RIP-relative: only the four displacement bytes change (+0x1000).
    {"load",            // mov rax, [rip+0x1000]
     {0x48, 0x8b, 0x05, 0x00, 0x10, 0x00, 0x00},
     {0x48, 0x8b, 0x05, 0x00, 0x20, 0x00, 0x00,  0xe9, 0xfb, 0x0f, 0x00, 0x00}},
    {"store",           // mov [rip+0x1000], rax
     {0x48, 0x89, 0x05, 0x00, 0x10, 0x00, 0x00},
     {0x48, 0x89, 0x05, 0x00, 0x20, 0x00, 0x00,  0xe9, 0xfb, 0x0f, 0x00, 0x00}},
    {"lea_negative",    // lea rdi, [rip-0x20]
     {0x48, 0x8d, 0x3d, 0xe0, 0xff, 0xff, 0xff},
     {0x48, 0x8d, 0x3d, 0xe0, 0x0f, 0x00, 0x00,  0xe9, 0xfb, 0x0f, 0x00, 0x00}},
    {"cmp_imm32_after_disp",  // cmp dword [rip+0x100], 0x12345678
     {0x81, 0x3d, 0x00, 0x01, 0x00, 0x00, 0x78, 0x56, 0x34, 0x12},
     {0x81, 0x3d, 0x00, 0x11, 0x00, 0x00, 0x78, 0x56, 0x34, 0x12,  0xe9, 0xfb, 0x0f, 0x00, 0x00}},
    {"movb_imm8_after_disp",  // mov byte [rip+0x10], 0x7f
     {0xc6, 0x05, 0x10, 0x00, 0x00, 0x00, 0x7f},
     {0xc6, 0x05, 0x10, 0x10, 0x00, 0x00, 0x7f,  0xe9, 0xfb, 0x0f, 0x00, 0x00}},
    {"imul_imm8_after_disp",  // imul eax, [rip+0x40], 5
     {0x6b, 0x05, 0x40, 0x00, 0x00, 0x00, 0x05},
     {0x6b, 0x05, 0x40, 0x10, 0x00, 0x00, 0x05,  0xe9, 0xfb, 0x0f, 0x00, 0x00}},
    {"lock_add_rip",    // lock add qword [rip+0x200], 1
     {0xf0, 0x48, 0x83, 0x05, 0x00, 0x02, 0x00, 0x00, 0x01},
     {0xf0, 0x48, 0x83, 0x05, 0x00, 0x12, 0x00, 0x00, 0x01,  0xe9, 0xfb, 0x0f, 0x00, 0x00}},
    {"sse_movaps",      // movaps xmm0, [rip+0x40]
     {0x0f, 0x28, 0x05, 0x40, 0x00, 0x00, 0x00},
     {0x0f, 0x28, 0x05, 0x40, 0x10, 0x00, 0x00,  0xe9, 0xfb, 0x0f, 0x00, 0x00}},
    {"avx_vmovdqu_ymm", // vmovdqu ymm1, [rip+0x80]
     {0xc5, 0xfe, 0x6f, 0x0d, 0x80, 0x00, 0x00, 0x00},
     {0xc5, 0xfe, 0x6f, 0x0d, 0x80, 0x10, 0x00, 0x00,  0xe9, 0xfb, 0x0f, 0x00, 0x00}},
    {"avx512_vmovdqu64",  // vmovdqu64 zmm2, [rip+0x1000] (EVEX: RIP-relative is never disp8*N)
     {0x62, 0xf1, 0xfe, 0x48, 0x6f, 0x15, 0x00, 0x10, 0x00, 0x00},
     {0x62, 0xf1, 0xfe, 0x48, 0x6f, 0x15, 0x00, 0x20, 0x00, 0x00,  0xe9, 0xfb, 0x0f, 0x00, 0x00}},
    {"push_rip",        // push qword [rip+0x30]
     {0xff, 0x35, 0x30, 0x00, 0x00, 0x00},
     {0xff, 0x35, 0x30, 0x10, 0x00, 0x00,  0xe9, 0xfb, 0x0f, 0x00, 0x00}},
    {"eip_relative",    // mov eax, [eip+0x10]  (0x67: address truncated to 32 bits)
     {0x67, 0x8b, 0x05, 0x10, 0x00, 0x00, 0x00},
     {0x67, 0x8b, 0x05, 0x10, 0x10, 0x00, 0x00,  0xe9, 0xfb, 0x0f, 0x00, 0x00}},

    // Position-independent: copied as is.
    {"push",            // push rbx
     {0x53},
     {0x53,  0xe9, 0xfb, 0x0f, 0x00, 0x00}},
    {"pop_rex",         // pop r12
     {0x41, 0x5c},
     {0x41, 0x5c,  0xe9, 0xfb, 0x0f, 0x00, 0x00}},
    {"lock_add",        // lock add dword [rax], 1
     {0xf0, 0x83, 0x00, 0x01},
     {0xf0, 0x83, 0x00, 0x01,  0xe9, 0xfb, 0x0f, 0x00, 0x00}},
    {"rep_movsb",       // rep movsb
     {0xf3, 0xa4},
     {0xf3, 0xa4,  0xe9, 0xfb, 0x0f, 0x00, 0x00}},
    {"opsize_xchg",     // xchg ax, ax (66 90)
     {0x66, 0x90},
     {0x66, 0x90,  0xe9, 0xfb, 0x0f, 0x00, 0x00}},
    {"rexw_add",        // add rax, rbx
     {0x48, 0x01, 0xd8},
     {0x48, 0x01, 0xd8,  0xe9, 0xfb, 0x0f, 0x00, 0x00}},
    {"fs_mov",          // mov rax, fs:[0x28]  (absolute, not RIP-relative)
     {0x64, 0x48, 0x8b, 0x04, 0x25, 0x28, 0x00, 0x00, 0x00},
     {0x64, 0x48, 0x8b, 0x04, 0x25, 0x28, 0x00, 0x00, 0x00,  0xe9, 0xfb, 0x0f, 0x00, 0x00}},
    {"endbr64",         // endbr64
     {0xf3, 0x0f, 0x1e, 0xfa},
     {0xf3, 0x0f, 0x1e, 0xfa,  0xe9, 0xfb, 0x0f, 0x00, 0x00}},
    {"nop1",            // nop
     {0x90},
     {0x90,  0xe9, 0xfb, 0x0f, 0x00, 0x00}},
    {"nop3",            // nop dword [rax]
     {0x0f, 0x1f, 0x00},
     {0x0f, 0x1f, 0x00,  0xe9, 0xfb, 0x0f, 0x00, 0x00}},
    {"nop5",            // nop dword [rax+rax*1+0x0]
     {0x0f, 0x1f, 0x44, 0x00, 0x00},
     {0x0f, 0x1f, 0x44, 0x00, 0x00,  0xe9, 0xfb, 0x0f, 0x00, 0x00}},
    {"nop9",            // nop word [rax+rax*1+0x0]  (disp32)
     {0x66, 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00},
     {0x66, 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00,  0xe9, 0xfb, 0x0f, 0x00, 0x00}},
    {"hlt",             // hlt  (privileged: faults out of line as it would in place)
     {0xf4},
     {0xf4,  0xe9, 0xfb, 0x0f, 0x00, 0x00}},
    {"ud2",             // ud2
     {0x0f, 0x0b},
     {0x0f, 0x0b,  0xe9, 0xfb, 0x0f, 0x00, 0x00}},
};
// clang-format on

void PrintTo(const SlotCase &c, std::ostream *os) {
    *os << c.name;
}

class Slot : public ::testing::TestWithParam<SlotCase> {};

TEST_P(Slot, BytesAndReDecode) {
    const SlotCase &c = GetParam();
    const Insn insn = decode_ok(c.in);
    ASSERT_EQ(insn.cls, InsnClass::kOutOfLine);
    ASSERT_EQ(insn.len, c.in.size());

    uint8_t out[64];
    std::memset(out, 0xaa, sizeof(out));
    const int n = build_slot(insn, kNear, SlotTail::kJumpBack, out, sizeof(out), nullptr);
    ASSERT_EQ(n, static_cast<int>(c.slot.size()));
    EXPECT_EQ(Bytes(out, out + n), c.slot);
    EXPECT_EQ(out[n], 0xaa) << "wrote past the returned length";

    // The copy has the original's length, and from kNear addresses what it did from kAddr.
    EXPECT_EQ(insn_length(out, n), insn.len);
    if (insn.rip_relative) {
        EXPECT_EQ(rip_target(out, n, kNear), rip_target(c.in.data(), c.in.size(), kAddr));
    }
    // The tail continues at the original next instruction.
    EXPECT_EQ(rip_target(out + insn.len, n - insn.len, kNear + insn.len), kAddr + insn.len);
}

INSTANTIATE_TEST_SUITE_P(Relocator, Slot, ::testing::ValuesIn(kSlotCases),
                         [](const auto &info) { return std::string(info.param.name); });

TEST(Relocator, RipRelativeFlagOnlyWhereRipIsTheBase) {
    // mov rax, [rip+0x1000]
    EXPECT_TRUE(decode_ok({0x48, 0x8b, 0x05, 0x00, 0x10, 0x00, 0x00}).rip_relative);
    // mov rax, fs:[0x28]: a disp32 with no base is absolute
    EXPECT_FALSE(decode_ok({0x64, 0x48, 0x8b, 0x04, 0x25, 0x28, 0x00, 0x00, 0x00}).rip_relative);
    // nop word [rax+rax*1+0x0]
    EXPECT_FALSE(decode_ok({0x66, 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00}).rip_relative);
}

TEST(Relocator, FarSlotJumpsBackThroughAbsoluteJump) {
    // add rax, rbx, copied 4 GiB away: e9 cannot reach, so jmp *0(%rip); .quad kAddr+3
    const Insn insn = decode_ok({0x48, 0x01, 0xd8});
    uint8_t out[32];
    const int n = build_slot(insn, kFar, SlotTail::kJumpBack, out, sizeof(out), nullptr);
    const Bytes expected = {0x48, 0x01, 0xd8,                                 // add rax, rbx
                            0xff, 0x25, 0x00, 0x00, 0x00, 0x00,               // jmp [rip+0]
                            0x03, 0x40, 0x55, 0x55, 0x55, 0x55, 0x00, 0x00};  // .quad kAddr+3
    ASSERT_EQ(n, 17);
    EXPECT_EQ(Bytes(out, out + n), expected);
}

TEST(Relocator, RipRelativeOutOfReachIsERANGE) {
    // mov rax, [rip+0x1000] copied 4 GiB away
    const Insn insn = decode_ok({0x48, 0x8b, 0x05, 0x00, 0x10, 0x00, 0x00});
    uint8_t out[32];
    EXPECT_EQ(build_slot(insn, kFar, SlotTail::kJumpBack, out, sizeof(out), nullptr), -ERANGE);
    EXPECT_EQ(build_slot(insn, kFar, SlotTail::kTrap, out, sizeof(out), nullptr), -ERANGE);
}

TEST(Relocator, RipRelativeReachBoundary) {
    // mov rax, [rip+0x7fffefff]: from kNear the displacement becomes exactly INT32_MAX.
    const Insn insn = decode_ok({0x48, 0x8b, 0x05, 0xff, 0xef, 0xff, 0x7f});
    uint8_t out[32];
    ASSERT_EQ(build_slot(insn, kNear, SlotTail::kTrap, out, sizeof(out), nullptr), 8);
    const Bytes expected = {0x48, 0x8b, 0x05, 0xff, 0xff, 0xff, 0x7f,  // mov rax, [rip+0x7fffffff]
                            0xcc};                                     // int3
    EXPECT_EQ(Bytes(out, out + 8), expected);
    EXPECT_EQ(rip_target(out, 8, kNear), kAddr + 7 + 0x7fffefff);
    // One byte further down it no longer fits.
    EXPECT_EQ(build_slot(insn, kNear - 1, SlotTail::kTrap, out, sizeof(out), nullptr), -ERANGE);

    // mov rax, [rip-0x80000000] from one byte above: below INT32_MIN.
    const Insn low = decode_ok({0x48, 0x8b, 0x05, 0x00, 0x00, 0x00, 0x80});
    EXPECT_EQ(build_slot(low, kAddr, SlotTail::kTrap, out, sizeof(out), nullptr), 8);
    EXPECT_EQ(build_slot(low, kAddr + 1, SlotTail::kTrap, out, sizeof(out), nullptr), -ERANGE);
}

TEST(Relocator, EipRelativeAlwaysReaches) {
    // mov eax, [eip+0x10]: the address wraps at 4 GiB, so a slot anywhere can address it.
    const Bytes in = {0x67, 0x8b, 0x05, 0x10, 0x00, 0x00, 0x00};
    const Insn insn = decode_ok(in);
    uint8_t out[32];
    const int n = build_slot(insn, kFar + 0x123, SlotTail::kTrap, out, sizeof(out), nullptr);
    ASSERT_EQ(n, 8);
    EXPECT_EQ(rip_target(out, n, kFar + 0x123), rip_target(in.data(), in.size(), kAddr));
}

TEST(Relocator, TrapTail) {
    // cmp dword [rip+0x100], 0x12345678; then int3 for the post handler
    const Insn insn = decode_ok({0x81, 0x3d, 0x00, 0x01, 0x00, 0x00, 0x78, 0x56, 0x34, 0x12});
    uint8_t out[32];
    size_t trap = 0;
    const int n = build_slot(insn, kNear, SlotTail::kTrap, out, sizeof(out), &trap);
    const Bytes expected = {0x81, 0x3d, 0x00, 0x11, 0x00, 0x00, 0x78, 0x56, 0x34, 0x12,  // cmp
                            0xcc};                                                       // int3
    ASSERT_EQ(n, 11);
    EXPECT_EQ(Bytes(out, out + n), expected);
    EXPECT_EQ(trap, 10u);
}

TEST(Relocator, CapTooSmallIsENOSPC) {
    const Insn insn = decode_ok({0x48, 0x01, 0xd8});  // add rax, rbx
    uint8_t out[32];
    EXPECT_EQ(build_slot(insn, kNear, SlotTail::kJumpBack, out, 7, nullptr), -ENOSPC);
    EXPECT_EQ(build_slot(insn, kNear, SlotTail::kJumpBack, out, 8, nullptr), 8);
    EXPECT_EQ(build_slot(insn, kFar, SlotTail::kJumpBack, out, 16, nullptr), -ENOSPC);
    EXPECT_EQ(build_slot(insn, kFar, SlotTail::kJumpBack, out, 17, nullptr), 17);
    EXPECT_EQ(build_slot(insn, kNear, SlotTail::kTrap, out, 3, nullptr), -ENOSPC);
    EXPECT_EQ(build_slot(insn, kNear, SlotTail::kTrap, out, 4, nullptr), 4);
}

TEST(Relocator, BranchesAreNotSlotted) {
    const Insn insn = decode_ok({0xe8, 0x00, 0x00, 0x00, 0x00});  // call .+5
    uint8_t out[32];
    EXPECT_EQ(build_slot(insn, kNear, SlotTail::kJumpBack, out, sizeof(out), nullptr), -EINVAL);
}

// ---------------------------------------------------------------------------------------------
// Classification
// ---------------------------------------------------------------------------------------------

struct BranchCase {
    const char *name;
    Bytes in;
    int64_t target;  // relative to kAddr; INT64_MIN for indirect branches and ret
    bool rip_relative = false;
};

constexpr int64_t kIndirect = INT64_MIN;

// clang-format off
const BranchCase kBranchCases[] = {
    {"jmp_rel8",       {0xeb, 0x10},                          2 + 0x10},   // jmp .+0x12
    {"jmp_rel8_back",  {0xeb, 0xfe},                          0},          // jmp .
    {"jmp_rel32",      {0xe9, 0x00, 0x01, 0x00, 0x00},        5 + 0x100},  // jmp .+0x105
    {"bnd_jmp_rel32",  {0xf2, 0xe9, 0x00, 0x01, 0x00, 0x00},  6 + 0x100},  // bnd jmp .+0x106
    {"jz_rel8",        {0x74, 0xfe},                          0},          // jz .
    {"jnz_rel32",      {0x0f, 0x85, 0x00, 0xff, 0xff, 0xff},  6 - 0x100},  // jnz .-0xfa
    {"jz_hinted",      {0x3e, 0x74, 0x00},                    3},          // ds jz .+3 (taken hint)
    {"call_rel32",     {0xe8, 0x10, 0x00, 0x00, 0x00},        5 + 0x10},   // call .+0x15
    {"call_rip",       {0xff, 0x15, 0x00, 0x01, 0x00, 0x00},  kIndirect, true},  // call [rip+0x100]
    {"call_rax",       {0xff, 0xd0},                          kIndirect},  // call rax
    {"call_r11",       {0x41, 0xff, 0xd3},                    kIndirect},  // call r11
    {"call_sib",       {0xff, 0x54, 0xd8, 0x10},              kIndirect},  // call [rax+rbx*8+0x10]
    {"jmp_rax",        {0xff, 0xe0},                          kIndirect},  // jmp rax
    {"notrack_jmp",    {0x3e, 0xff, 0xe0},                    kIndirect},  // notrack jmp rax
    {"jmp_rip",        {0xff, 0x25, 0x00, 0x01, 0x00, 0x00},  kIndirect, true},  // jmp [rip+0x100]
    {"ret",            {0xc3},                                kIndirect},  // ret
    {"ret_imm16",      {0xc2, 0x08, 0x00},                    kIndirect},  // ret 8
    {"bnd_ret",        {0xf2, 0xc3},                          kIndirect},  // bnd ret
    {"rep_ret",        {0xf3, 0xc3},                          kIndirect},  // rep ret
    {"loop",           {0xe2, 0xfe},                          0},          // loop .
    {"loope",          {0xe1, 0x10},                          2 + 0x10},   // loope .+0x12
    {"loopne",         {0xe0, 0x10},                          2 + 0x10},   // loopne .+0x12
    {"loop_a32",       {0x67, 0xe2, 0xfd},                    0},          // loop . (ecx)
    {"jrcxz",          {0xe3, 0x05},                          2 + 5},      // jrcxz .+7
    {"jecxz",          {0x67, 0xe3, 0x05},                    3 + 5},      // jecxz .+8
};
// clang-format on

void PrintTo(const BranchCase &c, std::ostream *os) {
    *os << c.name;
}

class Branch : public ::testing::TestWithParam<BranchCase> {};

TEST_P(Branch, IsEmulatedWithItsTarget) {
    const BranchCase &c = GetParam();
    const Insn insn = decode_ok(c.in);
    EXPECT_EQ(insn.cls, InsnClass::kEmulate);
    EXPECT_EQ(insn.len, c.in.size());
    EXPECT_EQ(insn.addr, kAddr);
    EXPECT_EQ(insn.rip_relative, c.rip_relative);
    if (c.target != kIndirect) {
        EXPECT_EQ(insn.target, kAddr + c.target);
    } else {
        EXPECT_EQ(insn.target, 0u);
    }
}

INSTANTIATE_TEST_SUITE_P(Decode, Branch, ::testing::ValuesIn(kBranchCases),
                         [](const auto &info) { return std::string(info.param.name); });

TEST(Decode, EveryJccConditionBothForms) {
    for (uint8_t cc = 0; cc < 16; ++cc) {
        // j<cc> .+0x22 (rel8), j<cc> .-0x1000+6 (rel32)
        const Insn s = decode_ok({static_cast<uint8_t>(0x70 + cc), 0x20});
        EXPECT_EQ(s.cls, InsnClass::kEmulate) << int(cc);
        EXPECT_EQ(s.target, kAddr + 2 + 0x20) << int(cc);
        const Insn l = decode_ok({0x0f, static_cast<uint8_t>(0x80 + cc), 0x00, 0xf0, 0xff, 0xff});
        EXPECT_EQ(l.cls, InsnClass::kEmulate) << int(cc);
        EXPECT_EQ(l.target, kAddr + 6 - 0x1000) << int(cc);
    }
}

TEST(Decode, OperandsAreKept) {
    // call [rax+rbx*8+0x10]: emulate() reads these, not the decoder
    const Insn insn = decode_ok({0xff, 0x54, 0xd8, 0x10});
    ASSERT_EQ(insn.zi.operand_count_visible, 1);
    EXPECT_EQ(insn.ops[0].type, ZYDIS_OPERAND_TYPE_MEMORY);
    EXPECT_EQ(insn.ops[0].mem.base, ZYDIS_REGISTER_RAX);
    EXPECT_EQ(insn.ops[0].mem.index, ZYDIS_REGISTER_RBX);
    EXPECT_EQ(insn.ops[0].mem.scale, 8);
    EXPECT_EQ(insn.ops[0].mem.disp.value, 0x10);
    for (size_t i = 0; i < insn.len; ++i)
        EXPECT_EQ(insn.bytes[i], (Bytes{0xff, 0x54, 0xd8, 0x10}[i]));
}

struct RefusedCase {
    const char *name;
    Bytes in;
    int err;
    const char *why_contains;
};

// clang-format off
const RefusedCase kRefusedCases[] = {
    {"int3",         {0xcc},                                  -EOPNOTSUPP, "int3"},
    {"int_0x80",     {0xcd, 0x80},                            -EOPNOTSUPP, "int n"},
    {"int1",         {0xf1},                                  -EOPNOTSUPP, "int1"},
    {"syscall",      {0x0f, 0x05},                            -EOPNOTSUPP, "syscall"},
    {"sysenter",     {0x0f, 0x34},                            -EOPNOTSUPP, "sysenter"},
    {"sysexit",      {0x0f, 0x35},                            -EOPNOTSUPP, "sysexit"},
    {"sysretq",      {0x48, 0x0f, 0x07},                      -EOPNOTSUPP, "sysret"},
    {"iretq",        {0x48, 0xcf},                            -EOPNOTSUPP, "iret"},
    {"iretd",        {0xcf},                                  -EOPNOTSUPP, "iret"},
    {"jmp_far_mem",  {0xff, 0x28},                            -EOPNOTSUPP, "far"},  // jmp far [rax]
    {"jmp_far_rexw", {0x48, 0xff, 0x28},                      -EOPNOTSUPP, "far"},  // rex.w jmp far [rax]
    {"call_far_mem", {0xff, 0x18},                            -EOPNOTSUPP, "far"},  // call far [rax]
    {"retf",         {0xcb},                                  -EOPNOTSUPP, "far"},  // ret far
    {"retf_imm16",   {0xca, 0x08, 0x00},                      -EOPNOTSUPP, "far"},  // ret far 8
    {"xbegin",       {0xc7, 0xf8, 0x00, 0x00, 0x00, 0x00},    -EOPNOTSUPP, "xbegin"},
    {"jmp_opsize",   {0x66, 0xe9, 0x00, 0x00, 0x00, 0x00},    -EOPNOTSUPP, "0x66"},  // data16 jmp
    {"call_opsize",  {0x66, 0xe8, 0x00, 0x00, 0x00, 0x00},    -EOPNOTSUPP, "0x66"},  // data16 call
    {"ret_opsize",   {0x66, 0xc3},                            -EOPNOTSUPP, "0x66"},  // data16 ret
    {"jz_opsize",    {0x66, 0x74, 0x00},                      -EOPNOTSUPP, "0x66"},  // data16 jz
    {"call_fs",      {0x64, 0xff, 0x10},                      -EOPNOTSUPP, "fs:"},   // call fs:[rax]
    {"jmp_gs",       {0x65, 0xff, 0x24, 0x25, 0x10, 0x00, 0x00, 0x00},
                                                              -EOPNOTSUPP, "fs:/gs:"},  // jmp gs:[0x10]
    // Not valid in 64-bit mode at all.
    {"jmp_far_ptr",  {0xea, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00}, -EILSEQ, nullptr},  // (jmp 0x10:0)
    {"call_far_ptr", {0x9a, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00}, -EILSEQ, nullptr},  // (call 0x10:0)
    {"into",         {0xce},                                  -EILSEQ, nullptr},
    {"push_es",      {0x06},                                  -EILSEQ, nullptr},
    {"lock_nop",     {0xf0, 0x90},                            -EILSEQ, nullptr},
    {"truncated",    {0x48, 0x8b, 0x05, 0x00},                -EILSEQ, nullptr},  // mov rax, [rip+?
    {"too_long",     {0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66,
                      0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x90}, -EILSEQ, nullptr},
    {"empty",        {},                                      -EILSEQ, nullptr},
};
// clang-format on

void PrintTo(const RefusedCase &c, std::ostream *os) {
    *os << c.name;
}

class Refused : public ::testing::TestWithParam<RefusedCase> {};

TEST_P(Refused, WithPreciseReason) {
    const RefusedCase &c = GetParam();
    const char *why = nullptr;
    EXPECT_EQ(decode_err(c.in, &why), c.err);
    ASSERT_NE(why, nullptr);
    if (c.why_contains) {
        EXPECT_NE(std::string(why).find(c.why_contains), std::string::npos) << why;
    }
    // A null `why` is allowed.
    Insn insn;
    EXPECT_EQ(decode(kAddr, c.in.data(), c.in.size(), insn, nullptr), c.err);
}

INSTANTIATE_TEST_SUITE_P(Decode, Refused, ::testing::ValuesIn(kRefusedCases),
                         [](const auto &info) { return std::string(info.param.name); });

TEST(Decode, InsnLength) {
    const Bytes code = {
        0x48, 0x8b, 0x05, 0x00, 0x10, 0x00, 0x00,                    // mov rax, [rip+0x1000]
        0x81, 0x3d, 0x00, 0x01, 0x00, 0x00, 0x78, 0x56, 0x34, 0x12,  // cmp dword [rip+0x100], imm
        0x53,                                                        // push rbx
        0x0f, 0x85, 0x00, 0xff, 0xff, 0xff,                          // jnz .-0xfa
        0xc3,                                                        // ret
    };
    std::vector<size_t> lens;
    for (size_t off = 0; off < code.size();) {
        const size_t n = insn_length(code.data() + off, code.size() - off);
        ASSERT_NE(n, 0u);
        lens.push_back(n);
        off += n;
    }
    EXPECT_EQ(lens, (std::vector<size_t>{7, 10, 1, 6, 1}));
    const uint8_t bad[] = {0x06};  // push es: invalid in 64-bit mode
    EXPECT_EQ(insn_length(bad, 1), 0u);
    EXPECT_EQ(insn_length(code.data(), 3), 0u);  // truncated
}

}  // namespace
}  // namespace liveprobe::arch
