/* lp_kretprobe_trampoline: where a probed function whose return address liveprobe replaced
 * returns to (core/kretprobe.cpp). It arrives by the function's `ret`: rsp is the return slot
 * + 8, rax/rdx (and xmm0/xmm1, st0/st1) hold the return value; r10 and r11 are free (no
 * calling convention returns anything in them). It saves the registers as a struct pt_regs
 * (sp: the stack pointer after the return), runs the return handlers and goes on at the real
 * return address (regs->ip) with the stack pointer the function returned with. The flags are
 * not restored: no one may rely on them across a return.
 *
 * Fast path: the registers go into a free frame of the thread's record (ThreadRecord::
 * kret_frames, reached through initial-exec TLS with r11), the stack pointer goes back to the
 * return slot and the trampoline jumps to lp_kretprobe_run(regs), which thus runs with the
 * return slot as its own return-address slot. It writes the real return address there before
 * any handler runs: an unwinder started in a return handler walks from lp_kretprobe_run
 * straight into the real caller, at the right canonical frame address, with the callee-saved
 * registers the function returned with (the trampoline leaves them alone). It ends in
 * lp_kretprobe_resume, which reloads the registers from the frame, gives the frame back and
 * jumps to regs->ip.
 *
 * Slow path, when the thread has no record, every frame is taken (signal handlers nested in
 * return handlers, or frames a longjmp out of a return handler never gave back) or the stack
 * is not 16-byte aligned at the return (code outside the ABI): pt_regs on the stack, below
 * the slot, and a call of lp_kretprobe_return(regs). Its call frame information lets
 * unwinders walk on into the caller too (the canonical frame address is the stack pointer
 * after the return, rbx + 176; the return address is regs->ip, the callee-saved registers are
 * in regs), with this trampoline as one more frame.
 *
 * An unwinder meeting the trampoline as a replaced return address looks up the byte before it
 * (liveprobe_replaced_return). The unwinders liveprobe knows of never meet it (real return
 * addresses are put back while they walk: core/kret_unwind.cpp); the library's own call frame
 * information does not cover that byte, so others stop there; debuggers get, through the GDB
 * JIT interface, call frame information for it that finds the real return address in the
 * threads' return stacks (core/kret_debugger.cpp). */
#include "arch/x86_64/kret_frame.h"

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
    movq _ZN9liveprobe4core6tl_recE@gottpoff(%rip), %r11
    movq %fs:(%r11), %r11               /* the thread's record */
    testq %r11, %r11
    jz .Lslow
    testb $15, %spl
    jnz .Lslow
    movl LP_KRET_FRAMES_USED(%r11), %r10d
    notl %r10d
    bsfl %r10d, %r10d                   /* a free frame */
    jz .Lslow
    /* A signal handler that runs here and takes the same frame has given it back by now. */
    btsl %r10d, LP_KRET_FRAMES_USED(%r11)
    imulq $LP_KRET_FRAME_SIZE, %r10, %r10
    leaq LP_KRET_FRAMES(%r11,%r10), %r11  /* regs */
    movq %r15, 0(%r11)
    movq %r14, 8(%r11)
    movq %r13, 16(%r11)
    movq %r12, 24(%r11)
    movq %rbp, 32(%r11)
    movq %rbx, 40(%r11)
    movq $0, 48(%r11)       /* r11, r10: the trampoline's */
    movq $0, 56(%r11)
    movq %r9, 64(%r11)
    movq %r8, 72(%r11)
    movq %rax, 80(%r11)
    movq %rcx, 88(%r11)
    movq %rdx, 96(%r11)
    movq %rsi, 104(%r11)
    movq %rdi, 112(%r11)
    movq $-1, 120(%r11)     /* orig_ax */
    movq $0, 128(%r11)      /* ip: set by lp_kretprobe_run */
    movq $0x33, 136(%r11)   /* cs */
    pushfq
    .cfi_adjust_cfa_offset 8
    popq 144(%r11)          /* flags */
    .cfi_adjust_cfa_offset -8
    movq %rsp, 152(%r11)    /* sp */
    movq $0x2b, 160(%r11)   /* ss */
    cld
    movq %r11, %rdi
    leaq -8(%rsp), %rsp     /* the return slot: lp_kretprobe_run's return-address slot */
    .cfi_adjust_cfa_offset 8
    jmp lp_kretprobe_run
    .cfi_adjust_cfa_offset -8
.Lslow:
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
    .size lp_kretprobe_trampoline, .-lp_kretprobe_trampoline

/* lp_kretprobe_resume(regs): the end of the fast path (lp_kretprobe_run), never returns.
 * regs is a frame of the thread's record: reload every general register from it but r11
 * (free at a return), give the frame back and jump to regs->ip with rsp = regs->sp. From the
 * moment rsp is regs->sp, what lies below is dead stack that signals skip (the red zone): the
 * return address and rax wait there while the frame is given back. */
    .globl lp_kretprobe_resume
    .hidden lp_kretprobe_resume
    .type lp_kretprobe_resume, @function
lp_kretprobe_resume:
    .cfi_startproc
    .cfi_undefined %rip
    movq %rdi, %r11
    movq 152(%r11), %rsp
    movq 128(%r11), %rax
    movq %rax, -8(%rsp)
    movq 80(%r11), %rax
    movq %rax, -16(%rsp)
    movq 0(%r11), %r15
    movq 8(%r11), %r14
    movq 16(%r11), %r13
    movq 24(%r11), %r12
    movq 32(%r11), %rbp
    movq 40(%r11), %rbx
    movq 56(%r11), %r10
    movq 64(%r11), %r9
    movq 72(%r11), %r8
    movq 88(%r11), %rcx
    movq 96(%r11), %rdx
    movq 104(%r11), %rsi
    movq 112(%r11), %rdi
    movl LP_KRET_FRAME_INDEX(%r11), %eax
    movq _ZN9liveprobe4core6tl_recE@gottpoff(%rip), %r11
    movq %fs:(%r11), %r11
    btrl %eax, LP_KRET_FRAMES_USED(%r11)
    movq -16(%rsp), %rax
    jmp *-8(%rsp)
    .cfi_endproc
    .size lp_kretprobe_resume, .-lp_kretprobe_resume

    .section .note.GNU-stack,"",@progbits
