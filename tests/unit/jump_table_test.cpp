// Jump tables (src/arch/x86_64/jump_table.cpp) as plan_region uses them: a function whose only
// indirect jump is a switch dispatch of a known shape can be optimized, and its table's targets
// then count as branches; anything else about the dispatch refuses it.
//
// The functions are machine code at kFn, annotated with their disassembly; their tables live
// in a fake memory at kFn + 0x1000, read through the ReadMemory the test hands plan_region.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "arch/x86_64/jump_table.hpp"
#include "arch/x86_64/region.hpp"

namespace liveprobe::arch {
namespace {

using Bytes = std::vector<uint8_t>;

constexpr uint64_t kFn = 0x555555554000;
constexpr uint64_t kTable = kFn + 0x1000;

// The fake memory: kTable.. holds g_table; everything else is unreadable.
Bytes g_table;

bool read_fake(uint64_t addr, void *out, size_t n)
{
    if (addr < kTable || addr + n > kTable + g_table.size()) return false;
    std::memcpy(out, g_table.data() + (addr - kTable), n);
    return true;
}

// 32-bit entries, relative to the table, to kFn + each offset.
void relative_table(const std::vector<int64_t> &offsets)
{
    g_table.clear();
    for (int64_t off : offsets) {
        const int32_t e = static_cast<int32_t>(static_cast<int64_t>(kFn) + off - static_cast<int64_t>(kTable));
        const auto *p = reinterpret_cast<const uint8_t *>(&e);
        g_table.insert(g_table.end(), p, p + 4);
    }
}

const char *plan(const Bytes &fn, uint64_t off, Region *r, ReadMemory read = read_fake)
{
    return plan_region(kFn + off, CodeRange{kFn, fn.data(), fn.size()}, {}, {}, r, read);
}

std::string refused(const Bytes &fn, uint64_t off, ReadMemory read = read_fake)
{
    Region r;
    const char *why = plan(fn, off, &r, read);
    EXPECT_NE(why, nullptr);
    return why ? why : "";
}

// GCC's dispatch of `switch (x) { case 0: case 1: case 2: ... }` (PIE): a bounds check, the
// table's address, the entry, the sum, the jump.
const Bytes kSwitch = {
    0x48, 0x89, 0xf8,                          // 0:  mov %rdi,%rax
    0x83, 0xff, 0x02,                          // 3:  cmp $2,%edi
    0x77, 0x16,                                // 6:  ja 0x1e
    0x48, 0x8d, 0x15, 0xf1, 0x0f, 0x00, 0x00,  // 8:  lea kTable(%rip),%rdx
    0x89, 0xff,                                // f:  mov %edi,%edi
    0x48, 0x63, 0x04, 0xba,                    // 11: movslq (%rdx,%rdi,4),%rax
    0x48, 0x01, 0xd0,                          // 15: add %rdx,%rax
    0x3e, 0xff, 0xe0,                          // 18: notrack jmp *%rax
    0xc3,                                      // 1b: ret (case 0)
    0xc3,                                      // 1c: ret (case 1)
    0xc3,                                      // 1d: ret (case 2)
    0xc3,                                      // 1e: ret (default)
};

TEST(JumpTable, ABoundedSwitchIsOptimizedAndItsEntriesCount)
{
    relative_table({0x1b, 0x1c, 0x1d});
    Region r;
    const char *why = plan(kSwitch, 0, &r);
    EXPECT_EQ(why, nullptr) << why;
    EXPECT_EQ(r.len, 6u);  // mov + cmp

    // An entry targeting byte 3 of the region (the cmp, as a loop back would) refuses it.
    relative_table({0x1b, 0x03, 0x1d});
    EXPECT_NE(refused(kSwitch, 0).find("jmp at +0x18 in the function targets byte 3 of the region"),
              std::string::npos)
        << refused(kSwitch, 0);

    // The bounds check says three entries: what follows them (often the next table) is not
    // read, even when it would target the region.
    relative_table({0x1b, 0x1c, 0x1d, 0x03});
    EXPECT_EQ(plan(kSwitch, 0, &r), nullptr);
}

TEST(JumpTable, AnEntryOutsideTheFunctionOrAnUnreadableTableRefuses)
{
    relative_table({0x1b, 0x1000, 0x1d});
    EXPECT_NE(refused(kSwitch, 0).find("does not target an instruction of the function"), std::string::npos) << refused(kSwitch, 0);
    relative_table({0x1b, 0x1c});  // the third entry is not readable
    EXPECT_NE(refused(kSwitch, 0).find("cannot be read"), std::string::npos) << refused(kSwitch, 0);
    // No reader at all: the jump's targets are unknown, as for any indirect jump.
    relative_table({0x1b, 0x1c, 0x1d});
    EXPECT_NE(refused(kSwitch, 0, nullptr).find("indirect jump at +0x18 whose targets are unknown"),
              std::string::npos);
}

TEST(JumpTable, WithoutABoundsCheckTheEntriesAreReadWhileTheyTargetTheFunction)
{
    Bytes fn = kSwitch;
    for (size_t i = 3; i < 8; ++i) fn[i] = 0x90;  // no cmp/ja
    relative_table({0x1b, 0x1c, 0x1d, 0x1000, 0x03});
    Region r;
    EXPECT_EQ(plan(fn, 0, &r), nullptr);  // stops at the entry leaving the function
    relative_table({0x1b, 0x1c, 0x1d, 0x04, 0x1000});
    EXPECT_NE(refused(fn, 0).find("targets byte 4 of the region"), std::string::npos) << refused(fn, 0);
    // Nor at an entry that lands inside an instruction (byte 1 of the mov): no real table's
    // does, and what follows is another table's, read against the wrong base.
    relative_table({0x1b, 0x1c, 0x1d, 0x01, 0x04});
    EXPECT_EQ(plan(fn, 0, &r), nullptr);
}

TEST(JumpTable, ABoundedEntryInsideAnInstructionRefuses)
{
    relative_table({0x1b, 0x01, 0x1d});
    EXPECT_NE(refused(kSwitch, 0).find("does not target an instruction of the function"), std::string::npos)
        << refused(kSwitch, 0);
}

TEST(JumpTable, ADispatchWhoseTableAddressIsNotComputedRightBeforeRefuses)
{
    // The lea before a call: the definitions are not followed past a control transfer.
    const Bytes fn = {
        0x48, 0x89, 0xf8,                          // 0:  mov %rdi,%rax
        0x48, 0x8d, 0x15, 0xd7, 0x0f, 0x00, 0x00,  // 3:  lea ...(%rip),%rdx
        0xe8, 0xf1, 0xff, 0xff, 0xff,              // a:  call 0
        0x48, 0x63, 0x04, 0xba,                    // f:  movslq (%rdx,%rdi,4),%rax
        0x48, 0x01, 0xd0,                          // 13: add %rdx,%rax
        0xff, 0xe0,                                // 16: jmp *%rax
        0xc3,                                      // 18: ret
    };
    relative_table({0x18});
    EXPECT_NE(refused(fn, 0).find("indirect jump at +0x16 whose targets are unknown (the jump's operands are not "
                                  "computed just before it)"),
              std::string::npos)
        << refused(fn, 0);

    // A jump through a register loaded some other way (a tail call through a pointer).
    const Bytes tail = {
        0x48, 0x89, 0xf8,        // 0: mov %rdi,%rax
        0x48, 0x8b, 0x47, 0x08,  // 3: mov 8(%rdi),%rax
        0xff, 0xe0,              // 7: jmp *%rax
    };
    EXPECT_NE(refused(tail, 0).find("indirect jump at +0x7"), std::string::npos) << refused(tail, 0);
}

TEST(JumpTable, ATableAddressHoistedIntoACalleeSavedRegister)
{
    // GCC's switch in a loop with calls: the lea before the loop, into %r15, which the calls
    // keep; after the loop the register is reused (setne). Only the lea's value reaches the jmp.
    const Bytes fn = {
        0x41, 0x57,                                // 0:  push %r15
        0x4c, 0x8d, 0x3d, 0xf7, 0x0f, 0x00, 0x00,  // 2:  lea kTable(%rip),%r15
        0xe8, 0xf2, 0xff, 0xff, 0xff,              // 9:  call 0
        0x83, 0xff, 0x02,                          // e:  cmp $2,%edi
        0x77, 0x0c,                                // 11: ja 0x1f
        0x49, 0x63, 0x04, 0xbf,                    // 13: movslq (%r15,%rdi,4),%rax
        0x4c, 0x01, 0xf8,                          // 17: add %r15,%rax
        0xff, 0xe0,                                // 1a: jmp *%rax
        0x41, 0x5f,                                // 1c: pop %r15
        0xc3,                                      // 1e: ret
        0x41, 0x0f, 0x95, 0xc7,                    // 1f: setne %r15b
        0x41, 0x5f,                                // 23: pop %r15
        0xc3,                                      // 25: ret
    };
    relative_table({0x1c, 0x1f, 0x23});
    Region r;
    const char *why = plan(fn, 0, &r);
    EXPECT_EQ(why, nullptr) << why;
    EXPECT_EQ(r.len, 9u);  // push + lea
    // Its targets count: one into the region refuses it.
    relative_table({0x1c, 0x02, 0x23});
    EXPECT_NE(refused(fn, 0).find("targets byte 2 of the region"), std::string::npos) << refused(fn, 0);

    // The setne's value may reach the jmp (a jump back to the loop after it): refused.
    Bytes back = fn;
    back[0x23] = 0xeb;  // 23: jmp 0xe
    back[0x24] = 0xe9;
    relative_table({0x1c, 0x1f, 0x23});
    EXPECT_NE(refused(back, 0).find("operands are not computed just before it"), std::string::npos)
        << refused(back, 0);
}

TEST(JumpTable, AHoistedTableInACallerSavedRegister)
{
    // jq's jv_parser_next: the lea hoisted into %rcx before a loop that makes no call.
    const Bytes fn = {
        0x48, 0x8d, 0x0d, 0xf9, 0x0f, 0x00, 0x00,  // 0:  lea kTable(%rip),%rcx
        0x83, 0xff, 0x02,                          // 7:  cmp $2,%edi
        0x77, 0x0c,                                // a:  ja 0x18
        0x48, 0x63, 0x04, 0xb9,                    // c:  movslq (%rcx,%rdi,4),%rax
        0x48, 0x01, 0xc8,                          // 10: add %rcx,%rax
        0xff, 0xe0,                                // 13: jmp *%rax
        0x90, 0x90, 0x90,                          // 15: nops
        0xc3,                                      // 18: ret
        0xff, 0xcf,                                // 19: dec %edi
        0xeb, 0xea,                                // 1b: jmp 0x7
    };
    relative_table({0x18, 0x19, 0x18});
    Region r;
    const char *why = plan(fn, 0, &r);
    EXPECT_EQ(why, nullptr) << why;
    // A call on the way back to the loop may change %rcx: refused.
    Bytes calls = fn;
    const Bytes call_then_loop = {0xe8, 0xe2, 0xff, 0xff, 0xff, 0xeb, 0xe7};  // 19: call 0; 1e: jmp 0x7
    calls.resize(0x19);
    calls.insert(calls.end(), call_then_loop.begin(), call_then_loop.end());
    EXPECT_NE(refused(calls, 0).find("operands are not computed just before it"), std::string::npos)
        << refused(calls, 0);
}

TEST(JumpTable, ALoopBackToTheEntryLoadAfterALeaInThePrologue)
{
    // gawk's parse_expression: the lea in the prologue, the loop's head at the entry's load, and
    // a jump back to it. Read straight, the dispatch runs from the lea, and the jump back lands
    // inside it; proven hoisted (nothing but the lea writes %rbx), it starts at the load.
    const Bytes fn = {
        0x53,                                      // 0:  push %rbx
        0x48, 0x8d, 0x1d, 0xf8, 0x0f, 0x00, 0x00,  // 1:  lea kTable(%rip),%rbx
        0x48, 0x63, 0x04, 0xbb,                    // 8:  movslq (%rbx,%rdi,4),%rax
        0x48, 0x01, 0xd8,                          // c:  add %rbx,%rax
        0xff, 0xe0,                                // f:  jmp *%rax
        0xff, 0xcf,                                // 11: dec %edi
        0xeb, 0xf3,                                // 13: jmp 0x8
        0x5b,                                      // 15: pop %rbx
        0xc3,                                      // 16: ret
    };
    relative_table({0x11, 0x15});
    Region r;
    const char *why = plan(fn, 0, &r);
    EXPECT_EQ(why, nullptr) << why;
    // A write of %rbx on the way back: the lea's value is not the only one at the jump.
    Bytes clobber = fn;
    clobber[0x11] = 0x31;  // 11: xor %ebx,%ebx
    clobber[0x12] = 0xdb;
    EXPECT_NE(refused(clobber, 0).find("lands inside the jump table dispatch"), std::string::npos)
        << refused(clobber, 0);
}

TEST(JumpTable, AHoistedTableInAFunctionWithAColdPart)
{
    // The same loop, its default case moved into a cold part that jumps back into the function
    // (GCC's f.cold): the paths through the cold part are followed too.
    const Bytes fn = {
        0x41, 0x57,                                // 0:  push %r15
        0x4c, 0x8d, 0x3d, 0xf7, 0x0f, 0x00, 0x00,  // 2:  lea kTable(%rip),%r15
        0xe8, 0xf2, 0xff, 0xff, 0xff,              // 9:  call 0
        0x83, 0xff, 0x02,                          // e:  cmp $2,%edi
        0x0f, 0x87, 0xe9, 0x1f, 0x00, 0x00,        // 11: ja kFn+0x2000 (the cold part)
        0x49, 0x63, 0x04, 0xbf,                    // 17: movslq (%r15,%rdi,4),%rax
        0x4c, 0x01, 0xf8,                          // 1b: add %r15,%rax
        0xff, 0xe0,                                // 1e: jmp *%rax
        0x41, 0x5f,                                // 20: pop %r15
        0xc3,                                      // 22: ret
    };
    const Bytes cold = {
        0x41, 0x0f, 0x95, 0xc7,        // 0: setne %r15b
        0xe9, 0x17, 0xe0, 0xff, 0xff,  // 4: jmp kFn+0x20 (pop, ret)
    };
    relative_table({0x20, 0x22, 0x20});
    Region r;
    const std::vector<CodeRange> parts = {CodeRange{kFn + 0x2000, cold.data(), cold.size()}};
    const char *why = plan_region(kFn, CodeRange{kFn, fn.data(), fn.size()}, parts, {}, &r, read_fake);
    EXPECT_EQ(why, nullptr) << why;
    // The cold part going back to the loop instead: the setne's value reaches the jmp.
    Bytes back = cold;
    back[5] = 0x05;  // 4: jmp kFn+0xe
    const std::vector<CodeRange> back_parts = {CodeRange{kFn + 0x2000, back.data(), back.size()}};
    why = plan_region(kFn, CodeRange{kFn, fn.data(), fn.size()}, back_parts, {}, &r, read_fake);
    ASSERT_NE(why, nullptr);
    EXPECT_NE(std::string(why).find("operands are not computed just before it"), std::string::npos) << why;
}

TEST(JumpTable, AnEntryReadThroughRbp)
{
    // movslq 0x0(%rbp,%rdi,4): based on rbp, its segment is ss, not ds.
    const Bytes fn = {
        0x48, 0x89, 0xf8,                          // 0:  mov %rdi,%rax
        0x83, 0xff, 0x02,                          // 3:  cmp $2,%edi
        0x77, 0x16,                                // 6:  ja 0x1e
        0x48, 0x8d, 0x2d, 0xf1, 0x0f, 0x00, 0x00,  // 8:  lea kTable(%rip),%rbp
        0x89, 0xff,                                // f:  mov %edi,%edi
        0x48, 0x63, 0x44, 0xbd, 0x00,              // 11: movslq 0x0(%rbp,%rdi,4),%rax
        0x48, 0x01, 0xe8,                          // 16: add %rbp,%rax
        0xff, 0xe0,                                // 19: jmp *%rax
        0xc3, 0xc3, 0xc3, 0xc3,                    // 1b..1e: ret
    };
    relative_table({0x1b, 0x1c, 0x1d});
    Region r;
    const char *why = plan(fn, 0, &r);
    EXPECT_EQ(why, nullptr) << why;
    relative_table({0x1b, 0x03, 0x1d});
    EXPECT_NE(refused(fn, 0).find("targets byte 3 of the region"), std::string::npos) << refused(fn, 0);
}

TEST(JumpTable, AJumpIntoTheMiddleOfTheDispatchRefuses)
{
    // After the dispatch, a jmp back to its movslq: the registers there may hold anything.
    Bytes fn(kSwitch.begin(), kSwitch.end() - 1);
    fn.insert(fn.end(), {0xeb, 0xf1});  // 1e: jmp 0x11
    relative_table({0x1b, 0x1c, 0x1d});
    EXPECT_NE(refused(fn, 0).find("a jump at +0x1e lands inside the jump table dispatch at +0x18"), std::string::npos)
        << refused(fn, 0);
}

TEST(JumpTable, AnAbsoluteTableWithItsBoundsCheck)
{
    // Non-PIE code: jmp *TABLE(,%rdi,8), 64-bit addresses.
    const uint64_t table = 0x601000;
    const Bytes fn = {
        0x48, 0x89, 0xf8,                          // 0: mov %rdi,%rax
        0x48, 0x83, 0xff, 0x02,                    // 3: cmp $2,%rdi
        0x73, 0x07,                                // 7: jae 0x10
        0xff, 0x24, 0xfd, 0x00, 0x10, 0x60, 0x00,  // 9: jmp *0x601000(,%rdi,8)
        0xc3,                                      // 10: ret
        0xc3,                                      // 11: ret
    };
    static Bytes mem;
    mem.clear();
    for (uint64_t t : {kFn + 0x10, kFn + 0x11, kFn + 0x03}) {  // the third is past the bound
        const auto *p = reinterpret_cast<const uint8_t *>(&t);
        mem.insert(mem.end(), p, p + 8);
    }
    static uint64_t at;
    at = table;
    const ReadMemory read = [](uint64_t addr, void *out, size_t n) {
        if (addr < at || addr + n > at + mem.size()) return false;
        std::memcpy(out, mem.data() + (addr - at), n);
        return true;
    };
    Region r;
    const char *why = plan(fn, 0, &r, read);
    EXPECT_EQ(why, nullptr) << why;
    // With `jae` two entries are allowed; with `ja` (0x77) three, and the third targets byte 3.
    const Bytes ja = {0x48, 0x89, 0xf8, 0x48, 0x83, 0xff, 0x02, 0x77, 0x07,  // the same, ja
                      0xff, 0x24, 0xfd, 0x00, 0x10, 0x60, 0x00, 0xc3, 0xc3};
    EXPECT_NE(refused(ja, 0, read).find("targets byte 3 of the region"), std::string::npos) << refused(ja, 0, read);
}

}  // namespace
}  // namespace liveprobe::arch
