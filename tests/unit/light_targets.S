/* The probed code of tests/unit/light_path_test.cpp, in a shared library of its own. Data is
 * reached through lp_l_data() (struct LightData there): pat[15] at 0, dump[15] at 120,
 * pat_flags at 240, dump_flags at 248. */
#define FUNC(name) .globl name; .type name, @function; name:
#define END(name) .size name, .-name

    .bss
    .p2align 4
.Ldata:
    .zero 256
.set .Lpat, .Ldata
.set .Ldump, .Ldata + 120
.set .Lpat_flags, .Ldata + 240
.set .Ldump_flags, .Ldata + 248

    .text
/* The address of lp_l_regs's probe point. */
FUNC(lp_l_regs_probe)
    leaq .Lregs_probe(%rip), %rax
    ret
END(lp_l_regs_probe)

FUNC(lp_l_data)
    leaq .Ldata(%rip), %rax
    ret
END(lp_l_data)

FUNC(lp_l_target)
    leaq 1(%rdi), %rax
    ret
END(lp_l_target)

FUNC(lp_l_target2)
.Ltarget2:
    leaq 2(%rdi), %rax
    ret
END(lp_l_target2)

/* A handler that calls lp_l_target2 (directly: no PLT) and keeps what it returned, for
 * lp_l_nest_result. */
    .bss
.Lnest_ret:
    .zero 8
    .text
FUNC(lp_l_nest)
    movl $1, %edi
    call .Ltarget2
    movq %rax, .Lnest_ret(%rip)
    xorl %eax, %eax
    ret
END(lp_l_nest)

FUNC(lp_l_nest_result)
    movq .Lnest_ret(%rip), %rax
    ret
END(lp_l_nest_result)

/* Loads pat into every general register but rsp and pat_flags into the flags, reaches
 * lp_l_regs_probe (two 5-byte nops: a plain region), stores them all into dump. */
FUNC(lp_l_regs)
    pushq %rbx
    pushq %rbp
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    pushq .Lpat_flags(%rip)
    popfq
    movq .Lpat+8(%rip), %rbx
    movq .Lpat+16(%rip), %rcx
    movq .Lpat+24(%rip), %rdx
    movq .Lpat+32(%rip), %rsi
    movq .Lpat+40(%rip), %rdi
    movq .Lpat+48(%rip), %rbp
    movq .Lpat+56(%rip), %r8
    movq .Lpat+64(%rip), %r9
    movq .Lpat+72(%rip), %r10
    movq .Lpat+80(%rip), %r11
    movq .Lpat+88(%rip), %r12
    movq .Lpat+96(%rip), %r13
    movq .Lpat+104(%rip), %r14
    movq .Lpat+112(%rip), %r15
    movq .Lpat+0(%rip), %rax
.Lregs_probe:
    nopl 0x0(%rax,%rax,1)
    nopl 0x0(%rax,%rax,1)
    pushfq
    popq .Ldump_flags(%rip)
    cld
    movq %rax, .Ldump+0(%rip)
    movq %rbx, .Ldump+8(%rip)
    movq %rcx, .Ldump+16(%rip)
    movq %rdx, .Ldump+24(%rip)
    movq %rsi, .Ldump+32(%rip)
    movq %rdi, .Ldump+40(%rip)
    movq %rbp, .Ldump+48(%rip)
    movq %r8, .Ldump+56(%rip)
    movq %r9, .Ldump+64(%rip)
    movq %r10, .Ldump+72(%rip)
    movq %r11, .Ldump+80(%rip)
    movq %r12, .Ldump+88(%rip)
    movq %r13, .Ldump+96(%rip)
    movq %r14, .Ldump+104(%rip)
    movq %r15, .Ldump+112(%rip)
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbp
    popq %rbx
    ret
END(lp_l_regs)

/* A pre handler that writes every caller-saved register (rsi too, never reading it) and the
 * flags, and changes every callee-saved one and puts it back, as the ABI allows. */
FUNC(lp_l_clobber)
    pushq %rbx
    pushq %rbp
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq $-1, %rax
    movq %rax, %rbx
    movq %rax, %rcx
    movq %rax, %rdx
    movq %rax, %rsi
    movq %rax, %rdi
    movq %rax, %rbp
    movq %rax, %r8
    movq %rax, %r9
    movq %rax, %r10
    movq %rax, %r11
    movq %rax, %r12
    movq %rax, %r13
    movq %rax, %r14
    movq %rax, %r15
    cmpq %rax, %rdi
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbp
    popq %rbx
    xorl %eax, %eax
    ret
END(lp_l_clobber)

/* A pre handler that overwrites every general register, callee-saved ones included, without
 * putting them back, then faults (a load from address 8). */
FUNC(lp_l_clobber_fault)
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
END(lp_l_clobber_fault)

    .section .note.GNU-stack,"",@progbits
