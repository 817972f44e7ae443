/* lp_detour_call_pre, lp_detour_call_post: how a jump-optimization detour (detour.cpp, step 2)
 * calls the dispatcher (lp_jump_pre, lp_jump_post: jump_path.cpp), so that unwinders started
 * in a handler walk on into the probed function.
 *
 * The detour has built a struct pt_regs on its stack, holds its address in rbx (callee-saved,
 * so still there while the dispatcher and the handlers run) and calls here with
 * rdi = site, rsi = regs. This aligns the stack, calls the dispatcher, and returns to the
 * detour with rsp = regs (its return address sits just below regs).
 *
 * Its call frame information describes no frame of its own: the frame it returns to is the
 * probed function at regs->ip, with every register as regs holds it (the stack pointer
 * regs->sp, the canonical frame address). It is marked a signal frame: regs->ip is where the
 * thread was, not a return address, so unwinders look it up as it is (not the byte before).
 * Detour code has no call frame information of its own: a walk that starts inside the
 * detour's own instructions (a signal arriving there) ends there, as before. */
    .text
/* One for each entry point of the dispatcher: a direct call is cheaper than through a
 * register. */
.macro DETOUR_CALL name, target
    .globl \name
    .hidden \name
    .type \name, @function
    .p2align 4
\name:
    .cfi_startproc simple
    .cfi_signal_frame
    .cfi_escape 0x0f, 4, 0x73, 0x98, 0x1, 0x6   /* CFA = regs->sp: DW_OP_breg3 152, deref */
    .cfi_escape 0x10, 0, 3, 0x73, 0xd0, 0x0     /* rax at regs + 80 */
    .cfi_escape 0x10, 1, 3, 0x73, 0xe0, 0x0     /* rdx at regs + 96 */
    .cfi_escape 0x10, 2, 3, 0x73, 0xd8, 0x0     /* rcx at regs + 88 */
    .cfi_escape 0x10, 3, 2, 0x73, 0x28          /* rbx at regs + 40 */
    .cfi_escape 0x10, 4, 3, 0x73, 0xe8, 0x0     /* rsi at regs + 104 */
    .cfi_escape 0x10, 5, 3, 0x73, 0xf0, 0x0     /* rdi at regs + 112 */
    .cfi_escape 0x10, 6, 2, 0x73, 0x20          /* rbp at regs + 32 */
    .cfi_escape 0x10, 8, 3, 0x73, 0xc8, 0x0     /* r8 at regs + 72 */
    .cfi_escape 0x10, 9, 3, 0x73, 0xc0, 0x0     /* r9 at regs + 64 */
    .cfi_escape 0x10, 10, 2, 0x73, 0x38         /* r10 at regs + 56 */
    .cfi_escape 0x10, 11, 2, 0x73, 0x30         /* r11 at regs + 48 */
    .cfi_escape 0x10, 12, 2, 0x73, 0x18         /* r12 at regs + 24 */
    .cfi_escape 0x10, 13, 2, 0x73, 0x10         /* r13 at regs + 16 */
    .cfi_escape 0x10, 14, 2, 0x73, 0x8          /* r14 at regs + 8 */
    .cfi_escape 0x10, 15, 2, 0x73, 0x0          /* r15 at regs + 0 */
    .cfi_escape 0x10, 16, 3, 0x73, 0x80, 0x1    /* rip at regs + 128 */
    andq $-16, %rsp
    call \target
    leaq -8(%rbx), %rsp
    ret
    .cfi_endproc
    .size \name, .-\name
.endm

    DETOUR_CALL lp_detour_call_pre, lp_jump_pre
    DETOUR_CALL lp_detour_call_post, lp_jump_post

    .section .note.GNU-stack,"",@progbits
