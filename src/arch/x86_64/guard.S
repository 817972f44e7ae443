/* lp_setjmp / lp_longjmp: a setjmp without the signal mask (no system call), for the fault
 * guards of the hit path. Buffer: rbx rbp r12 r13 r14 r15 rsp rip. */
    .text
    .globl lp_setjmp
    .hidden lp_setjmp
    .type lp_setjmp, @function
lp_setjmp:
    .cfi_startproc
    movq %rbx, 0(%rdi)
    movq %rbp, 8(%rdi)
    movq %r12, 16(%rdi)
    movq %r13, 24(%rdi)
    movq %r14, 32(%rdi)
    movq %r15, 40(%rdi)
    leaq 8(%rsp), %rdx
    movq %rdx, 48(%rdi)
    movq (%rsp), %rdx
    movq %rdx, 56(%rdi)
    xorl %eax, %eax
    ret
    .cfi_endproc
    .size lp_setjmp, .-lp_setjmp

    .globl lp_longjmp
    .hidden lp_longjmp
    .type lp_longjmp, @function
lp_longjmp:
    .cfi_startproc
    movl %esi, %eax
    movq 0(%rdi), %rbx
    movq 8(%rdi), %rbp
    movq 16(%rdi), %r12
    movq 24(%rdi), %r13
    movq 32(%rdi), %r14
    movq 40(%rdi), %r15
    movq 48(%rdi), %rsp
    jmp *56(%rdi)
    .cfi_endproc
    .size lp_longjmp, .-lp_longjmp

    .section .note.GNU-stack,"",@progbits
