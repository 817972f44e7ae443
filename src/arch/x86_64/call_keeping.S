/* int lp_call_keeping(void *arg, int (*fn)(void *)): fn(arg), with rcx and r8 to r11 kept
 * (arch/x86_64/call_keeping.hpp). */
    .text
    .globl lp_call_keeping
    .hidden lp_call_keeping
    .type lp_call_keeping, @function
lp_call_keeping:
    .cfi_startproc
    pushq %rcx
    .cfi_adjust_cfa_offset 8
    pushq %r8
    .cfi_adjust_cfa_offset 8
    pushq %r9
    .cfi_adjust_cfa_offset 8
    pushq %r10
    .cfi_adjust_cfa_offset 8
    pushq %r11
    .cfi_adjust_cfa_offset 8
    call *%rsi              /* five words pushed: the call is 16-aligned as this one was */
    popq %r11
    .cfi_adjust_cfa_offset -8
    popq %r10
    .cfi_adjust_cfa_offset -8
    popq %r9
    .cfi_adjust_cfa_offset -8
    popq %r8
    .cfi_adjust_cfa_offset -8
    popq %rcx
    .cfi_adjust_cfa_offset -8
    ret
    .cfi_endproc
    .size lp_call_keeping, .-lp_call_keeping

    .section .note.GNU-stack,"",@progbits
