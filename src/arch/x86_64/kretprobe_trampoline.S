/* lp_kretprobe_trampoline: where a probed function whose return address liveprobe replaced
 * returns to (core/kretprobe.cpp). It arrives by the function's `ret`: rsp is the return slot
 * + 8, rax/rdx (and xmm0/xmm1, st0/st1) hold the return value. It builds a struct pt_regs
 * (sp: the stack pointer after the return), calls lp_kretprobe_return(regs), which runs the
 * return handlers and gives the real return address (regs->ip), restores every general
 * register from regs and jumps there with the stack pointer the function returned with.
 * The flags are not restored: no one may rely on them across a return.
 *
 * Its call frame information lets unwinders started in a return handler walk on into the
 * probed function's caller: while lp_kretprobe_return runs, the canonical frame address is
 * the stack pointer after the return (rbx + 176), the return address is regs->ip (set to the
 * real return address before any handler runs; 0 before, which ends a walk) and the callee-
 * saved registers are in regs.
 *
 * The part from the stack pointer's alignment on is a symbol of its own,
 * lp_kretprobe_dispatch (the same code and call frame information, no jump): a backtrace taken
 * in a return handler shows liveprobe's dispatcher (lp_kretprobe_return called from
 * lp_kretprobe_dispatch) right above the real return address, as one taken in a pre handler
 * shows lp_detour_call_pre or the breakpoint path's signal frame; the trampoline's own address,
 * the one in replaced return slots, appears in no trace.
 *
 * An unwinder meeting the trampoline as a replaced return address looks up the byte before it
 * (liveprobe_replaced_return). The unwinders liveprobe knows of never meet it (real return
 * addresses are put back while they walk: core/kret_unwind.cpp); the library's own call frame
 * information does not cover that byte, so others stop there; debuggers get, through the GDB
 * JIT interface, call frame information for it that finds the real return address in the
 * threads' return stacks (core/kret_debugger.cpp). */
    .text
    .globl lp_kretprobe_trampoline
    .hidden lp_kretprobe_trampoline
    .type lp_kretprobe_trampoline, @function
    .globl liveprobe_replaced_return
    .hidden liveprobe_replaced_return
liveprobe_replaced_return:
    nop             /* unwinders look up the return address - 1: see below */
lp_kretprobe_trampoline:
    .cfi_startproc simple
    .cfi_def_cfa %rsp, 0
    .cfi_undefined %rip
    pushq $0        /* the real return address, filled in below */
    .cfi_adjust_cfa_offset 8
    pushq $0x2b     /* ss */
    .cfi_adjust_cfa_offset 8
    pushq %rax      /* sp, set below */
    .cfi_adjust_cfa_offset 8
    pushfq          /* flags */
    .cfi_adjust_cfa_offset 8
    cld
    pushq $0x33     /* cs */
    .cfi_adjust_cfa_offset 8
    pushq $0        /* ip: set by lp_kretprobe_return */
    .cfi_adjust_cfa_offset 8
    pushq $-1       /* orig_ax */
    .cfi_adjust_cfa_offset 8
    pushq %rdi
    .cfi_adjust_cfa_offset 8
    pushq %rsi
    .cfi_adjust_cfa_offset 8
    pushq %rdx
    .cfi_adjust_cfa_offset 8
    pushq %rcx
    .cfi_adjust_cfa_offset 8
    pushq %rax
    .cfi_adjust_cfa_offset 8
    pushq %r8
    .cfi_adjust_cfa_offset 8
    pushq %r9
    .cfi_adjust_cfa_offset 8
    pushq %r10
    .cfi_adjust_cfa_offset 8
    pushq %r11
    .cfi_adjust_cfa_offset 8
    pushq %rbx
    .cfi_adjust_cfa_offset 8
    .cfi_offset %rbx, -136
    pushq %rbp
    .cfi_adjust_cfa_offset 8
    .cfi_offset %rbp, -144
    pushq %r12
    .cfi_adjust_cfa_offset 8
    .cfi_offset %r12, -152
    pushq %r13
    .cfi_adjust_cfa_offset 8
    .cfi_offset %r13, -160
    pushq %r14
    .cfi_adjust_cfa_offset 8
    .cfi_offset %r14, -168
    pushq %r15
    .cfi_adjust_cfa_offset 8
    .cfi_offset %r15, -176
    leaq 176(%rsp), %rax
    movq %rax, 152(%rsp)
    movq %rsp, %rbx
    .cfi_def_cfa_register %rbx
    .cfi_offset %rip, -48   /* regs->ip */
    .size lp_kretprobe_trampoline, .-lp_kretprobe_trampoline
    .globl lp_kretprobe_dispatch
    .hidden lp_kretprobe_dispatch
    .type lp_kretprobe_dispatch, @function
lp_kretprobe_dispatch:
    andq $-16, %rsp
    movq %rbx, %rdi
    call lp_kretprobe_return
    movq %rbx, %rsp
    .cfi_def_cfa_register %rsp
    movq %rax, 168(%rsp)
    .cfi_offset %rip, -8
    popq %r15
    .cfi_adjust_cfa_offset -8
    .cfi_restore %r15
    popq %r14
    .cfi_adjust_cfa_offset -8
    .cfi_restore %r14
    popq %r13
    .cfi_adjust_cfa_offset -8
    .cfi_restore %r13
    popq %r12
    .cfi_adjust_cfa_offset -8
    .cfi_restore %r12
    popq %rbp
    .cfi_adjust_cfa_offset -8
    .cfi_restore %rbp
    popq %rbx
    .cfi_adjust_cfa_offset -8
    .cfi_restore %rbx
    popq %r11
    .cfi_adjust_cfa_offset -8
    popq %r10
    .cfi_adjust_cfa_offset -8
    popq %r9
    .cfi_adjust_cfa_offset -8
    popq %r8
    .cfi_adjust_cfa_offset -8
    popq %rax
    .cfi_adjust_cfa_offset -8
    popq %rcx
    .cfi_adjust_cfa_offset -8
    popq %rdx
    .cfi_adjust_cfa_offset -8
    popq %rsi
    .cfi_adjust_cfa_offset -8
    popq %rdi
    .cfi_adjust_cfa_offset -8
    leaq 56(%rsp), %rsp   /* orig_ax ip cs flags sp ss, the real return address */
    .cfi_adjust_cfa_offset -56
    /* An indirect jump rather than ret: the return stack buffer no longer matches (the
     * function's ret came here), a ret would be mispredicted every time. A signal arriving
     * now does not reach -8(%rsp): the kernel skips the red zone. */
    jmp *-8(%rsp)
    .cfi_endproc
    .size lp_kretprobe_dispatch, .-lp_kretprobe_dispatch

    .section .note.GNU-stack,"",@progbits
