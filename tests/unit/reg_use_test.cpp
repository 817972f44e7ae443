// What the light entry needs proven of a handler (src/arch/x86_64/reg_use.cpp and the write
// sets of vector_use.cpp): that it never reads its struct pt_regs * (rsi at entry), and which
// general registers it and what it calls write.
//
// The handlers are written here in assembly, as global functions with a type and a size (so
// symbols::function_at finds their bounds), and are never executed.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "arch/x86_64/region.hpp"
#include "skip_if_sanitized.hpp"

#define LP_RU_FN(name, body)                                                                      \
    ".globl " #name "\n.type " #name ", @function\n" #name ":\n" body ".size " #name ", .-" #name \
    "\n"

// clang-format off
asm(".text\n"
    LP_RU_FN(ru_empty,         "xor %eax, %eax\n ret\n")
    LP_RU_FN(ru_loads_regs,    "mov 112(%rsi), %rax\n ret\n")                  // regs->di
    LP_RU_FN(ru_copies_regs,   "mov %rsi, %rax\n ret\n")
    LP_RU_FN(ru_pushes_regs,   "push %rsi\n pop %rax\n ret\n")
    LP_RU_FN(ru_zeroes_first,  "xor %esi, %esi\n mov (%rsi), %rax\n ret\n")  // not regs any more
    LP_RU_FN(ru_sets_first,    "mov $8, %esi\n add %rsi, %rdi\n ret\n")
    LP_RU_FN(ru_partial_write, "mov $1, %sil\n mov %rsi, %rax\n ret\n")        // upper bits still regs
    LP_RU_FN(ru_one_branch,    "test %edi, %edi\n je 1f\n mov (%rsi), %rax\n1: xor %eax, %eax\n ret\n")
    LP_RU_FN(ru_both_set,      "test %edi, %edi\n je 1f\n xor %esi, %esi\n jmp 2f\n1: mov $3, %esi\n2: mov %rsi, %rax\n ret\n")
    LP_RU_FN(ru_reads_arg2,    "mov %rsi, %rax\n ret\n")
    LP_RU_FN(ru_calls_reader,  "push %rbx\n call ru_reads_arg2\n pop %rbx\n ret\n")   // passes regs on
    LP_RU_FN(ru_calls_clean,   "push %rbx\n call ru_empty\n pop %rbx\n ret\n")
    LP_RU_FN(ru_sets_then_calls_reader, "mov %rdi, %rsi\n call ru_reads_arg2\n ret\n")
    LP_RU_FN(ru_tail_reader,   "jmp ru_reads_arg2\n")
    LP_RU_FN(ru_indirect,      "call *%rax\n ret\n")
    LP_RU_FN(ru_set_indirect,  "xor %esi, %esi\n call *%rax\n ret\n")
    LP_RU_FN(ru_syscall,       "mov $39, %eax\n syscall\n ret\n")
    LP_RU_FN(ru_movs,          "mov $8, %ecx\n rep movsb\n ret\n")                     // hidden rsi
    LP_RU_FN(ru_loop,          "1: dec %edi\n jnz 1b\n mov 8(%rsi), %rax\n ret\n")
    LP_RU_FN(ru_saves_rbx,     "push %rbx\n mov %rdi, %rbx\n mov %rbx, %rax\n pop %rbx\n ret\n")
    LP_RU_FN(ru_cpuid,         "push %rbx\n xor %eax, %eax\n cpuid\n pop %rbx\n ret\n")
    LP_RU_FN(ru_writes_r11,    "mov %rdi, %r11\n lea 1(%r11), %eax\n ret\n")
    // For regs_fields_only with the fields ax (80) and ip (128):
    LP_RU_FN(ru_ax_ip,         "mov 80(%rsi), %rax\n add 128(%rsi), %rax\n mov %rax, 80(%rsi)\n ret\n")
    LP_RU_FN(ru_ax_low_byte,   "movb $1, 84(%rsi)\n ret\n")                   // inside ax
    LP_RU_FN(ru_straddles,     "mov 84(%rsi), %rax\n ret\n")                   // ax's upper half and cx
    LP_RU_FN(ru_reads_sp,      "mov 152(%rsi), %rax\n ret\n")                  // regs->sp
    LP_RU_FN(ru_indexed,       "mov 80(%rsi,%rdi,8), %rax\n ret\n")
    LP_RU_FN(ru_ax_then_copy,  "mov 80(%rsi), %rax\n mov %rsi, %rdx\n ret\n")
    LP_RU_FN(ru_lea_ax,        "lea 80(%rsi), %rax\n ret\n")                   // a pointer into regs
    ".text\n");
// clang-format on

extern "C" {
void ru_empty();
void ru_loads_regs();
void ru_copies_regs();
void ru_pushes_regs();
void ru_zeroes_first();
void ru_sets_first();
void ru_partial_write();
void ru_one_branch();
void ru_both_set();
void ru_calls_reader();
void ru_calls_clean();
void ru_sets_then_calls_reader();
void ru_tail_reader();
void ru_indirect();
void ru_set_indirect();
void ru_syscall();
void ru_movs();
void ru_loop();
void ru_saves_rbx();
void ru_cpuid();
void ru_writes_r11();
void ru_ax_ip();
void ru_ax_low_byte();
void ru_straddles();
void ru_reads_sp();
void ru_indexed();
void ru_ax_then_copy();
void ru_lea_ax();
}

namespace {

using liveprobe::arch::gpr_bit;
using liveprobe::arch::ignores_second_arg;

uint64_t at(void (*f)()) { return reinterpret_cast<uint64_t>(f); }

// ignores_second_arg, and the reason when it says no.
::testing::AssertionResult ignores(void (*f)())
{
    const char *why = nullptr;
    if (ignores_second_arg(at(f), 2, &why)) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << why;
}

TEST(IgnoresSecondArg, HandlersThatNeverLookAtRegs)
{
    LP_SKIP_IF_SANITIZED();
    EXPECT_TRUE(ignores(ru_empty));
    EXPECT_TRUE(ignores(ru_zeroes_first));
    EXPECT_TRUE(ignores(ru_sets_first));
    EXPECT_TRUE(ignores(ru_both_set));
    EXPECT_TRUE(ignores(ru_calls_clean));
    EXPECT_TRUE(ignores(ru_sets_then_calls_reader));
    EXPECT_TRUE(ignores(ru_set_indirect));
}

TEST(IgnoresSecondArg, EveryWayOfReadingRegsIsFound)
{
    LP_SKIP_IF_SANITIZED();
    for (auto f : {ru_loads_regs, ru_copies_regs, ru_pushes_regs, ru_partial_write, ru_one_branch, ru_calls_reader,
                   ru_tail_reader, ru_indirect, ru_syscall, ru_movs, ru_loop})
        EXPECT_FALSE(ignores(f)) << "handler at " << reinterpret_cast<void *>(f);
}

TEST(IgnoresSecondArg, ReasonsNameTheInstruction)
{
    LP_SKIP_IF_SANITIZED();
    const char *why = nullptr;
    ASSERT_FALSE(ignores_second_arg(at(ru_loads_regs), 2, &why));
    EXPECT_NE(std::string(why).find("ru_loads_regs"), std::string::npos) << why;
    EXPECT_NE(std::string(why).find("reads rsi"), std::string::npos) << why;
    ASSERT_FALSE(ignores_second_arg(at(ru_calls_reader), 2, &why));
    EXPECT_NE(std::string(why).find("ru_reads_arg2"), std::string::npos) << why;
    EXPECT_NE(std::string(why).find("reached from ru_calls_reader"), std::string::npos) << why;
    ASSERT_FALSE(ignores_second_arg(at(ru_indirect), 2, &why));
    EXPECT_NE(std::string(why).find("indirect"), std::string::npos) << why;
}

// regs_fields_only (the light return's proof): loads and stores inside the given fields of
// pt_regs are allowed, anything else done with regs is a use.
TEST(RegsFieldsOnly, AccessesInsideTheGivenFieldsOnly)
{
    LP_SKIP_IF_SANITIZED();
    using liveprobe::arch::regs_fields_only;
    const uint32_t ax_ip = 1u << 10 | 1u << 16;
    const char *why = nullptr;
    EXPECT_TRUE(regs_fields_only(at(ru_ax_ip), 2, ax_ip, &why)) << why;
    EXPECT_TRUE(regs_fields_only(at(ru_ax_low_byte), 2, ax_ip, &why)) << why;
    EXPECT_TRUE(regs_fields_only(at(ru_empty), 2, ax_ip, &why)) << why;
    EXPECT_FALSE(regs_fields_only(at(ru_ax_ip), 2, 1u << 10, nullptr)) << "ip not given";
    for (auto f : {ru_straddles, ru_reads_sp, ru_indexed, ru_ax_then_copy, ru_lea_ax, ru_copies_regs, ru_calls_reader})
        EXPECT_FALSE(regs_fields_only(at(f), 2, ax_ip, nullptr)) << "handler at " << reinterpret_cast<void *>(f);
    // With no fields, it is ignores_second_arg.
    EXPECT_FALSE(regs_fields_only(at(ru_ax_ip), 2, 0, nullptr));
}

uint32_t writes_of(void (*f)())
{
    uint32_t w = 0;
    const char *why = nullptr;
    EXPECT_TRUE(liveprobe::arch::vector_free(at(f), 2, &why, &w)) << why;
    return w;
}

TEST(WrittenRegisters, ExplicitHiddenAndThroughCalls)
{
    LP_SKIP_IF_SANITIZED();
    const uint32_t rax = gpr_bit(ZYDIS_REGISTER_RAX), rbx = gpr_bit(ZYDIS_REGISTER_RBX),
                   rcx = gpr_bit(ZYDIS_REGISTER_RCX), rdx = gpr_bit(ZYDIS_REGISTER_RDX),
                   rsi = gpr_bit(ZYDIS_REGISTER_RSI), r11 = gpr_bit(ZYDIS_REGISTER_R11);
    EXPECT_EQ(writes_of(ru_empty), rax);
    EXPECT_EQ(writes_of(ru_writes_r11), r11 | rax);
    // pop rbx writes it (a fault between the mov and the pop leaves it changed).
    EXPECT_EQ(writes_of(ru_saves_rbx), rbx | rax);
    EXPECT_EQ(writes_of(ru_cpuid), rax | rbx | rcx | rdx);  // cpuid's hidden outputs
    EXPECT_EQ(writes_of(ru_zeroes_first), rsi | rax);
    // What a callee writes counts for the caller.
    EXPECT_EQ(writes_of(ru_calls_clean), rbx | rax);
    EXPECT_EQ(gpr_bit(ZYDIS_REGISTER_ESI), rsi);
    EXPECT_EQ(gpr_bit(ZYDIS_REGISTER_SIL), rsi);
    EXPECT_EQ(gpr_bit(ZYDIS_REGISTER_RSP), 1u << 4);  // a bit, but in no write set (push and pop above)
    EXPECT_EQ(gpr_bit(ZYDIS_REGISTER_XMM0), 0u);
}

TEST(WrittenRegisters, NotProvenMeansEveryRegister)
{
    LP_SKIP_IF_SANITIZED();
    uint32_t w = 0;
    EXPECT_FALSE(liveprobe::arch::vector_free(at(ru_indirect), 2, nullptr, &w));
    EXPECT_EQ(w, liveprobe::arch::kAllGprs);
}

}  // namespace
