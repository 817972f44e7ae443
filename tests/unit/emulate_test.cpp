// Emulation of control transfers (src/arch/x86_64/emulate.cpp) on struct pt_regs, with memory
// reached through a fake MemOps backed by a local buffer.
//
// Jcc conditions are also checked against the CPU itself: each of the 16 condition codes is
// executed natively under all 32 combinations of CF, PF, ZF, SF and OF.
#include <gtest/gtest.h>
#include <liveprobe/kprobes.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "arch/x86_64/insn.hpp"

namespace liveprobe::arch {
namespace {

using Bytes = std::vector<uint8_t>;

constexpr uint64_t kAddr = 0x401000;  // where the probed instruction lives
constexpr uint64_t kCF = 0x1, kPF = 0x4, kZF = 0x40, kSF = 0x80, kOF = 0x800;
constexpr uint64_t kFlagsFixed = 0x202;  // IF and the always-one bit 1

// 512 bytes of "memory" at kMemBase; anything else faults.
struct FakeMem {
    static constexpr uint64_t kMemBase = 0x7ffff000;
    uint8_t buf[512] = {};
    int reads = 0, writes = 0;

    bool in(uint64_t a, size_t n) const {
        return a >= kMemBase && a + n >= a && a + n <= kMemBase + sizeof(buf);
    }
    void put64(uint64_t a, uint64_t v) {
        for (int i = 0; i < 8; ++i) buf[a - kMemBase + i] = static_cast<uint8_t>(v >> (8 * i));
    }
    uint64_t get64(uint64_t a) const {
        uint64_t v = 0;
        for (int i = 7; i >= 0; --i) v = (v << 8) | buf[a - kMemBase + i];
        return v;
    }
    MemOps ops() {
        return MemOps{
            [](void *ctx, uint64_t addr, void *dst, size_t n) {
                auto *m = static_cast<FakeMem *>(ctx);
                ++m->reads;
                if (!m->in(addr, n)) return false;
                std::memcpy(dst, m->buf + (addr - kMemBase), n);
                return true;
            },
            [](void *ctx, uint64_t addr, const void *src, size_t n) {
                auto *m = static_cast<FakeMem *>(ctx);
                ++m->writes;
                if (!m->in(addr, n)) return false;
                std::memcpy(m->buf + (addr - kMemBase), src, n);
                return true;
            },
            this,
        };
    }
};

constexpr uint64_t kStack = FakeMem::kMemBase + 256;  // sp in the middle of the fake memory

// Registers with a distinct value in each field, so a stray write shows.
pt_regs make_regs() {
    pt_regs r;
    std::memset(&r, 0, sizeof(r));
    r.r15 = 0x15;
    r.r14 = 0x14;
    r.r13 = 0x13;
    r.r12 = 0x12;
    r.bp = 0xb0;
    r.bx = 0xb1;
    r.r11 = 0x11;
    r.r10 = 0x10;
    r.r9 = 0x9;
    r.r8 = 0x8;
    r.ax = 0xa0;
    r.cx = 0xc0;
    r.dx = 0xd0;
    r.si = 0x51;
    r.di = 0xd1;
    r.orig_ax = ~0ul;
    r.ip = kAddr;
    r.cs = 0x33;
    r.flags = kFlagsFixed;
    r.sp = kStack;
    r.ss = 0x2b;
    return r;
}

Insn dec(const Bytes &b) {
    Insn insn;
    const char *why = nullptr;
    EXPECT_EQ(decode(kAddr, b.data(), b.size(), insn, &why), 0) << (why ? why : "");
    EXPECT_EQ(insn.cls, InsnClass::kEmulate);
    return insn;
}

// Emulates and checks that nothing but ip, sp and cx changed.
int run(const Bytes &code, pt_regs &r, FakeMem &mem, uint64_t *fault = nullptr) {
    const Insn insn = dec(code);
    pt_regs before = r;
    uint64_t fa = 0;
    const int rc = emulate(insn, r, mem.ops(), fault ? fault : &fa);
    before.ip = r.ip;
    before.sp = r.sp;
    before.cx = r.cx;
    EXPECT_EQ(std::memcmp(&before, &r, sizeof(r)), 0) << "a register other than ip/sp/cx changed";
    return rc;
}

// ---------------------------------------------------------------------------------------------
// Direct jumps and jcc
// ---------------------------------------------------------------------------------------------

TEST(Emulate, JmpRel8AndRel32) {
    FakeMem mem;
    pt_regs r = make_regs();
    ASSERT_EQ(run({0xeb, 0x10}, r, mem), 0);  // jmp .+0x12
    EXPECT_EQ(r.ip, kAddr + 0x12);
    r = make_regs();
    ASSERT_EQ(run({0xeb, 0xfe}, r, mem), 0);  // jmp .
    EXPECT_EQ(r.ip, kAddr);
    r = make_regs();
    ASSERT_EQ(run({0xe9, 0x00, 0xf0, 0xff, 0xff}, r, mem), 0);  // jmp .-0x1000+5
    EXPECT_EQ(r.ip, kAddr + 5 - 0x1000);
    EXPECT_EQ(r.sp, kStack);
    EXPECT_EQ(mem.reads + mem.writes, 0);
}

// For each condition code: flags under which it is taken, and flags under which it is not.
struct JccCase {
    const char *name;
    uint8_t cc;
    uint64_t taken;
    uint64_t not_taken;
};

// clang-format off
const JccCase kJccCases[] = {
    {"jo",  0x0, kOF,             0},
    {"jno", 0x1, 0,               kOF},
    {"jb",  0x2, kCF,             kZF},
    {"jnb", 0x3, kZF,             kCF},
    {"jz",  0x4, kZF,             kCF},
    {"jnz", 0x5, kCF,             kZF},
    {"jbe", 0x6, kZF,             kSF | kOF},   // also CF alone: see below
    {"ja",  0x7, kSF | kOF,       kCF},
    {"js",  0x8, kSF,             kOF},
    {"jns", 0x9, kOF,             kSF},
    {"jp",  0xa, kPF,             kCF | kZF | kSF | kOF},
    {"jnp", 0xb, kCF | kZF | kSF | kOF, kPF},
    {"jl",  0xc, kSF,             kSF | kOF},   // SF != OF
    {"jge", 0xd, kSF | kOF,       kOF},
    {"jle", 0xe, kZF | kSF | kOF, kSF | kOF},   // ZF, or SF != OF
    {"jg",  0xf, kSF | kOF,       kZF | kSF | kOF},
    {"jbe_cf", 0x6, kCF,          0},
    {"jl_of",  0xc, kOF,          0},
    {"jle_of", 0xe, kOF,          0},
    {"jg_none", 0xf, 0,           kZF},
};
// clang-format on

void PrintTo(const JccCase &c, std::ostream *os) {
    *os << c.name;
}

class Jcc : public ::testing::TestWithParam<JccCase> {};

TEST_P(Jcc, TakenAndNotTakenInBothForms) {
    const JccCase &c = GetParam();
    FakeMem mem;
    const Bytes rel8 = {static_cast<uint8_t>(0x70 + c.cc), 0x40};  // j<cc> .+0x42
    const Bytes rel32 = {0x0f, static_cast<uint8_t>(0x80 + c.cc), 0x00, 0x10, 0x00, 0x00};
    for (const Bytes &code : {rel8, rel32}) {
        const uint64_t target = code.size() == 2 ? kAddr + 0x42 : kAddr + 6 + 0x1000;
        pt_regs r = make_regs();
        r.flags = kFlagsFixed | c.taken;
        ASSERT_EQ(run(code, r, mem), 0);
        EXPECT_EQ(r.ip, target) << "should be taken";
        EXPECT_EQ(r.flags, kFlagsFixed | c.taken);

        r = make_regs();
        r.flags = kFlagsFixed | c.not_taken;
        ASSERT_EQ(run(code, r, mem), 0);
        EXPECT_EQ(r.ip, kAddr + code.size()) << "should fall through";
    }
}

INSTANTIATE_TEST_SUITE_P(Emulate, Jcc, ::testing::ValuesIn(kJccCases),
                         [](const auto &info) { return std::string(info.param.name); });

// Runs `j<cc> 1f; movl $0, taken; 1:` on the CPU with the given arithmetic flags. The red
// zone is stepped over first: the compiler may keep locals below rsp.
template <int CC>
bool native_jcc(uint64_t flags) {
    int taken = 1;
    asm volatile(
        "lea -128(%%rsp), %%rsp\n\t"
        "pushfq\n\t"
        "pushq %[f]\n\t"
        "popfq\n\t"
        ".byte %c[op], 1f - 0f\n"  // j<cc> 1f
        "0:\n\t"
        "movl $0, %[t]\n"
        "1:\n\t"
        "popfq\n\t"
        "lea 128(%%rsp), %%rsp\n\t"
        : [t] "+r"(taken)
        : [f] "r"(flags), [op] "i"(0x70 + CC)
        : "cc", "memory");
    return taken;
}

template <size_t... CC>
void check_all_against_cpu(std::index_sequence<CC...>) {
    FakeMem mem;
    for (uint64_t combo = 0; combo < 32; ++combo) {
        uint64_t f = kFlagsFixed;
        if (combo & 1) f |= kCF;
        if (combo & 2) f |= kPF;
        if (combo & 4) f |= kZF;
        if (combo & 8) f |= kSF;
        if (combo & 16) f |= kOF;
        const bool cpu[] = {native_jcc<CC>(f)...};
        for (uint8_t cc = 0; cc < 16; ++cc) {
            pt_regs r = make_regs();
            r.flags = f;
            ASSERT_EQ(run({static_cast<uint8_t>(0x70 + cc), 0x10}, r, mem), 0);
            EXPECT_EQ(r.ip == kAddr + 0x12, cpu[cc])
                << "cc=" << int(cc) << " flags=0x" << std::hex << f;
        }
    }
}

TEST(Emulate, JccAgreesWithTheCpu) {
    // First that the harness itself works: jz taken and not taken.
    EXPECT_TRUE(native_jcc<0x4>(kFlagsFixed | kZF));  // jz taken
    EXPECT_FALSE(native_jcc<0x4>(kFlagsFixed));       // jz not taken
    check_all_against_cpu(std::make_index_sequence<16>());
}

// ---------------------------------------------------------------------------------------------
// loop, jrcxz
// ---------------------------------------------------------------------------------------------

TEST(Emulate, Loop) {
    FakeMem mem;
    pt_regs r = make_regs();
    r.cx = 5;
    ASSERT_EQ(run({0xe2, 0xfe}, r, mem), 0);  // loop .
    EXPECT_EQ(r.cx, 4u);
    EXPECT_EQ(r.ip, kAddr);

    r = make_regs();
    r.cx = 1;
    ASSERT_EQ(run({0xe2, 0xfe}, r, mem), 0);  // loop .
    EXPECT_EQ(r.cx, 0u);
    EXPECT_EQ(r.ip, kAddr + 2);

    r = make_regs();
    r.cx = 0;  // wraps: 2^64 - 1 iterations left
    ASSERT_EQ(run({0xe2, 0xfe}, r, mem), 0);
    EXPECT_EQ(r.cx, ~0ul);
    EXPECT_EQ(r.ip, kAddr);

    r = make_regs();
    r.cx = 0x100000001;  // 64-bit count: the upper half matters
    ASSERT_EQ(run({0xe2, 0xfe}, r, mem), 0);
    EXPECT_EQ(r.cx, 0x100000000u);
    EXPECT_EQ(r.ip, kAddr);
}

TEST(Emulate, LoopeLoopne) {
    FakeMem mem;
    struct {
        Bytes code;
        uint64_t cx, flags;
        bool taken;
    } cases[] = {
        {{0xe1, 0x10}, 5, kZF, true},   // loope .+0x12, ZF=1, count 4
        {{0xe1, 0x10}, 5, 0, false},    // loope, ZF=0
        {{0xe1, 0x10}, 1, kZF, false},  // loope, count 0
        {{0xe0, 0x10}, 5, 0, true},     // loopne .+0x12, ZF=0
        {{0xe0, 0x10}, 5, kZF, false},  // loopne, ZF=1
        {{0xe0, 0x10}, 1, 0, false},    // loopne, count 0
    };
    for (const auto &c : cases) {
        pt_regs r = make_regs();
        r.cx = c.cx;
        r.flags = kFlagsFixed | c.flags;
        ASSERT_EQ(run(c.code, r, mem), 0);
        EXPECT_EQ(r.cx, c.cx - 1);
        EXPECT_EQ(r.ip, c.taken ? kAddr + 0x12 : kAddr + 2) << int(c.code[0]) << " " << c.cx;
        EXPECT_EQ(r.flags, kFlagsFixed | c.flags);  // loop never changes flags
    }
}

TEST(Emulate, LoopAddressSize32UsesEcxAndZeroExtends) {
    // 67 e2 fd: loop . with ECX as the count. Writing ECX clears RCX's upper half (as the
    // CPU does; see emulate.cpp).
    FakeMem mem;
    pt_regs r = make_regs();
    r.cx = 0x1234567800000005;
    ASSERT_EQ(run({0x67, 0xe2, 0xfd}, r, mem), 0);
    EXPECT_EQ(r.cx, 4u);
    EXPECT_EQ(r.ip, kAddr);

    r = make_regs();
    r.cx = 0x1234567800000001;  // ECX 1 -> 0: falls through though RCX was not 1
    ASSERT_EQ(run({0x67, 0xe2, 0xfd}, r, mem), 0);
    EXPECT_EQ(r.cx, 0u);
    EXPECT_EQ(r.ip, kAddr + 3);

    r = make_regs();
    r.cx = 0x100000000;  // ECX 0 -> 0xffffffff: taken
    ASSERT_EQ(run({0x67, 0xe2, 0xfd}, r, mem), 0);
    EXPECT_EQ(r.cx, 0xffffffffu);
    EXPECT_EQ(r.ip, kAddr);
}

TEST(Emulate, LoopAddressSize32MatchesTheCpu) {
    uint64_t c = 0xabcd000000000003;
    asm volatile("1: .byte 0x67, 0xe2, 0xfd" : "+c"(c));  // a32 loop . until ECX is 0
    EXPECT_EQ(c, 0u);
}

TEST(Emulate, JrcxzJecxz) {
    FakeMem mem;
    struct {
        Bytes code;
        uint64_t cx;
        bool taken;
    } cases[] = {
        {{0xe3, 0x05}, 0, true},             // jrcxz .+7
        {{0xe3, 0x05}, 0x100000000, false},  // jrcxz: upper half counts
        {{0xe3, 0x05}, 1, false},
        {{0x67, 0xe3, 0x05}, 0, true},            // jecxz .+8
        {{0x67, 0xe3, 0x05}, 0x100000000, true},  // jecxz: only ECX counts
        {{0x67, 0xe3, 0x05}, 0x100000001, false},
    };
    for (const auto &c : cases) {
        pt_regs r = make_regs();
        r.cx = c.cx;
        ASSERT_EQ(run(c.code, r, mem), 0);
        const uint64_t len = c.code.size();
        EXPECT_EQ(r.ip, c.taken ? kAddr + len + 5 : kAddr + len) << std::hex << c.cx;
        EXPECT_EQ(r.cx, c.cx);  // never written
    }
}

// ---------------------------------------------------------------------------------------------
// call, indirect jmp, ret
// ---------------------------------------------------------------------------------------------

TEST(Emulate, CallRel32PushesReturnAddress) {
    FakeMem mem;
    pt_regs r = make_regs();
    ASSERT_EQ(run({0xe8, 0x00, 0x01, 0x00, 0x00}, r, mem), 0);  // call .+0x105
    EXPECT_EQ(r.ip, kAddr + 5 + 0x100);
    EXPECT_EQ(r.sp, kStack - 8);
    EXPECT_EQ(mem.get64(kStack - 8), kAddr + 5);
    EXPECT_EQ(mem.writes, 1);
}

TEST(Emulate, CallRegister) {
    FakeMem mem;
    pt_regs r = make_regs();
    r.ax = 0x12345678;
    ASSERT_EQ(run({0xff, 0xd0}, r, mem), 0);  // call rax
    EXPECT_EQ(r.ip, 0x12345678u);
    EXPECT_EQ(r.sp, kStack - 8);
    EXPECT_EQ(mem.get64(kStack - 8), kAddr + 2);

    r = make_regs();
    r.r11 = 0xdeadbeef00;
    ASSERT_EQ(run({0x41, 0xff, 0xd3}, r, mem), 0);  // call r11
    EXPECT_EQ(r.ip, 0xdeadbeef00u);
    EXPECT_EQ(mem.get64(kStack - 8), kAddr + 3);
}

TEST(Emulate, CallRipRelativeMemory) {
    // call [rip+disp], with disp chosen so that the pointer lies in the fake memory.
    FakeMem mem;
    const uint64_t ptr = FakeMem::kMemBase + 0x10;
    const int32_t disp = static_cast<int32_t>(ptr - (kAddr + 6));
    const Bytes code = {0xff,
                        0x15,
                        static_cast<uint8_t>(disp),
                        static_cast<uint8_t>(disp >> 8),
                        static_cast<uint8_t>(disp >> 16),
                        static_cast<uint8_t>(disp >> 24)};
    mem.put64(ptr, 0x4242424242);
    pt_regs r = make_regs();
    ASSERT_EQ(run(code, r, mem), 0);  // call [rip+disp]
    EXPECT_EQ(r.ip, 0x4242424242u);
    EXPECT_EQ(r.sp, kStack - 8);
    EXPECT_EQ(mem.get64(kStack - 8), kAddr + 6);
}

TEST(Emulate, CallBaseIndexScaleDisp) {
    FakeMem mem;
    pt_regs r = make_regs();
    r.ax = FakeMem::kMemBase;
    r.bx = 3;
    mem.put64(FakeMem::kMemBase + 3 * 8 + 16, 0x777000);
    ASSERT_EQ(run({0xff, 0x54, 0xd8, 0x10}, r, mem), 0);  // call [rax+rbx*8+0x10]
    EXPECT_EQ(r.ip, 0x777000u);
    EXPECT_EQ(r.sp, kStack - 8);
    EXPECT_EQ(mem.get64(kStack - 8), kAddr + 4);
}

TEST(Emulate, CallThroughStackReadsBeforePush) {
    FakeMem mem;
    pt_regs r = make_regs();
    mem.put64(kStack + 8, 0x888000);
    mem.put64(kStack, 0x999000);
    ASSERT_EQ(run({0xff, 0x54, 0x24, 0x08}, r, mem), 0);  // call [rsp+8]
    EXPECT_EQ(r.ip, 0x888000u);
    EXPECT_EQ(mem.get64(kStack - 8), kAddr + 4);

    r = make_regs();
    ASSERT_EQ(run({0xff, 0xd4}, r, mem), 0);  // call rsp
    EXPECT_EQ(r.ip, kStack);
    EXPECT_EQ(r.sp, kStack - 8);
}

TEST(Emulate, CallAddressSize32TruncatesTheAddress) {
    FakeMem mem;
    pt_regs r = make_regs();
    r.ax = 0xffffffff00000000 | FakeMem::kMemBase;  // upper half ignored under 0x67
    mem.put64(FakeMem::kMemBase + 0x20, 0x5555000);
    ASSERT_EQ(run({0x67, 0xff, 0x50, 0x20}, r, mem), 0);  // call [eax+0x20]
    EXPECT_EQ(r.ip, 0x5555000u);
    EXPECT_EQ(mem.get64(kStack - 8), kAddr + 4);
}

TEST(Emulate, IndirectJmp) {
    FakeMem mem;
    pt_regs r = make_regs();
    r.ax = 0x600000;
    ASSERT_EQ(run({0xff, 0xe0}, r, mem), 0);  // jmp rax
    EXPECT_EQ(r.ip, 0x600000u);
    EXPECT_EQ(r.sp, kStack);

    r = make_regs();
    r.ax = 0x610000;
    ASSERT_EQ(run({0x3e, 0xff, 0xe0}, r, mem), 0);  // notrack jmp rax
    EXPECT_EQ(r.ip, 0x610000u);

    r = make_regs();
    r.r9 = FakeMem::kMemBase;
    mem.put64(FakeMem::kMemBase + 0x40, 0x620000);
    ASSERT_EQ(run({0x41, 0xff, 0x61, 0x40}, r, mem), 0);  // jmp [r9+0x40]
    EXPECT_EQ(r.ip, 0x620000u);
    EXPECT_EQ(r.sp, kStack);
    EXPECT_EQ(mem.writes, 0);
}

TEST(Emulate, Ret) {
    FakeMem mem;
    mem.put64(kStack, 0x401234);
    pt_regs r = make_regs();
    ASSERT_EQ(run({0xc3}, r, mem), 0);  // ret
    EXPECT_EQ(r.ip, 0x401234u);
    EXPECT_EQ(r.sp, kStack + 8);

    r = make_regs();
    ASSERT_EQ(run({0xc2, 0x08, 0x00}, r, mem), 0);  // ret 8
    EXPECT_EQ(r.ip, 0x401234u);
    EXPECT_EQ(r.sp, kStack + 16);

    r = make_regs();
    ASSERT_EQ(run({0xc2, 0xf0, 0xff}, r, mem), 0);  // ret 0xfff0: imm16 is unsigned
    EXPECT_EQ(r.sp, kStack + 8 + 0xfff0);

    for (const Bytes &code : {Bytes{0xf2, 0xc3}, Bytes{0xf3, 0xc3}}) {  // bnd ret, rep ret
        r = make_regs();
        ASSERT_EQ(run(code, r, mem), 0);
        EXPECT_EQ(r.ip, 0x401234u);
        EXPECT_EQ(r.sp, kStack + 8);
    }
}

// ---------------------------------------------------------------------------------------------
// Faults
// ---------------------------------------------------------------------------------------------

TEST(Emulate, FaultLeavesRegistersUnchanged) {
    struct {
        const char *name;
        Bytes code;
        uint64_t sp;
        uint64_t ax;
        uint64_t fault;
    } cases[] = {
        {"call_mem_unreadable", {0xff, 0x10}, kStack, 0x1000, 0x1000},        // call [rax]
        {"call_push_unwritable", {0xe8, 0, 0, 0, 0}, 0x2000, 0, 0x2000 - 8},  // call .+5
        {"call_reg_push", {0xff, 0xd0}, kStack - 256, 0x5000, kStack - 264},  // call rax
        {"jmp_mem_unreadable", {0xff, 0x20}, kStack, 0x3000, 0x3000},         // jmp [rax]
        {"ret_unreadable", {0xc3}, 0x4000, 0, 0x4000},                        // ret
        {"ret_imm_unreadable", {0xc2, 0x10, 0x00}, 0x4000, 0, 0x4000},        // ret 0x10
    };
    for (const auto &c : cases) {
        FakeMem mem;
        pt_regs r = make_regs();
        r.sp = c.sp;
        r.ax = c.ax;
        const pt_regs before = r;
        const uint8_t mem_before = mem.buf[0];
        uint64_t fault = 0;
        EXPECT_EQ(run(c.code, r, mem, &fault), -EFAULT) << c.name;
        EXPECT_EQ(fault, c.fault) << c.name;
        EXPECT_EQ(std::memcmp(&before, &r, sizeof(r)), 0) << c.name;
        EXPECT_EQ(mem.buf[0], mem_before);
    }
}

TEST(Emulate, PushFaultAfterReadableTarget) {
    // call [rax]: the target reads fine, the push faults: still nothing changes.
    FakeMem mem;
    mem.put64(FakeMem::kMemBase, 0xabc000);
    pt_regs r = make_regs();
    r.ax = FakeMem::kMemBase;
    r.sp = 0x10;
    const pt_regs before = r;
    uint64_t fault = 0;
    EXPECT_EQ(run({0xff, 0x10}, r, mem, &fault), -EFAULT);
    EXPECT_EQ(fault, 0x8u);
    EXPECT_EQ(std::memcmp(&before, &r, sizeof(r)), 0);
}

TEST(Emulate, RefusesOutOfLineInstructions) {
    Insn insn;
    const Bytes nop = {0x90};
    ASSERT_EQ(decode(kAddr, nop.data(), nop.size(), insn, nullptr), 0);
    FakeMem mem;
    pt_regs r = make_regs();
    const pt_regs before = r;
    uint64_t fault = 0;
    EXPECT_EQ(emulate(insn, r, mem.ops(), &fault), -EINVAL);
    EXPECT_EQ(std::memcmp(&before, &r, sizeof(r)), 0);
}

}  // namespace
}  // namespace liveprobe::arch
