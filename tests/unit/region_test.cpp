// Jump-optimization regions (src/arch/x86_64/region.cpp): plan_region's rules and the bytes
// relocate_region writes.
//
// Every function is the machine code it is about, annotated with its disassembly and each
// instruction's offset. Relocated copies are checked byte for byte, then decoded again to show
// that each branch and RIP-relative operand still reaches the same absolute address.
#include "arch/x86_64/region.hpp"

#include <Zydis/Zydis.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace liveprobe::arch {
namespace {

using Bytes = std::vector<uint8_t>;

// The function under test lives at kFn; the detour 4 KiB below it, so every rel32 and RIP
// displacement in the copy grows by 0x1000 plus the copy's own offset.
constexpr uint64_t kFn = 0x555555554000;
constexpr uint64_t kDetour = kFn - 0x1000;
constexpr uint64_t kFar = kFn + 0x100000000;  // 4 GiB away: beyond any rel32

CodeRange range(const Bytes &b, uint64_t start = kFn) {
    return CodeRange{start, b.data(), b.size()};
}

// Plans a region at kFn + off; expects success.
Region plan_ok(const Bytes &fn, uint64_t off, const std::vector<CodeRange> &cold = {},
               const std::vector<uint64_t> &probes = {}) {
    Region r;
    const char *why = plan_region(kFn + off, range(fn), cold, probes, &r);
    EXPECT_EQ(why, nullptr) << why;
    return r;
}

// Plans a region at kFn + off; expects a refusal and returns its reason.
std::string plan_refused(const Bytes &fn, uint64_t off, const std::vector<CodeRange> &cold = {},
                         const std::vector<uint64_t> &probes = {}) {
    Region r;
    const char *why = plan_region(kFn + off, range(fn), cold, probes, &r);
    EXPECT_NE(why, nullptr);
    return why ? why : "";
}

Bytes relocate_ok(const Region &r, uint64_t at, RelocMap *map = nullptr) {
    uint8_t out[128];
    std::memset(out, 0xaa, sizeof out);
    RelocMap local;
    const int n = relocate_region(r, at, out, sizeof out, map ? map : &local);
    EXPECT_GT(n, 0) << "relocate_region: " << n;
    if (n <= 0) return {};
    EXPECT_EQ(out[n], 0xaa) << "wrote past the returned length";
    return Bytes(out, out + n);
}

struct Decoded {
    ZydisDecodedInstruction zi;
    ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
};

Decoded decode_at(const Bytes &b, size_t off) {
    ZydisDecoder d;
    ZydisDecoderInit(&d, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
    Decoded x;
    EXPECT_TRUE(
        ZYAN_SUCCESS(ZydisDecoderDecodeFull(&d, b.data() + off, b.size() - off, &x.zi, x.ops)));
    return x;
}

// The absolute address a relative branch or RIP-relative operand of the instruction at
// copy[off] reaches, the copy running at `runtime`.
uint64_t reaches(const Bytes &copy, size_t off, uint64_t runtime) {
    const Decoded x = decode_at(copy, off);
    for (size_t i = 0; i < x.zi.operand_count_visible; ++i) {
        const ZydisDecodedOperand &op = x.ops[i];
        const bool rel = op.type == ZYDIS_OPERAND_TYPE_IMMEDIATE && op.imm.is_relative;
        const bool rip = op.type == ZYDIS_OPERAND_TYPE_MEMORY && op.mem.base == ZYDIS_REGISTER_RIP;
        if (rel || rip) {
            ZyanU64 a = 0;
            EXPECT_TRUE(ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(&x.zi, &op, runtime + off, &a)));
            return a;
        }
    }
    ADD_FAILURE() << "no relative operand at +" << off;
    return 0;
}

// ---------------------------------------------------------------------------------------------
// Regions that are accepted, and their copies
// ---------------------------------------------------------------------------------------------

TEST(Region, FramePrologueTakesThreeInstructions) {
    const Bytes fn = {
        0x55,                    // 0: push %rbp
        0x48, 0x89, 0xe5,        // 1: mov %rsp,%rbp          (4 bytes so far: not enough)
        0x48, 0x83, 0xec, 0x10,  // 4: sub $0x10,%rsp
        0x31, 0xc0,              // 8: xor %eax,%eax
        0xc9,                    // a: leave
        0xc3,                    // b: ret
    };
    const Region r = plan_ok(fn, 0);
    EXPECT_EQ(r.addr, kFn);
    EXPECT_EQ(r.len, 8u);
    ASSERT_EQ(r.n, 3u);
    EXPECT_EQ(r.insns[2].addr, kFn + 4);

    RelocMap map;
    const Bytes copy = relocate_ok(r, kDetour, &map);
    const Bytes expected = {
        0x55,                          // push %rbp
        0x48, 0x89, 0xe5,              // mov %rsp,%rbp
        0x48, 0x83, 0xec, 0x10,        // sub $0x10,%rsp
        0xe9, 0xfb, 0x0f, 0x00, 0x00,  // jmp kFn+8  (kDetour+13 + 0xffb)
    };
    EXPECT_EQ(copy, expected);
    EXPECT_EQ(reaches(copy, 8, kDetour), kFn + 8);
    ASSERT_EQ(map.n, 3u);
    EXPECT_EQ(map.orig[0], kFn);
    EXPECT_EQ(map.orig[1], kFn + 1);
    EXPECT_EQ(map.orig[2], kFn + 4);
    EXPECT_EQ(map.offset[0], 0u);
    EXPECT_EQ(map.offset[1], 1u);
    EXPECT_EQ(map.offset[2], 4u);
}

TEST(Region, RetMayEndTheRegion) {
    const Bytes fn = {
        0x48, 0x8d, 0x47, 0x08,  // 0: lea 0x8(%rdi),%rax
        0xc3,                    // 4: ret
    };
    const Region r = plan_ok(fn, 0);
    EXPECT_EQ(r.len, 5u);
    EXPECT_EQ(r.n, 2u);
    // Copied as is, with no jump back after the ret.
    EXPECT_EQ(relocate_ok(r, kDetour), fn);
}

TEST(Region, RetImm16MayEndTheRegion) {
    const Bytes fn = {
        0x31, 0xc0,        // 0: xor %eax,%eax
        0xc2, 0x08, 0x00,  // 2: ret $0x8
    };
    const Region r = plan_ok(fn, 0);
    EXPECT_EQ(r.len, 5u);
    EXPECT_EQ(relocate_ok(r, kDetour), fn);
}

TEST(Region, OneFiveByteInstruction) {
    const Bytes fn = {
        0xb8, 0x2a, 0x00, 0x00, 0x00,  // 0: mov $42,%eax
        0xc3,                          // 5: ret
    };
    const Region r = plan_ok(fn, 0);
    EXPECT_EQ(r.len, 5u);
    ASSERT_EQ(r.n, 1u);
    const Bytes expected = {
        0xb8, 0x2a, 0x00, 0x00, 0x00,  // mov $42,%eax
        0xe9, 0xfb, 0x0f, 0x00, 0x00,  // jmp kFn+5
    };
    EXPECT_EQ(relocate_ok(r, kDetour), expected);
}

TEST(Region, FiveOneByteInstructions) {
    const Bytes fn = {
        0x53,        // 0: push %rbx
        0x55,        // 1: push %rbp
        0x41, 0x54,  // 2: push %r12 -> 4 bytes
        0x50,        // 4: push %rax -> 5 bytes
        0x58,        // 5: pop %rax
        0xc3,        // 6: ret
    };
    const Region r = plan_ok(fn, 0);
    EXPECT_EQ(r.len, 5u);
    EXPECT_EQ(r.n, 4u);
    const Bytes nops = {0x90, 0x90, 0x90, 0x90, 0x90, 0xc3};  // nop x5; ret
    const Region r5 = plan_ok(nops, 0);
    EXPECT_EQ(r5.n, kMaxRegionInsns);
    EXPECT_EQ(r5.len, 5u);
}

TEST(Region, ProbeInsideTheFunction) {
    const Bytes fn = {
        0x55,                          // 0: push %rbp
        0x48, 0x89, 0xe5,              // 1: mov %rsp,%rbp
        0xb8, 0x07, 0x00, 0x00, 0x00,  // 4: mov $7,%eax
        0x5d,                          // 9: pop %rbp
        0xc3,                          // a: ret
    };
    const Region r = plan_ok(fn, 4);
    EXPECT_EQ(r.addr, kFn + 4);
    EXPECT_EQ(r.len, 5u);
    const Region r2 = plan_ok(fn, 1);  // mov + mov: 8 bytes
    EXPECT_EQ(r2.len, 8u);
    EXPECT_EQ(r2.n, 2u);
}

TEST(Region, JumpToTheFirstByteIsFine) {
    // A loop whose head is the probe: landing on byte 0 lands on the jump itself.
    const Bytes fn = {
        0x48, 0x83, 0xc0, 0x01,  // 0: add $1,%rax
        0x48, 0x39, 0xf8,        // 4: cmp %rdi,%rax
        0x75, 0xf7,              // 7: jne 0
        0xc3,                    // 9: ret
    };
    const Region r = plan_ok(fn, 0);
    EXPECT_EQ(r.len, 7u);
}

TEST(Region, JumpToTheByteAfterTheRegionIsFine) {
    const Bytes fn = {
        0x85, 0xff,                    // 0: test %edi,%edi
        0x74, 0x05,                    // 2: je 9
        0xb8, 0x01, 0x00, 0x00, 0x00,  // 4: mov $1,%eax
        0xc3,                          // 9: ret
    };
    const Region r = plan_ok(fn, 4);
    EXPECT_EQ(r.len, 5u);
}

TEST(Region, RipRelativeLoadIsRebased) {
    const Bytes fn = {
        0x48, 0x8b, 0x05, 0x00, 0x10, 0x00, 0x00,  // 0: mov 0x1000(%rip),%rax  (kFn+0x1007)
        0xc3,                                      // 7: ret
    };
    const Region r = plan_ok(fn, 0);
    EXPECT_EQ(r.len, 7u);
    const Bytes copy = relocate_ok(r, kDetour);
    const Bytes expected = {
        0x48, 0x8b, 0x05, 0x00, 0x20, 0x00, 0x00,  // mov 0x2000(%rip),%rax
        0xe9, 0xfb, 0x0f, 0x00, 0x00,              // jmp kFn+7
    };
    EXPECT_EQ(copy, expected);
    EXPECT_EQ(reaches(copy, 0, kDetour), kFn + 0x1007);
    EXPECT_EQ(reaches(copy, 7, kDetour), kFn + 7);

    // Out of reach from a detour 4 GiB away.
    uint8_t out[64];
    RelocMap map;
    EXPECT_EQ(relocate_region(r, kFar, out, sizeof out, &map), -ERANGE);
}

TEST(Region, RipRelativeAfterAnotherInstruction) {
    const Bytes fn = {
        0x53,                                      // 0: push %rbx
        0x48, 0x8d, 0x3d, 0xf8, 0xff, 0xff, 0xff,  // 1: lea -0x8(%rip),%rdi  (kFn+0)
        0xc3,                                      // 8: ret
    };
    const Region r = plan_ok(fn, 0);
    EXPECT_EQ(r.len, 8u);
    const Bytes copy = relocate_ok(r, kDetour);
    const Bytes expected = {
        0x53,                                      // push %rbx
        0x48, 0x8d, 0x3d, 0xf8, 0x0f, 0x00, 0x00,  // lea 0xff8(%rip),%rdi
        0xe9, 0xfb, 0x0f, 0x00, 0x00,              // jmp kFn+8
    };
    EXPECT_EQ(copy, expected);
    EXPECT_EQ(reaches(copy, 1, kDetour), kFn);
}

TEST(Region, JccRel8BecomesRel32) {
    const Bytes fn = {
        0x85, 0xff,              // 0: test %edi,%edi
        0x74, 0x07,              // 2: je b
        0x48, 0x89, 0xf8,        // 4: mov %rdi,%rax        (7 bytes)
        0x48, 0x83, 0xc0, 0x01,  // 7: add $1,%rax
        0xc3,                    // b: ret
    };
    const Region r = plan_ok(fn, 0);
    EXPECT_EQ(r.len, 7u);
    ASSERT_EQ(r.n, 3u);
    RelocMap map;
    const Bytes copy = relocate_ok(r, kDetour, &map);
    const Bytes expected = {
        0x85, 0xff,                          // test %edi,%edi
        0x0f, 0x84, 0x03, 0x10, 0x00, 0x00,  // je kFn+0xb  (kDetour+8 + 0x1003)
        0x48, 0x89, 0xf8,                    // mov %rdi,%rax
        0xe9, 0xf7, 0x0f, 0x00, 0x00,        // jmp kFn+7   (kDetour+16 + 0xff7)
    };
    EXPECT_EQ(copy, expected);
    EXPECT_EQ(reaches(copy, 2, kDetour), kFn + 0xb);
    EXPECT_EQ(reaches(copy, 11, kDetour), kFn + 7);
    EXPECT_EQ(map.offset[2], 8u);  // the mov moved 4 bytes further
}

TEST(Region, JmpRel8AndJccRel32KeepTheirTargets) {
    const Bytes fn = {
        0x85, 0xff,                          // 0: test %edi,%edi
        0x0f, 0x8f, 0x03, 0x00, 0x00, 0x00,  // 2: jg 0xb   (rel32)
        0x31, 0xc0,                          // 8: xor %eax,%eax
        0xc3,                                // a: ret
        0xeb, 0xfd,                          // b: jmp a    (rel8)
        0xcc,                                // d: int3 (padding inside the bounds)
    };
    const Region r = plan_ok(fn, 0);
    EXPECT_EQ(r.len, 8u);
    const Bytes copy = relocate_ok(r, kDetour);
    const Bytes expected = {
        0x85, 0xff,                          // test %edi,%edi
        0x0f, 0x8f, 0x03, 0x10, 0x00, 0x00,  // jg kFn+0xb
        0xe9, 0xfb, 0x0f, 0x00, 0x00,        // jmp kFn+8
    };
    EXPECT_EQ(copy, expected);
    EXPECT_EQ(reaches(copy, 2, kDetour), kFn + 0xb);

    // The jmp rel8 at +0xb as the start of a region (with what follows it).
    const Bytes tail = {
        0xeb, 0x03,        // 0: jmp 5
        0x48, 0x89, 0xf8,  // 2: mov %rdi,%rax (dead code, 5 bytes so far)
        0xc3,              // 5: ret
    };
    const Region rj = plan_ok(tail, 0);
    EXPECT_EQ(rj.len, 5u);
    const Bytes copy2 = relocate_ok(rj, kDetour);
    const Bytes expected2 = {
        0xe9, 0x00, 0x10, 0x00, 0x00,  // jmp kFn+5   (kDetour+5 + 0x1000)
        0x48, 0x89, 0xf8,              // mov %rdi,%rax
        0xe9, 0xf8, 0x0f, 0x00, 0x00,  // jmp kFn+5
    };
    EXPECT_EQ(copy2, expected2);
    EXPECT_EQ(reaches(copy2, 0, kDetour), kFn + 5);
}

TEST(Region, FinalCallPushesTheOriginalReturnAddress) {
    // call kFn+0x100, which lies outside this array: the walk never follows it.
    const Bytes fn = {
        0x48, 0x89, 0xdf,              // 0: mov %rbx,%rdi
        0xe8, 0xf8, 0x00, 0x00, 0x00,  // 3: call kFn+0x100
        0x5b,                          // 8: pop %rbx
        0xc3,                          // 9: ret
    };
    const Region r = plan_ok(fn, 0);
    EXPECT_EQ(r.len, 8u);
    ASSERT_EQ(r.n, 2u);
    RelocMap map;
    const Bytes copy = relocate_ok(r, kDetour, &map);
    const Bytes expected = {
        0x48, 0x89, 0xdf,                                            // mov %rbx,%rdi
        0x48, 0x8d, 0x64, 0x24, 0xf8,                                // lea -0x8(%rsp),%rsp
        0x50,                                                        // push %rax
        0x48, 0xb8, 0x08, 0x40, 0x55, 0x55, 0x55, 0x55, 0x00, 0x00,  // movabs $kFn+8,%rax
        0x48, 0x89, 0x44, 0x24, 0x08,                                // mov %rax,0x8(%rsp)
        0x58,                                                        // pop %rax
        0xe9, 0xe2, 0x10, 0x00, 0x00,                                // jmp kFn+0x100
    };
    EXPECT_EQ(copy, expected);  // and no jump back: the callee returns to kFn+8
    EXPECT_EQ(reaches(copy, 25, kDetour), kFn + 0x100);
    const Decoded movabs = decode_at(copy, 9);
    EXPECT_EQ(movabs.zi.mnemonic, ZYDIS_MNEMONIC_MOV);
    EXPECT_EQ(movabs.ops[1].imm.value.u, kFn + 8);
    EXPECT_EQ(map.offset[1], 3u);  // a thread at the call resumes at the lea
}

TEST(Region, FiveByteCallAlone) {
    const Bytes fn = {
        0xe8, 0xfb, 0x00, 0x00, 0x00,  // 0: call kFn+0x100
        0xc3,                          // 5: ret
    };
    const Region r = plan_ok(fn, 0);
    EXPECT_EQ(r.len, 5u);
    EXPECT_EQ(r.n, 1u);
    EXPECT_EQ(relocate_ok(r, kDetour).size(), 27u);
}

TEST(Region, RelocationOutOfSpaceOrReach) {
    const Bytes fn = {
        0x85, 0xff,              // 0: test %edi,%edi
        0x74, 0x07,              // 2: je b
        0x48, 0x89, 0xf8,        // 4: mov %rdi,%rax
        0x48, 0x83, 0xc0, 0x01,  // 7: add $1,%rax
        0xc3,                    // b: ret
    };
    const Region r = plan_ok(fn, 0);
    uint8_t out[64];
    RelocMap map;
    EXPECT_EQ(relocate_region(r, kDetour, out, 15, &map), -ENOSPC);  // needs 16
    EXPECT_EQ(relocate_region(r, kDetour, out, 16, &map), 16);
    EXPECT_EQ(relocate_region(r, kDetour, out, 7, &map), -ENOSPC);
    // The je cannot reach kFn from 4 GiB away.
    EXPECT_EQ(relocate_region(r, kFar, out, sizeof out, &map), -ERANGE);
}

// ---------------------------------------------------------------------------------------------
// Regions that are refused, and why
// ---------------------------------------------------------------------------------------------

TEST(Region, TooShortFunction) {
    const Bytes fn = {
        0x31, 0xc0,  // 0: xor %eax,%eax
        0xc3,        // 2: ret
    };
    const std::string why = plan_refused(fn, 0);
    EXPECT_NE(why.find("ret ends the code 3 bytes after the probe"), std::string::npos) << why;
}

TEST(Region, FunctionEndsInsideTheRegion) {
    const Bytes fn = {
        0x31, 0xc0,  // 0: xor %eax,%eax
        0xeb, 0x10,  // 2: jmp 0x14 (a tail call past the end)
    };
    const std::string why = plan_refused(fn, 0);
    EXPECT_NE(why.find("the function ends 4 bytes after the probe"), std::string::npos) << why;
}

TEST(Region, JumpIntoTheRegionFromLater) {
    const Bytes fn = {
        0x55,              // 0: push %rbp
        0x48, 0x89, 0xe5,  // 1: mov %rsp,%rbp
        0x85, 0xff,        // 4: test %edi,%edi    (region: 0..6)
        0x74, 0x02,        // 6: je a
        0xeb, 0xf7,        // 8: jmp 1              <- into byte 1 of the region
        0x5d,              // a: pop %rbp
        0xc3,              // b: ret
    };
    const std::string why = plan_refused(fn, 0);
    EXPECT_NE(why.find("jmp at +0x8 in the function targets byte 1 of the region"),
              std::string::npos)
        << why;
    // From +6 the region (je, jmp, pop) holds the je's own target.
    const std::string why6 = plan_refused(fn, 6);
    EXPECT_NE(why6.find("jz at +0x6 in the function targets byte 4 of the region"),
              std::string::npos)
        << why6;
}

TEST(Region, JumpInsideTheRegionItself) {
    const Bytes fn = {
        0x85, 0xff,  // 0: test %edi,%edi
        0x74, 0x00,  // 2: je 4  <- byte 4 of the region
        0x90,        // 4: nop  (5 bytes)
        0xc3,        // 5: ret
    };
    const std::string why = plan_refused(fn, 0);
    EXPECT_NE(why.find("jz at +0x2 in the function targets byte 4 of the region"),
              std::string::npos)
        << why;
}

TEST(Region, CallIntoTheRegionCounts) {
    const Bytes fn = {
        0x31, 0xc0,                    // 0: xor %eax,%eax
        0xff, 0xc0,                    // 2: inc %eax
        0xff, 0xc0,                    // 4: inc %eax     (region: 0..6)
        0xc3,                          // 6: ret
        0xe8, 0xf6, 0xff, 0xff, 0xff,  // 7: call 2       <- byte 2
        0xc3,                          // c: ret
    };
    const std::string why = plan_refused(fn, 0);
    EXPECT_NE(why.find("call at +0x7 in the function targets byte 2"), std::string::npos) << why;
}

TEST(Region, JumpFromAColdPartIntoTheRegion) {
    const Bytes fn = {
        0x31, 0xc0,                          // 0: xor %eax,%eax
        0x85, 0xff,                          // 2: test %edi,%edi
        0x0f, 0x85, 0xf6, 0x0f, 0x00, 0x00,  // 4: jne kFn+0x1000 (the cold part)
        0xff, 0xc0,                          // a: inc %eax
        0xc3,                                // c: ret
    };
    const Bytes cold = {
        0xb8, 0x05, 0x00, 0x00, 0x00,  // kFn+0x1000: mov $5,%eax
        0xe9, 0xfa, 0xef, 0xff, 0xff,  // kFn+0x1005: jmp kFn+4   <- byte 4 of the region
    };
    const std::vector<CodeRange> parts = {range(cold, kFn + 0x1000)};
    const std::string why = plan_refused(fn, 0, parts);
    EXPECT_NE(why.find("jmp at 0x555555555005 in a cold part of the function targets byte 4"),
              std::string::npos)
        << why;
    // Without the cold part the same region is fine, and its jne is rebased.
    const Region r = plan_ok(fn, 0);
    EXPECT_EQ(r.len, 10u);
    const Bytes copy = relocate_ok(r, kDetour);
    EXPECT_EQ(reaches(copy, 4, kDetour), kFn + 0x1000);
    // A cold part that jumps back after the region is fine too.
    const Bytes cold_ok = {
        0xb8, 0x05, 0x00, 0x00, 0x00,  // kFn+0x1000: mov $5,%eax
        0xe9, 0x00, 0xf0, 0xff, 0xff,  // kFn+0x1005: jmp kFn+0xa
    };
    EXPECT_EQ(plan_ok(fn, 0, {range(cold_ok, kFn + 0x1000)}).len, 10u);
}

TEST(Region, IndirectJumpAnywhereInTheFunction) {
    const Bytes fn = {
        0xb8, 0x01, 0x00, 0x00, 0x00,  // 0: mov $1,%eax
        0x48, 0x63, 0x04, 0xb9,        // 5: movslq (%rcx,%rdi,4),%rax
        0x48, 0x01, 0xc8,              // 9: add %rcx,%rax
        0x3e, 0xff, 0xe0,              // c: notrack jmp *%rax  (GCC's jump tables)
    };
    const std::string why = plan_refused(fn, 0);
    EXPECT_NE(why.find("indirect jump at +0xc"), std::string::npos) << why;

    const Bytes tail_call = {
        0xb8, 0x01, 0x00, 0x00, 0x00,        // 0: mov $1,%eax
        0xff, 0x25, 0x00, 0x10, 0x00, 0x00,  // 5: jmp *0x1000(%rip)  (a tail call, still refused)
    };
    EXPECT_NE(plan_refused(tail_call, 0).find("indirect jump"), std::string::npos);

    const Bytes cold = {
        0xff, 0xe0,  // jmp *%rax
    };
    const Bytes ok = {
        0xb8, 0x01, 0x00, 0x00, 0x00,  // 0: mov $1,%eax
        0xc3,                          // 5: ret
    };
    const std::string cwhy = plan_refused(ok, 0, {range(cold, kFn + 0x1000)});
    EXPECT_NE(cwhy.find("cold part of the function has an indirect jump"), std::string::npos)
        << cwhy;
}

// __builtin_eh_return's end (libgcc's _Unwind_Resume): the stack switched to the landing pad's
// frame, then `pop %rcx; jmp *%rcx`, where the call frame information says the return address
// is in rcx. A jump that is a return goes to the caller's code: it does not refuse the function
// (the hooks liveprobe puts on the unwinder then take the jump path, and a throw through
// return-probed frames no longer costs a trap per frame). Only through the register the
// information names, at that site.
TEST(Region, IndirectJumpThatIsAReturn) {
    const Bytes fn = {
        0xb8, 0x01, 0x00, 0x00, 0x00,  // 0: mov $1,%eax
        0x48, 0x89, 0xcc,              // 5: mov %rcx,%rsp
        0x59,                          // 8: pop %rcx
        0xff, 0xe1,                    // 9: jmp *%rcx
    };
    static uint64_t asked_site;
    static int asked_reg;
    auto rcx_at_9 = [](uint64_t site, int reg) {
        asked_site = site;
        asked_reg = reg;
        return site == kFn + 9 && reg == 2;  // rcx is DWARF register 2
    };
    Region r;
    EXPECT_EQ(plan_region(kFn, range(fn), {}, {}, &r, nullptr, rcx_at_9), nullptr);
    EXPECT_EQ(asked_site, kFn + 9);
    EXPECT_EQ(asked_reg, 2);
    EXPECT_NE(plan_refused(fn, 0).find("indirect jump at +0x9"), std::string::npos) << "without the information";

    const Bytes through_rax = {
        0xb8, 0x01, 0x00, 0x00, 0x00,  // 0: mov $1,%eax
        0xff, 0xe0,                    // 5: jmp *%rax
    };
    EXPECT_NE(plan_region(kFn, range(through_rax), {}, {}, &r, nullptr, rcx_at_9), nullptr);
    const Bytes through_memory = {
        0xb8, 0x01, 0x00, 0x00, 0x00,  // 0: mov $1,%eax
        0xff, 0x21,                    // 5: jmp *(%rcx)
    };
    EXPECT_NE(plan_region(kFn, range(through_memory), {}, {}, &r, nullptr, [](uint64_t, int) { return true; }),
              nullptr);
}

// A jump through a pointer (here a tail call after the epilogue, `jmp *%rax` with rax loaded
// from memory) goes where a stored or computed address points. Once the object's data is known
// to store no address inside the region (the `stored` hook: symbols::code_address_stored), and
// neither the function's code computes one nor the function reads a table it cannot explain,
// the jump cannot land there: the function takes the jump path.
const Bytes kTailCallThroughPointer = {
    0x53,                    // 0: push %rbx
    0x48, 0x89, 0xfb,        // 1: mov %rdi,%rbx
    0x48, 0x8b, 0x43, 0x08,  // 4: mov 0x8(%rbx),%rax
    0x5b,                    // 8: pop %rbx
    0xff, 0xe0,              // 9: jmp *%rax
};

TEST(Region, AJumpThroughAPointerIsProvenByWhatTheObjectStores) {
    static std::vector<std::pair<uint64_t, uint64_t>> asked;
    asked.clear();
    auto none = [](uint64_t from, uint64_t to) {
        asked.emplace_back(from, to);
        return 0;
    };
    Region r;
    EXPECT_EQ(plan_region(kFn, range(kTailCallThroughPointer), {}, {}, &r, nullptr, nullptr, none), nullptr);
    EXPECT_EQ(r.len, 8u);  // push, mov, mov
    ASSERT_EQ(asked.size(), 1u);
    EXPECT_EQ(asked[0].first, kFn + 1);  // bytes 1..7: the jump's own first byte may be a target
    EXPECT_EQ(asked[0].second, kFn + 8);

    auto some = [](uint64_t, uint64_t) { return 1; };
    const ReadMemory nothing = [](uint64_t, void *, size_t) { return false; };
    std::string why = plan_region(kFn, range(kTailCallThroughPointer), {}, {}, &r, nothing, nullptr, some);
    EXPECT_NE(why.find("indirect jump at +0x9 whose targets are unknown (the register jumped through is not the sum "
                       "of two registers), and the object's data stores an address inside the bytes a jmp would "
                       "replace"),
              std::string::npos)
        << why;
    auto unknown = [](uint64_t, uint64_t) { return -1; };
    why = plan_region(kFn, range(kTailCallThroughPointer), {}, {}, &r, nullptr, nullptr, unknown);
    EXPECT_NE(why.find("cannot be searched for addresses"), std::string::npos) << why;
    // Without the hook, as before it: refused.
    EXPECT_NE(plan_refused(kTailCallThroughPointer, 0).find("indirect jump at +0x9"), std::string::npos);

    // Through memory (`jmp *8(%rax)`, a virtual call's tail) the same.
    const Bytes through_memory = {
        0xb8, 0x01, 0x00, 0x00, 0x00,  // 0: mov $1,%eax
        0xff, 0x60, 0x08,              // 5: jmp *0x8(%rax)
    };
    EXPECT_EQ(plan_region(kFn, range(through_memory), {}, {}, &r, nullptr, nullptr, none), nullptr);
    // In a cold part too.
    const Bytes cold = {0xff, 0xe0};  // jmp *%rax
    const Bytes ok = {0xb8, 0x01, 0x00, 0x00, 0x00, 0xc3};
    EXPECT_EQ(plan_region(kFn, range(ok), {range(cold, kFn + 0x1000)}, {}, &r, nullptr, nullptr, none), nullptr);
    why = plan_region(kFn, range(ok), {range(cold, kFn + 0x1000)}, {}, &r, nullptr, nullptr, some);
    EXPECT_NE(why.find("a cold part of the function has an indirect jump at 0x"), std::string::npos) << why;
}

// A switch's relative table holds offsets, not addresses: its targets are in no relocation. A
// function that reads such an entry (movsxd from a 4-scaled index) which no table read here
// explains may be jumping through an unread table: refused whatever the data stores.
TEST(Region, AnUnexplainedTableEntryKeepsTheJumpUnknown) {
    const Bytes fn = {
        0x53,                          // 0: push %rbx
        0x48, 0x89, 0xfb,              // 1: mov %rdi,%rbx
        0xb8, 0x01, 0x00, 0x00, 0x00,  // 4: mov $1,%eax
        0x48, 0x63, 0x04, 0xb9,        // 9: movslq (%rcx,%rdi,4),%rax
        0x48, 0x01, 0xd8,              // d: add %rbx,%rax
        0x5b,                          // 10: pop %rbx
        0xff, 0xe0,                    // 11: jmp *%rax
    };
    Region r;
    const std::string why = plan_region(kFn, range(fn), {}, {}, &r, nullptr, nullptr, [](uint64_t, uint64_t) { return 0; });
    EXPECT_NE(why.find("and the function reads a jump table's entry that no table read here explains"),
              std::string::npos)
        << why;

    // A movsxd of an int array's element, and a tail call through a loaded pointer (gawk's
    // do_sub: `jmp *make_number(%rip)`): no sum is jumped through, the function takes the jump.
    const Bytes int_array_and_pointer = {
        0x53,                          // 0: push %rbx
        0x48, 0x89, 0xfb,              // 1: mov %rdi,%rbx
        0xb8, 0x01, 0x00, 0x00, 0x00,  // 4: mov $1,%eax
        0x48, 0x63, 0x04, 0xb9,        // 9: movslq (%rcx,%rdi,4),%rax
        0x48, 0x8b, 0x43, 0x08,        // d: mov 0x8(%rbx),%rax
        0x5b,                          // 11: pop %rbx
        0xff, 0xe0,                    // 12: jmp *%rax
    };
    const ReadMemory nothing = [](uint64_t, void *, size_t) { return false; };
    EXPECT_EQ(plan_region(kFn, range(int_array_and_pointer), {}, {}, &r, nothing, nullptr,
                          [](uint64_t, uint64_t) { return 0; }),
              nullptr);
    Bytes through_memory = int_array_and_pointer;
    through_memory.resize(0x11);
    through_memory.insert(through_memory.end(), {0x5b, 0xff, 0x60, 0x08});  // pop %rbx; jmp *0x8(%rax)
    EXPECT_EQ(plan_region(kFn, range(through_memory), {}, {}, &r, nothing, nullptr, [](uint64_t, uint64_t) { return 0; }),
              nullptr);
}

// A computed goto's label: the function's own code takes the address of byte 3 of the region
// (`lea 1f(%rip)`), which a jump through a pointer can reach whatever the data stores.
TEST(Region, AnAddressTheFunctionComputesInsideTheRegionRefuses) {
    const Bytes fn = {
        0x31, 0xc0,                                // 0: xor %eax,%eax
        0x90,                                      // 2: nop
        0x90,                                      // 3: nop   <- the label
        0x90,                                      // 4: nop
        0x48, 0x8d, 0x05, 0xf7, 0xff, 0xff, 0xff,  // 5: lea -0x9(%rip),%rax  (= +3)
        0xff, 0xe0,                                // c: jmp *%rax
    };
    Region r;
    const std::string why = plan_region(kFn, range(fn), {}, {}, &r, nullptr, nullptr, [](uint64_t, uint64_t) { return 0; });
    EXPECT_NE(why.find("a lea at +0x5 in the function computes the address of byte 3 of the region"),
              std::string::npos)
        << why;
    // Non-PIC code: an absolute immediate.
    const Bytes imm = {
        0x31, 0xc0,                                // 0: xor %eax,%eax
        0x90, 0x90, 0x90,                          // 2: nops
        0x48, 0xc7, 0xc0, 0x03, 0x10, 0x40, 0x00,  // 5: mov $0x401003,%rax
        0xff, 0xe0,                                // c: jmp *%rax
    };
    const std::string why2 = plan_region(0x401000, range(imm, 0x401000), {}, {}, &r, nullptr, nullptr,
                                         [](uint64_t, uint64_t) { return 0; });
    EXPECT_NE(why2.find("a mov at +0x5 in the function computes the address of byte 3 of the region"),
              std::string::npos)
        << why2;
}

// A tail call through a pointer may end the region, as a ret does: copied, its disp32(%rip)
// rebased, and no jump back after it.
TEST(Region, AJumpThroughAPointerMayEndTheRegion) {
    auto none = [](uint64_t, uint64_t) { return 0; };
    const Bytes through_got = {
        0xff, 0x25, 0x00, 0x10, 0x00, 0x00,  // 0: jmp *0x1000(%rip)  (= kFn + 0x1006)
    };
    Region r;
    ASSERT_EQ(plan_region(kFn, range(through_got), {}, {}, &r, nullptr, nullptr, none), nullptr);
    EXPECT_EQ(r.len, 6u);
    const Bytes copy = relocate_ok(r, kDetour);
    ASSERT_EQ(copy.size(), 6u);  // no jump back
    EXPECT_EQ(copy[0], 0xff);
    EXPECT_EQ(copy[1], 0x25);
    EXPECT_EQ(reaches(copy, 0, kDetour), kFn + 0x1006);

    const Bytes through_register = {
        0x48, 0x8b, 0x47, 0x08,  // 0: mov 0x8(%rdi),%rax
        0xff, 0xe0,              // 4: jmp *%rax
    };
    ASSERT_EQ(plan_region(kFn, range(through_register), {}, {}, &r, nullptr, nullptr, none), nullptr);
    EXPECT_EQ(r.len, 6u);
    EXPECT_EQ(relocate_ok(r, kDetour), through_register);

    const Bytes short_one = {0xff, 0xe0};  // jmp *%rax, alone
    const char *why = plan_region(kFn, range(short_one), {}, {}, &r, nullptr, nullptr, none);
    ASSERT_NE(why, nullptr);
    EXPECT_NE(std::string(why).find("a jump through a pointer ends the code 2 bytes after the probe"),
              std::string::npos)
        << why;
}

// A function shorter than the jump, ending in a ret: the jmp also covers the alignment padding
// after it (nops or int3s no function claims), whose original bytes the region keeps. Without
// padding, or with padding that is not nops, refused as before.
TEST(Region, AShortFunctionTakesItsPadding) {
    const Bytes fn_and_pad = {
        0x8b, 0x07,              // 0: mov (%rdi),%eax
        0xc3,                    // 2: ret
        0x0f, 0x1f, 0x40, 0x00,  // 3: nopl 0x0(%rax)  (padding)
        0x90,                    // 7: nop
    };
    const CodeRange fn{kFn, fn_and_pad.data(), 3};
    Region r;
    ASSERT_EQ(plan_region(kFn, fn, {}, {}, &r, nullptr, nullptr, nullptr, 5), nullptr);
    EXPECT_EQ(r.len, 5u);
    EXPECT_EQ(r.n, 2u);
    ASSERT_EQ(r.pad_len, 2u);
    EXPECT_EQ(r.pad[0], 0x0f);
    EXPECT_EQ(r.pad[1], 0x1f);
    EXPECT_EQ(relocate_ok(r, kDetour), Bytes({0x8b, 0x07, 0xc3}));  // the ret: no jump back

    // No padding known, or too little, or not nops: refused as a ret too close.
    EXPECT_NE(std::string(plan_region(kFn, fn, {}, {}, &r)).find("a ret ends the code 3 bytes after the probe"),
              std::string::npos);
    EXPECT_NE(plan_region(kFn, fn, {}, {}, &r, nullptr, nullptr, nullptr, 1), nullptr);
    const Bytes code_after = {0x8b, 0x07, 0xc3, 0x55, 0x48, 0x89, 0xe5};  // push %rbp; mov %rsp,%rbp
    EXPECT_NE(plan_region(kFn, CodeRange{kFn, code_after.data(), 3}, {}, {}, &r, nullptr, nullptr, nullptr, 4), nullptr);
    // A ret that is not the function's last instruction (code follows it, reached by a jump):
    // the bytes after it are the function's, not padding.
    const Bytes early_ret = {0x85, 0xff, 0x74, 0x01, 0xc3, 0x31, 0xc0, 0xc3};  // test; je +1; ret; xor; ret
    EXPECT_EQ(plan_region(kFn, CodeRange{kFn, early_ret.data(), early_ret.size()}, {}, {}, &r), nullptr);
    EXPECT_EQ(r.pad_len, 0u);
}

TEST(Region, IndirectCallInTheRegion) {
    const Bytes fn = {
        0xff, 0xd0,                    // 0: call *%rax
        0xb8, 0x01, 0x00, 0x00, 0x00,  // 2: mov $1,%eax
        0xc3,                          // 7: ret
    };
    const std::string why = plan_refused(fn, 0);
    EXPECT_NE(why.find("indirect call at +0"), std::string::npos) << why;
    // A direct call is 5 bytes, so it always ends the region; an indirect one never may.
}

TEST(Region, LoopInTheRegion) {
    const Bytes fn = {
        0xff, 0xc0,  // 0: inc %eax
        0xe2, 0xfc,  // 2: loop 0
        0x31, 0xc0,  // 4: xor %eax,%eax
        0xc3,        // 6: ret
    };
    const std::string why = plan_refused(fn, 0);
    EXPECT_NE(why.find("loop at +2 cannot be relocated"), std::string::npos) << why;
}

TEST(Region, AnotherProbeInside) {
    const Bytes fn = {
        0x55,                    // 0: push %rbp
        0x48, 0x89, 0xe5,        // 1: mov %rsp,%rbp
        0x48, 0x83, 0xec, 0x10,  // 4: sub $0x10,%rsp
        0xc9,                    // 8: leave
        0xc3,                    // 9: ret
    };
    const std::string why = plan_refused(fn, 0, {}, {kFn + 0x40000, kFn + 4});
    EXPECT_NE(why.find("another probe at +4"), std::string::npos) << why;
    // At the first byte after the region, or the probe's own address, they do not overlap.
    EXPECT_EQ(plan_ok(fn, 0, {}, {kFn, kFn + 8}).len, 8u);
}

TEST(Region, SyscallInTheRegion) {
    const Bytes fn = {
        0x31, 0xc0,  // 0: xor %eax,%eax
        0x0f, 0x05,  // 2: syscall
        0x90,        // 4: nop
        0xc3,        // 5: ret
    };
    const std::string why = plan_refused(fn, 0);
    EXPECT_NE(why.find("instruction at +2 cannot be relocated: syscall"), std::string::npos) << why;
    // A syscall elsewhere in the function is walked over.
    const Bytes later = {
        0xb8, 0x27, 0x00, 0x00, 0x00,  // 0: mov $0x27,%eax
        0x0f, 0x05,                    // 5: syscall
        0xc3,                          // 7: ret
    };
    EXPECT_EQ(plan_ok(later, 0).len, 5u);
}

TEST(Region, UndecodableFunction) {
    const Bytes fn = {
        0xb8, 0x01, 0x00, 0x00, 0x00,  // 0: mov $1,%eax
        0xc3,                          // 5: ret
        0x06,                          // 6: (push %es: invalid in 64-bit mode)
    };
    const std::string why = plan_refused(fn, 0);
    EXPECT_NE(why.find("cannot be decoded at +0x6"), std::string::npos) << why;
}

TEST(Region, NotOnABoundaryOrOutside) {
    const Bytes fn = {
        0xb8, 0x01, 0x00, 0x00, 0x00,  // 0: mov $1,%eax
        0xc3,                          // 5: ret
    };
    EXPECT_NE(plan_refused(fn, 1).find("instruction boundary"), std::string::npos);
    EXPECT_NE(plan_refused(fn, 6).find("outside"), std::string::npos);
}

TEST(Region, ReasonsNameTheirOwnAddresses) {
    // Two refusals in a row on one thread: the second reason replaces the first.
    const Bytes a = {0x31, 0xc0, 0xc3};        // xor %eax,%eax; ret
    const Bytes b = {0x31, 0xc0, 0xeb, 0x10};  // xor %eax,%eax; jmp 0x14
    const std::string wa = plan_refused(a, 0);
    const std::string wb = plan_refused(b, 0);
    EXPECT_NE(wa, wb);
}

}  // namespace
}  // namespace liveprobe::arch
