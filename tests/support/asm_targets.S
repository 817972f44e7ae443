/* Probe targets for the behaviour tests; see asm_targets.hpp. */
    .text

#define FUNC(name) .globl name; .type name, @function; name:
#define LABEL(name) .globl name; name:
#define END(name) .size name, .-name

FUNC(lp_t_ret42)
LABEL(lp_t_ret42_mov)
    movl $42, %eax
LABEL(lp_t_ret42_ret)
    ret
END(lp_t_ret42)

FUNC(lp_t_load)
LABEL(lp_t_load_mov)
    movq (%rdi), %rax
    ret
END(lp_t_load)

/* int lp_t_clobber_fault(struct kprobe *, struct pt_regs *): a pre handler that overwrites
 * every general register (callee-saved ones included, without restoring them) and the
 * arithmetic flags, then faults (a load from address 8). Integer-only: provably vector-free. */
FUNC(lp_t_clobber_fault)
    movq $-1, %rax
    movq %rax, %rbx
    movq %rax, %rcx
    movq %rax, %rdx
    movq %rax, %rsi
    movq %rax, %rbp
    movq %rax, %r8
    movq %rax, %r9
    movq %rax, %r10
    movq %rax, %r11
    movq %rax, %r12
    movq %rax, %r13
    movq %rax, %r14
    movq %rax, %r15
    movl $8, %edi
    cmpq %rax, %rdi
    movq (%rdi), %rax
    ret
END(lp_t_clobber_fault)

/* int lp_t_rbp_fault(void *, struct pt_regs *): a handler that overwrites rbp (no other
 * callee-saved register) and caller-saved ones, without restoring rbp, then faults (a load
 * from address 8): what a frame-pointer build's handler leaves when it faults. */
FUNC(lp_t_rbp_fault)
    movq $-1, %rax
    movq %rax, %rbp
    movq %rax, %rcx
    movq %rax, %rdx
    movl $8, %edi
    movq (%rdi), %rax
    ret
END(lp_t_rbp_fault)

/* int lp_t_rbx_rbp_fault(void *, struct pt_regs *): the same, overwriting rbx too, as a
 * handler that keeps a value across a call in rbx leaves it when it faults in that call. */
FUNC(lp_t_rbx_rbp_fault)
    movq $-1, %rax
    movq %rax, %rbx
    movq %rax, %rbp
    movq %rax, %rcx
    movl $8, %edi
    movq (%rdi), %rax
    ret
END(lp_t_rbx_rbp_fault)

FUNC(lp_t_carry)
    xorl %eax, %eax
LABEL(lp_t_carry_jc)
    jc 1f
    ret
1:  movl $1, %eax
    ret
END(lp_t_carry)

FUNC(lp_t_call)
    pushq %rbx
LABEL(lp_t_call_site)
    call lp_t_ret42
    popq %rbx
    ret
END(lp_t_call)

FUNC(lp_t_riprel)
LABEL(lp_t_riprel_load)
    movq lp_t_data(%rip), %rax
    ret
END(lp_t_riprel)

FUNC(lp_t_loop)
    movq %rdi, %rcx
    xorl %eax, %eax
1:  incl %eax
LABEL(lp_t_loop_insn)
    loop 1b
    ret
END(lp_t_loop)

FUNC(lp_t_sys)
    movl $39, %eax
LABEL(lp_t_sys_syscall)
    syscall
    ret
END(lp_t_sys)

FUNC(lp_t_jmp)
LABEL(lp_t_jmp_insn)
    jmp 1f
    ud2
1:  movl $7, %eax
    ret
END(lp_t_jmp)

FUNC(lp_t_icall)
    pushq %rbx
LABEL(lp_t_icall_site)
    call *%rdi
    popq %rbx
    ret
END(lp_t_icall)

FUNC(lp_t_push)
LABEL(lp_t_push_insn)
    pushq %rdi
    popq %rax
    ret
END(lp_t_push)

FUNC(lp_t_div)
    movq %rdi, %rax
    cqto
    idivq %rsi
    ret
END(lp_t_div)

    .data
    .globl lp_t_data
    .align 8
lp_t_data:
    .quad 0x1122334455667788


.macro PUSH_CALLEE_SAVED
    pushq %rbx
    pushq %rbp
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
.endm
.macro POP_CALLEE_SAVED
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbp
    popq %rbx
.endm
.macro LOAD_ALL
    vmovdqu64 lp_o_pat_z+0(%rip), %zmm0
    vmovdqu64 lp_o_pat_z+64(%rip), %zmm1
    vmovdqu64 lp_o_pat_z+128(%rip), %zmm2
    vmovdqu64 lp_o_pat_z+192(%rip), %zmm3
    vmovdqu64 lp_o_pat_z+256(%rip), %zmm4
    vmovdqu64 lp_o_pat_z+320(%rip), %zmm5
    vmovdqu64 lp_o_pat_z+384(%rip), %zmm6
    vmovdqu64 lp_o_pat_z+448(%rip), %zmm7
    vmovdqu64 lp_o_pat_z+512(%rip), %zmm8
    vmovdqu64 lp_o_pat_z+576(%rip), %zmm9
    vmovdqu64 lp_o_pat_z+640(%rip), %zmm10
    vmovdqu64 lp_o_pat_z+704(%rip), %zmm11
    vmovdqu64 lp_o_pat_z+768(%rip), %zmm12
    vmovdqu64 lp_o_pat_z+832(%rip), %zmm13
    vmovdqu64 lp_o_pat_z+896(%rip), %zmm14
    vmovdqu64 lp_o_pat_z+960(%rip), %zmm15
    vmovdqu64 lp_o_pat_z+1024(%rip), %zmm16
    vmovdqu64 lp_o_pat_z+1088(%rip), %zmm17
    vmovdqu64 lp_o_pat_z+1152(%rip), %zmm18
    vmovdqu64 lp_o_pat_z+1216(%rip), %zmm19
    vmovdqu64 lp_o_pat_z+1280(%rip), %zmm20
    vmovdqu64 lp_o_pat_z+1344(%rip), %zmm21
    vmovdqu64 lp_o_pat_z+1408(%rip), %zmm22
    vmovdqu64 lp_o_pat_z+1472(%rip), %zmm23
    vmovdqu64 lp_o_pat_z+1536(%rip), %zmm24
    vmovdqu64 lp_o_pat_z+1600(%rip), %zmm25
    vmovdqu64 lp_o_pat_z+1664(%rip), %zmm26
    vmovdqu64 lp_o_pat_z+1728(%rip), %zmm27
    vmovdqu64 lp_o_pat_z+1792(%rip), %zmm28
    vmovdqu64 lp_o_pat_z+1856(%rip), %zmm29
    vmovdqu64 lp_o_pat_z+1920(%rip), %zmm30
    vmovdqu64 lp_o_pat_z+1984(%rip), %zmm31
    kmovq lp_o_pat_k+8(%rip), %k1
    kmovq lp_o_pat_k+16(%rip), %k2
    kmovq lp_o_pat_k+24(%rip), %k3
    kmovq lp_o_pat_k+32(%rip), %k4
    kmovq lp_o_pat_k+40(%rip), %k5
    kmovq lp_o_pat_k+48(%rip), %k6
    kmovq lp_o_pat_k+56(%rip), %k7
    pushq lp_o_pat_flags(%rip)
    popfq
    movq lp_o_pat_g+0(%rip), %rax
    movq lp_o_pat_g+8(%rip), %rbx
    movq lp_o_pat_g+16(%rip), %rcx
    movq lp_o_pat_g+24(%rip), %rdx
    movq lp_o_pat_g+32(%rip), %rsi
    movq lp_o_pat_g+40(%rip), %rdi
    movq lp_o_pat_g+48(%rip), %rbp
    movq lp_o_pat_g+56(%rip), %r8
    movq lp_o_pat_g+64(%rip), %r9
    movq lp_o_pat_g+72(%rip), %r10
    movq lp_o_pat_g+80(%rip), %r11
    movq lp_o_pat_g+88(%rip), %r12
    movq lp_o_pat_g+96(%rip), %r13
    movq lp_o_pat_g+104(%rip), %r14
    movq lp_o_pat_g+112(%rip), %r15
.endm
.macro DUMP_ALL
    pushfq
    popq lp_o_dump_flags(%rip)
    movq %rax, lp_o_dump_g+0(%rip)
    movq %rbx, lp_o_dump_g+8(%rip)
    movq %rcx, lp_o_dump_g+16(%rip)
    movq %rdx, lp_o_dump_g+24(%rip)
    movq %rsi, lp_o_dump_g+32(%rip)
    movq %rdi, lp_o_dump_g+40(%rip)
    movq %rbp, lp_o_dump_g+48(%rip)
    movq %r8, lp_o_dump_g+56(%rip)
    movq %r9, lp_o_dump_g+64(%rip)
    movq %r10, lp_o_dump_g+72(%rip)
    movq %r11, lp_o_dump_g+80(%rip)
    movq %r12, lp_o_dump_g+88(%rip)
    movq %r13, lp_o_dump_g+96(%rip)
    movq %r14, lp_o_dump_g+104(%rip)
    movq %r15, lp_o_dump_g+112(%rip)
    vmovdqu64 %zmm0, lp_o_dump_z+0(%rip)
    vmovdqu64 %zmm1, lp_o_dump_z+64(%rip)
    vmovdqu64 %zmm2, lp_o_dump_z+128(%rip)
    vmovdqu64 %zmm3, lp_o_dump_z+192(%rip)
    vmovdqu64 %zmm4, lp_o_dump_z+256(%rip)
    vmovdqu64 %zmm5, lp_o_dump_z+320(%rip)
    vmovdqu64 %zmm6, lp_o_dump_z+384(%rip)
    vmovdqu64 %zmm7, lp_o_dump_z+448(%rip)
    vmovdqu64 %zmm8, lp_o_dump_z+512(%rip)
    vmovdqu64 %zmm9, lp_o_dump_z+576(%rip)
    vmovdqu64 %zmm10, lp_o_dump_z+640(%rip)
    vmovdqu64 %zmm11, lp_o_dump_z+704(%rip)
    vmovdqu64 %zmm12, lp_o_dump_z+768(%rip)
    vmovdqu64 %zmm13, lp_o_dump_z+832(%rip)
    vmovdqu64 %zmm14, lp_o_dump_z+896(%rip)
    vmovdqu64 %zmm15, lp_o_dump_z+960(%rip)
    vmovdqu64 %zmm16, lp_o_dump_z+1024(%rip)
    vmovdqu64 %zmm17, lp_o_dump_z+1088(%rip)
    vmovdqu64 %zmm18, lp_o_dump_z+1152(%rip)
    vmovdqu64 %zmm19, lp_o_dump_z+1216(%rip)
    vmovdqu64 %zmm20, lp_o_dump_z+1280(%rip)
    vmovdqu64 %zmm21, lp_o_dump_z+1344(%rip)
    vmovdqu64 %zmm22, lp_o_dump_z+1408(%rip)
    vmovdqu64 %zmm23, lp_o_dump_z+1472(%rip)
    vmovdqu64 %zmm24, lp_o_dump_z+1536(%rip)
    vmovdqu64 %zmm25, lp_o_dump_z+1600(%rip)
    vmovdqu64 %zmm26, lp_o_dump_z+1664(%rip)
    vmovdqu64 %zmm27, lp_o_dump_z+1728(%rip)
    vmovdqu64 %zmm28, lp_o_dump_z+1792(%rip)
    vmovdqu64 %zmm29, lp_o_dump_z+1856(%rip)
    vmovdqu64 %zmm30, lp_o_dump_z+1920(%rip)
    vmovdqu64 %zmm31, lp_o_dump_z+1984(%rip)
    kmovq %k1, lp_o_dump_k+8(%rip)
    kmovq %k2, lp_o_dump_k+16(%rip)
    kmovq %k3, lp_o_dump_k+24(%rip)
    kmovq %k4, lp_o_dump_k+32(%rip)
    kmovq %k5, lp_o_dump_k+40(%rip)
    kmovq %k6, lp_o_dump_k+48(%rip)
    kmovq %k7, lp_o_dump_k+56(%rip)
.endm

/* ---- Register preservation across an optimized mid-function probe (optimize_test.cpp) ----
 * lp_o_regs: loads lp_o_pat into every general register (but rsp), the flags, zmm0-31 and
 * k1-7; reaches lp_o_regs_probe (two 5-byte nops: a plain region); stores everything into
 * lp_o_dump. Needs AVX-512F. */
    .text
FUNC(lp_o_regs)
    PUSH_CALLEE_SAVED
    LOAD_ALL
LABEL(lp_o_regs_probe)
    nopl 0x0(%rax,%rax,1)
    nopl 0x0(%rax,%rax,1)
LABEL(lp_o_regs_after)
    DUMP_ALL
    vzeroupper
    cld                                 /* lp_o_pat_flags may set DF */
    POP_CALLEE_SAVED
    ret
END(lp_o_regs)

/* lp_o_call_regs: the same around a call of lp_o_leaf (a 5-byte nop and ret, which touches
 * nothing) instead of the nops, with the stack 16-aligned at the call: every register but the
 * flags must come back from a kretprobe on lp_o_leaf as it went in. */
.macro AROUND_A_CALL target
    PUSH_CALLEE_SAVED
    subq $8, %rsp
    LOAD_ALL
    call \target
    DUMP_ALL
    vzeroupper
    cld
    addq $8, %rsp
    POP_CALLEE_SAVED
    ret
.endm
FUNC(lp_o_call_regs)
    AROUND_A_CALL lp_o_leaf
END(lp_o_call_regs)

FUNC(lp_o_leaf)
    nopl 0x0(%rax,%rax,1)
    ret
END(lp_o_leaf)

/* lp_o_call_nested: the same around a call of lp_o_nest, which calls itself once more when
 * lp_o_nest_again is set (clearing it), both calls with the stack 16-aligned; it touches no
 * register but the flags. A kretprobe on it has two calls in flight, the inner one entered
 * while the outer one holds the thread's cached instance. */
FUNC(lp_o_call_nested)
    movl $1, lp_o_nest_again(%rip)
    AROUND_A_CALL lp_o_nest
END(lp_o_call_nested)

FUNC(lp_o_nest)
    nopl 0x0(%rax,%rax,1)
    cmpl $0, lp_o_nest_again(%rip)
    je 1f
    movl $0, lp_o_nest_again(%rip)
    leaq -8(%rsp), %rsp
    call lp_o_nest
    leaq 8(%rsp), %rsp
1:  ret
END(lp_o_nest)

/* int lp_t_r8_r11(void *, struct pt_regs *): a handler that writes rcx and r8 to r11 (no
 * callee-saved register), reads nothing, counts its runs in lp_t_r8_r11_runs and returns 0. */
FUNC(lp_t_r8_r11)
    incl lp_t_r8_r11_runs(%rip)
    movq $-1, %rcx
    movq %rcx, %r8
    movq %rcx, %r9
    movq %rcx, %r10
    movq %rcx, %r11
    xorl %eax, %eax
    ret
END(lp_t_r8_r11)

    .data
    .align 4
lp_o_nest_again:
    .long 0
    .globl lp_t_r8_r11_runs
lp_t_r8_r11_runs:
    .long 0
    .text

/* lp_o_loop(const volatile char *stop): counts iterations until *stop; rcx goes +2 -2 each
 * time. The probe (lp_o_loop_probe) covers two 4-byte adds: a thread is often stopped between
 * them, inside the region. Returns the count; rcx must be back to its start (0) when done. */
FUNC(lp_o_loop)
    xorl %eax, %eax
    xorl %ecx, %ecx
1:
LABEL(lp_o_loop_probe)
    addq $1, %rax
    addq $2, %rcx
    subq $2, %rcx
    cmpb $0, (%rdi)
    je 1b
    testq %rcx, %rcx
    jz 2f
    movq $-1, %rax
2:  ret
END(lp_o_loop)

/* long lp_o_tiny(long x): lea 1(%rdi),%rax ; ret -- 4 + 1 bytes: optimizable only because a
 * ret may end the region. */
FUNC(lp_o_tiny)
    leaq 1(%rdi), %rax
    ret
END(lp_o_tiny)

/* long lp_o_short(long x): mov %rdi,%rax ; ret -- 4 bytes, then 12 bytes of nop padding (no
 * function there): the jmp covers the ret and a byte of the padding, put back on removal. */
    .p2align 4
FUNC(lp_o_short)
    movq %rdi, %rax
    ret
END(lp_o_short)
    .p2align 4, 0x90
LABEL(lp_o_short_after)
    ret

/* long lp_o_switch(long x): a jump through a register to an address the function computes,
 * past the bytes a jmp at its entry replaces: optimized (nothing lands inside them). */
FUNC(lp_o_switch)
    leaq 1f(%rip), %rax
    addq $0, %rdi
    jmp *%rax
1:  movq %rdi, %rax
    ret
END(lp_o_switch)

/* long lp_o_goto_into(long x): x + 2, by a jump through a register back to its own byte 2 (a
 * computed goto to a label inside the bytes a jmp at the entry would replace): never
 * optimized. */
FUNC(lp_o_goto_into)
    xorl %ecx, %ecx
1:  addq $1, %rcx
    cmpq $2, %rcx
    jae 2f
    leaq 1b(%rip), %rax
    jmp *%rax
2:  leaq (%rdi,%rcx), %rax
    ret
END(lp_o_goto_into)

/* long lp_o_table(long x): a switch as GCC compiles it in PIE code (a bounds check, a table of
 * 32-bit offsets): cases 0..3 return 10, 20, 30, 40, anything else -1. Its one indirect jump is
 * that table's: optimizable. */
FUNC(lp_o_table)
    movq %rdi, %rax
    cmpq $3, %rdi
    ja 9f
    leaq 8f(%rip), %rdx
    movslq (%rdx,%rdi,4), %rax
    addq %rdx, %rax
    notrack jmp *%rax
1:  movl $10, %eax
    ret
2:  movl $20, %eax
    ret
3:  movl $30, %eax
    ret
4:  movl $40, %eax
    ret
9:  movq $-1, %rax
    ret
END(lp_o_table)
    .section .rodata
    .align 4
8:  .long 1b - 8b, 2b - 8b, 3b - 8b, 4b - 8b
    .text

/* long lp_o_table_back(long x): counts x down to 0 through a table whose case 1 jumps back to
 * the function's second instruction, inside the bytes a jump at the entry would replace: never
 * optimized (returns 0 for x = 1 or 2, x - 1 otherwise). */
FUNC(lp_o_table_back)
    movq %rdi, %rax
1:  subq $1, %rax
    cmpq $1, %rax
    ja 9f
    leaq 8f(%rip), %rdx
    movslq (%rdx,%rax,4), %rcx
    addq %rdx, %rcx
    jmp *%rcx
2:  ret
9:  ret
END(lp_o_table_back)
    .section .rodata
    .align 4
8:  .long 2b - 8b, 1b - 8b
    .text

    .data
    .align 64
    .globl lp_o_pat_z, lp_o_dump_z, lp_o_pat_g, lp_o_dump_g, lp_o_pat_k, lp_o_dump_k
    .globl lp_o_pat_flags, lp_o_dump_flags
lp_o_pat_z:  .zero 2048
lp_o_dump_z: .zero 2048
lp_o_pat_g:  .zero 120
lp_o_dump_g: .zero 120
lp_o_pat_k:  .zero 64
lp_o_dump_k: .zero 64
lp_o_pat_flags:  .quad 0
lp_o_dump_flags: .quad 0


    .text

/* Vector state (vector_state_test.cpp). */

/* unsigned long lp_v_clean(void): vzeroupper; xmm0-15 from lp_v_pat (VEX.128 loads: the upper
 * state stays clean); lp_v_clean_probe (two 5-byte nops); xmm0-15 to lp_v_dump; returns
 * XINUSE (xgetbv with ecx=1). */
FUNC(lp_v_clean)
    vzeroupper
    vmovdqu lp_v_pat+0(%rip), %xmm0
    vmovdqu lp_v_pat+16(%rip), %xmm1
    vmovdqu lp_v_pat+32(%rip), %xmm2
    vmovdqu lp_v_pat+48(%rip), %xmm3
    vmovdqu lp_v_pat+64(%rip), %xmm4
    vmovdqu lp_v_pat+80(%rip), %xmm5
    vmovdqu lp_v_pat+96(%rip), %xmm6
    vmovdqu lp_v_pat+112(%rip), %xmm7
    vmovdqu lp_v_pat+128(%rip), %xmm8
    vmovdqu lp_v_pat+144(%rip), %xmm9
    vmovdqu lp_v_pat+160(%rip), %xmm10
    vmovdqu lp_v_pat+176(%rip), %xmm11
    vmovdqu lp_v_pat+192(%rip), %xmm12
    vmovdqu lp_v_pat+208(%rip), %xmm13
    vmovdqu lp_v_pat+224(%rip), %xmm14
    vmovdqu lp_v_pat+240(%rip), %xmm15
LABEL(lp_v_clean_probe)
    nopl 0x0(%rax,%rax,1)
    nopl 0x0(%rax,%rax,1)
    vmovdqu %xmm0, lp_v_dump+0(%rip)
    vmovdqu %xmm1, lp_v_dump+16(%rip)
    vmovdqu %xmm2, lp_v_dump+32(%rip)
    vmovdqu %xmm3, lp_v_dump+48(%rip)
    vmovdqu %xmm4, lp_v_dump+64(%rip)
    vmovdqu %xmm5, lp_v_dump+80(%rip)
    vmovdqu %xmm6, lp_v_dump+96(%rip)
    vmovdqu %xmm7, lp_v_dump+112(%rip)
    vmovdqu %xmm8, lp_v_dump+128(%rip)
    vmovdqu %xmm9, lp_v_dump+144(%rip)
    vmovdqu %xmm10, lp_v_dump+160(%rip)
    vmovdqu %xmm11, lp_v_dump+176(%rip)
    vmovdqu %xmm12, lp_v_dump+192(%rip)
    vmovdqu %xmm13, lp_v_dump+208(%rip)
    vmovdqu %xmm14, lp_v_dump+224(%rip)
    vmovdqu %xmm15, lp_v_dump+240(%rip)
    movl $1, %ecx
    xgetbv
    ret
END(lp_v_clean)

/* double lp_v_x87(void): loads lp_v_a and lp_v_b on the x87 stack, reaches lp_v_x87_probe
 * (two 5-byte nops) with two registers in use, returns a + b computed there. */
FUNC(lp_v_x87)
    fldl lp_v_a(%rip)
    fldl lp_v_b(%rip)
LABEL(lp_v_x87_probe)
    nopl 0x0(%rax,%rax,1)
    nopl 0x0(%rax,%rax,1)
    faddp
    fstpl -8(%rsp)
    movsd -8(%rsp), %xmm0
    ret
END(lp_v_x87)

/* void lp_v_nop(void): a 5-byte nop (entry probe) and ret. */
FUNC(lp_v_nop)
LABEL(lp_v_nop_probe)
    nopl 0x0(%rax,%rax,1)
    nopl 0x0(%rax,%rax,1)
    ret
END(lp_v_nop)

    .data
    .balign 64
    .globl lp_v_pat, lp_v_dump, lp_v_a, lp_v_b
lp_v_pat:  .fill 256, 1, 0
lp_v_dump: .fill 256, 1, 0
lp_v_a:    .double 1.5
lp_v_b:    .double 2.25
    .text

    .text

/* Return probes (kretprobe_test.cpp). */

/* long lp_k_leaf(long x): x + 7. */
FUNC(lp_k_leaf)
    leaq 7(%rdi), %rax
    ret
END(lp_k_leaf)

/* long lp_k_tail(long x): tail call: jumps to lp_k_leaf with x + 1 (x + 8 in all). */
FUNC(lp_k_tail)
    addq $1, %rdi
    jmp lp_k_leaf
END(lp_k_tail)

/* long lp_k_callsite(long x): calls lp_k_leaf; lp_k_callsite_ret is its return address. */
FUNC(lp_k_callsite)
    subq $8, %rsp
    call lp_k_leaf
LABEL(lp_k_callsite_ret)
    addq $8, %rsp
    ret
END(lp_k_callsite)

/* long lp_k_tailsite(long x): calls lp_k_tail; lp_k_tailsite_ret is its return address. */
FUNC(lp_k_tailsite)
    subq $8, %rsp
    call lp_k_tail
LABEL(lp_k_tailsite_ret)
    addq $8, %rsp
    ret
END(lp_k_tailsite)

/* long lp_k_tailrec(long n): n tail calls of itself (jmp to its own entry), then returns 7:
 * n + 1 calls that all return through the one return slot of its caller. */
FUNC(lp_k_tailrec)
    testq %rdi, %rdi
    jz 1f
    subq $1, %rdi
    jmp lp_k_tailrec
1:  movl $7, %eax
    ret
END(lp_k_tailrec)

/* long lp_k_tailrecsite(long n): calls lp_k_tailrec(n); lp_k_tailrecsite_ret is its return address. */
FUNC(lp_k_tailrecsite)
    subq $8, %rsp
    call lp_k_tailrec
LABEL(lp_k_tailrecsite_ret)
    addq $8, %rsp
    ret
END(lp_k_tailrecsite)

    .section .note.GNU-stack,"",@progbits
