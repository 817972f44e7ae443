/* Calling a jprobe's entry with the probed function's arguments (core/jprobe.cpp).
 *
 * void lp_jprobe_call(void *entry, const uint64_t gprs[6], const uint8_t *xmm, uint64_t stride,
 *                     const void *stack_args, uint64_t nbytes, uint64_t *frame_slot)
 *   Copies nbytes of stack arguments to the top of a new frame (so the entry finds them where
 *   a call would have put them), loads xmm0-7 from xmm (xmm + i * stride; xmm NULL: they are
 *   left as they are), rdi rsi rdx rcx r8 r9 from gprs, al = 8, and calls entry. It returns
 *   when the entry returns, or when the entry calls jprobe_return(), which comes back here
 *   through *frame_slot (this frame's rbp; the previous value is kept and put back).
 * void jprobe_return(void)
 *   Ends a jprobe entry: back to lp_jprobe_call's frame. Outside an entry it just returns.
 */
    .text
    .globl lp_jprobe_call
    .hidden lp_jprobe_call
    .type lp_jprobe_call, @function
lp_jprobe_call:
    .cfi_startproc
    pushq %rbp
    .cfi_def_cfa_offset 16
    .cfi_offset %rbp, -16
    movq %rsp, %rbp
    .cfi_def_cfa_register %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    .cfi_offset %rbx, -24
    .cfi_offset %r12, -32
    .cfi_offset %r13, -40
    .cfi_offset %r14, -48
    .cfi_offset %r15, -56
    subq $8, %rsp
    movq %rdi, %r12             /* entry */
    movq %rsi, %r13             /* gprs */
    movq %rdx, %r14             /* xmm */
    movq %rcx, %r15             /* stride */
    movq 16(%rbp), %rbx         /* frame_slot */
    pushq (%rbx)                /* the previous frame, at -56(%rbp) */
    subq $8, %rsp
    movq %r9, %rax              /* room for the stack arguments, 16-aligned */
    addq $15, %rax
    andq $-16, %rax
    subq %rax, %rsp
    movq %rsp, %rdi
    movq %r8, %rsi
    movq %r9, %rcx
    cld
    rep movsb
    movq %rbp, (%rbx)
    testq %r14, %r14
    jz 1f
    movdqu (%r14), %xmm0
    addq %r15, %r14
    movdqu (%r14), %xmm1
    addq %r15, %r14
    movdqu (%r14), %xmm2
    addq %r15, %r14
    movdqu (%r14), %xmm3
    addq %r15, %r14
    movdqu (%r14), %xmm4
    addq %r15, %r14
    movdqu (%r14), %xmm5
    addq %r15, %r14
    movdqu (%r14), %xmm6
    addq %r15, %r14
    movdqu (%r14), %xmm7
1:
    movq 0(%r13), %rdi
    movq 8(%r13), %rsi
    movq 16(%r13), %rdx
    movq 24(%r13), %rcx
    movq 32(%r13), %r8
    movq 40(%r13), %r9
    movl $8, %eax
    call *%r12
    .globl lp_jprobe_resume
    .hidden lp_jprobe_resume
lp_jprobe_resume:               /* rbp: this frame's */
    movq 16(%rbp), %rbx
    movq -56(%rbp), %rax
    movq %rax, (%rbx)
    leaq -40(%rbp), %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    .cfi_def_cfa %rsp, 8
    ret
    .cfi_endproc
    .size lp_jprobe_call, .-lp_jprobe_call

    .globl jprobe_return
    .type jprobe_return, @function
jprobe_return:
    .cfi_startproc
    subq $8, %rsp
    .cfi_def_cfa_offset 16
    call lp_jprobe_frame
    addq $8, %rsp
    .cfi_def_cfa_offset 8
    testq %rax, %rax
    jz 1f
    movq %rax, %rbp
    jmp lp_jprobe_resume
1:
    ret
    .cfi_endproc
    .size jprobe_return, .-jprobe_return

    .section .note.GNU-stack,"",@progbits
