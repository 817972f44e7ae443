// vector_free (src/arch/x86_64/vector_use.cpp): may a detour skip saving the vector state
// around a handler?
//
// The handlers are written here in assembly, as global functions with a type and a size, so
// symbols::function_at finds their bounds in this binary's .symtab and each test names the exact
// instructions it is about. None of them is ever executed.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "arch/x86_64/region.hpp"
#include "skip_if_sanitized.hpp"

#define LP_VF_FN(name, body)                                                                      \
    ".globl " #name "\n.type " #name ", @function\n" #name ":\n" body ".size " #name ", .-" #name \
    "\n"

// clang-format off
asm(".text\n"
    LP_VF_FN(vf_int,          "mov %edi, %eax\n add $1, %eax\n ret\n")
    LP_VF_FN(vf_movaps,       "movaps %xmm0, %xmm1\n ret\n")
    LP_VF_FN(vf_pxor,         "xor %eax, %eax\n pxor %xmm0, %xmm0\n ret\n")
    LP_VF_FN(vf_kmov,         "kmovw %k1, %eax\n ret\n")
    LP_VF_FN(vf_vzeroupper,   "vzeroupper\n ret\n")
    LP_VF_FN(vf_fld1,         "fld1\n fstp %st(0)\n ret\n")
    LP_VF_FN(vf_ldmxcsr,      "ldmxcsr (%rdi)\n ret\n")
    LP_VF_FN(vf_pblendvb,     "pblendvb (%rdi), %xmm1\n ret\n")  // xmm0 is a hidden operand
    LP_VF_FN(vf_int_only_sse, "crc32 %esi, %edi\n popcnt %edi, %eax\n mfence\n prefetcht0 (%rdi)\n ret\n")
    LP_VF_FN(vf_calls_int,    "push %rbx\n call vf_int\n pop %rbx\n ret\n")
    LP_VF_FN(vf_calls_calls,  "call vf_calls_int\n ret\n")
    LP_VF_FN(vf_calls_vector, "call vf_movaps\n ret\n")
    LP_VF_FN(vf_tail_int,     "test %edi, %edi\n je 1f\n jmp vf_int\n1: ret\n")
    LP_VF_FN(vf_tail_vector,  "jmp vf_vzeroupper\n")
    LP_VF_FN(vf_recursive,    "test %edi, %edi\n je 1f\n dec %edi\n call vf_recursive\n1: ret\n")
    LP_VF_FN(vf_indirect,     "call *%rax\n ret\n")
    LP_VF_FN(vf_indirect_jmp, "jmp *(%rdi)\n")
    LP_VF_FN(vf_plt,          "call memcpy@PLT\n ret\n")
    LP_VF_FN(vf_plt_int,      "call getpid@PLT\n ret\n")
    LP_VF_FN(vf_mutual_a,     "test %edi, %edi\n je 1f\n call vf_mutual_b\n1: ret\n")
    LP_VF_FN(vf_mutual_b,     "dec %edi\n call vf_mutual_a\n ret\n")
    LP_VF_FN(vf_split,        "test %edi, %edi\n jne vf_split.cold\n2: ret\n")
    LP_VF_FN(vf_split.cold,   "xor %eax, %eax\n jmp 2b\n")
    LP_VF_FN(vf_split_vec,    "test %edi, %edi\n jne vf_split_vec.cold\n3: ret\n")
    LP_VF_FN(vf_split_vec.cold, "pxor %xmm0, %xmm0\n jmp 3b\n")
    LP_VF_FN(vf_loop,         "1: dec %edi\n jnz 1b\n xor %eax, %eax\n ret\n")
    ".text\n");
// clang-format on

extern "C" {
void vf_int();
void vf_movaps();
void vf_pxor();
void vf_kmov();
void vf_vzeroupper();
void vf_fld1();
void vf_ldmxcsr();
void vf_pblendvb();
void vf_int_only_sse();
void vf_calls_int();
void vf_calls_calls();
void vf_calls_vector();
void vf_tail_int();
void vf_tail_vector();
void vf_recursive();
void vf_indirect();
void vf_indirect_jmp();
void vf_plt();
void vf_plt_int();
void vf_loop();
void vf_mutual_a();
void vf_split();
void vf_split_vec();

// The kind of handler KPROBE_FLAG_NOVEC is for, as the compiler writes it.
__attribute__((noinline, used)) int empty_handler() {
    return 0;
}
}

namespace liveprobe::arch {
namespace {

uint64_t addr_of(void (*f)()) {
    return reinterpret_cast<uint64_t>(f);
}

// vector_free's reason, or "" when the code is proven vector-free.
std::string why_not(void (*f)(), int depth) {
    const char *why = "unset";
    const bool ok = vector_free(addr_of(f), depth, &why);
    if (ok) {
        EXPECT_EQ(why, nullptr);
        return "";
    }
    EXPECT_NE(why, nullptr);
    return why ? why : "(null)";
}

#define EXPECT_HAS(s, part) EXPECT_NE((s).find(part), std::string::npos) << (s)

TEST(VectorFree, IntegerOnly) {
    EXPECT_EQ(why_not(vf_int, 0), "");
    EXPECT_EQ(why_not(vf_loop, 0), "");
    // crc32 and popcnt are SSE4.2-era but work on general registers; fences and prefetches
    // touch no register state at all.
    EXPECT_EQ(why_not(vf_int_only_sse, 0), "");
}

TEST(VectorFree, SseInstructions) {
    EXPECT_HAS(why_not(vf_movaps, 3), "movaps at vf_movaps+0x0");
    EXPECT_HAS(why_not(vf_pxor, 3), "pxor at vf_pxor+0x2");
    EXPECT_HAS(why_not(vf_ldmxcsr, 3), "ldmxcsr at vf_ldmxcsr+0x0");
    EXPECT_HAS(why_not(vf_pblendvb, 3), "pblendvb");
}

TEST(VectorFree, AvxAndAvx512) {
    EXPECT_HAS(why_not(vf_kmov, 3), "kmovw at vf_kmov+0x0");
    EXPECT_HAS(why_not(vf_vzeroupper, 3), "vzeroupper at vf_vzeroupper+0x0");
}

TEST(VectorFree, X87) {
    EXPECT_HAS(why_not(vf_fld1, 3), "fld1 at vf_fld1+0x0");
}

TEST(VectorFree, DirectCallsAreFollowedUpToDepth) {
    EXPECT_EQ(why_not(vf_calls_int, 1), "");
    const std::string shallow = why_not(vf_calls_int, 0);
    EXPECT_HAS(shallow, "call at vf_calls_int+0x1 to vf_int+0x0");
    EXPECT_HAS(shallow, "deeper than the levels followed");

    EXPECT_EQ(why_not(vf_calls_calls, 2), "");
    EXPECT_HAS(why_not(vf_calls_calls, 1), "deeper than the levels followed");

    const std::string vec = why_not(vf_calls_vector, 1);
    EXPECT_HAS(vec, "movaps at vf_movaps+0x0");
    EXPECT_HAS(vec, "reached through the call at vf_calls_vector+0x0");
}

TEST(VectorFree, TailCallsAreCalls) {
    EXPECT_EQ(why_not(vf_tail_int, 1), "");
    EXPECT_HAS(why_not(vf_tail_int, 0), "jump at vf_tail_int+0x4 to vf_int+0x0");
    EXPECT_HAS(why_not(vf_tail_vector, 1), "vzeroupper at vf_vzeroupper+0x0");
}

TEST(VectorFree, RecursionTerminates) {
    EXPECT_EQ(why_not(vf_recursive, 0), "");
    EXPECT_EQ(why_not(vf_recursive, 5), "");
}

TEST(VectorFree, MutualRecursionTerminates) {
    EXPECT_EQ(why_not(vf_mutual_a, 1), "");
    EXPECT_HAS(why_not(vf_mutual_a, 0), "call at vf_mutual_a+0x4 to vf_mutual_b+0x0");
}

TEST(VectorFree, ColdPartsArePartOfTheFunction) {
    // GCC's f.cold is reached by jumps, not calls: it costs no level.
    EXPECT_EQ(why_not(vf_split, 0), "");
    EXPECT_HAS(why_not(vf_split_vec, 0), "pxor at vf_split_vec.cold+0x0");
}

TEST(VectorFree, IndirectCallsAndJumpsAreNotProven) {
    EXPECT_HAS(why_not(vf_indirect, 3), "indirect call at vf_indirect+0x0 (cannot follow)");
    EXPECT_HAS(why_not(vf_indirect_jmp, 3), "indirect jump at vf_indirect_jmp+0x0");
}

TEST(VectorFree, PltCallsAreFollowedToWhatTheyBind) {
    // memcpy@PLT leads, through the GOT (bound, or by its JUMP_SLOT symbol before the first
    // call), to the implementation libc's resolver picked, which uses vector registers.
    const std::string why = why_not(vf_plt, 3);
    EXPECT_HAS(why, "reached through the call at vf_plt+0x0");
    EXPECT_TRUE(why.find("memcpy") != std::string::npos || why.find("memmove") != std::string::npos) << why;
    // getpid is integer code (a system call): proven through its PLT stub.
    EXPECT_EQ(why_not(vf_plt_int, 3), "") << "getpid@PLT";
}

TEST(VectorFree, CompiledEmptyHandler) {
    LP_SKIP_IF_SANITIZED();
    const char *why = "unset";
    EXPECT_TRUE(vector_free(reinterpret_cast<uint64_t>(&empty_handler), 2, &why)) << why;
}

TEST(VectorFree, UnknownCode) {
    const char *why = nullptr;
    EXPECT_FALSE(vector_free(0x10, 1, &why));
    ASSERT_NE(why, nullptr);
    EXPECT_HAS(std::string(why), "no bounds for");
}

TEST(VectorFree, AnswersAreCachedAndStable) {
    const char *first = nullptr;
    const char *second = nullptr;
    EXPECT_FALSE(vector_free(addr_of(vf_movaps), 1, &first));
    EXPECT_FALSE(vector_free(addr_of(vf_movaps), 1, &second));
    EXPECT_EQ(first, second);  // the same interned reason
    EXPECT_STREQ(first, "movaps at vf_movaps+0x0");
    EXPECT_TRUE(vector_free(addr_of(vf_int), 0, nullptr));
}

}  // namespace
}  // namespace liveprobe::arch
