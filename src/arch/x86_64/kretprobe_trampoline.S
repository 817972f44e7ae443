/* lp_kretprobe_trampoline: where a probed function whose return address liveprobe replaced
 * returns to (core/kretprobe.cpp). It arrives by the function's `ret`: rsp is the return slot
 * + 8, rax/rdx (and xmm0/xmm1, st0/st1) hold the return value. It builds a struct pt_regs
 * (sp: the stack pointer after the return), calls lp_kretprobe_return(regs), which runs the
 * return handlers and gives the real return address (regs->ip), restores every general
 * register from regs and jumps there with the stack pointer the function returned with.
 * The flags are not restored: no one may rely on them across a return. */
    .text
    .globl lp_kretprobe_trampoline
    .hidden lp_kretprobe_trampoline
    .type lp_kretprobe_trampoline, @function
    nop             /* unwinders look up the return address - 1 */
lp_kretprobe_trampoline:
    pushq $0        /* the real return address, filled in below */
    pushq $0x2b     /* ss */
    pushq %rax      /* sp, set below */
    pushfq          /* flags */
    cld
    pushq $0x33     /* cs */
    pushq $0        /* ip: set by lp_kretprobe_return */
    pushq $-1       /* orig_ax */
    pushq %rdi
    pushq %rsi
    pushq %rdx
    pushq %rcx
    pushq %rax
    pushq %r8
    pushq %r9
    pushq %r10
    pushq %r11
    pushq %rbx
    pushq %rbp
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    leaq 176(%rsp), %rax
    movq %rax, 152(%rsp)
    movq %rsp, %rbx
    andq $-16, %rsp
    movq %rbx, %rdi
    call lp_kretprobe_return
    movq %rbx, %rsp
    movq %rax, 168(%rsp)
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbp
    popq %rbx
    popq %r11
    popq %r10
    popq %r9
    popq %r8
    popq %rax
    popq %rcx
    popq %rdx
    popq %rsi
    popq %rdi
    leaq 56(%rsp), %rsp   /* orig_ax ip cs flags sp ss, the real return address */
    /* An indirect jump rather than ret: the return stack buffer no longer matches (the
     * function's ret came here), a ret would be mispredicted every time. A signal arriving
     * now does not reach -8(%rsp): the kernel skips the red zone. */
    jmp *-8(%rsp)
    .size lp_kretprobe_trampoline, .-lp_kretprobe_trampoline

    .section .note.GNU-stack,"",@progbits
