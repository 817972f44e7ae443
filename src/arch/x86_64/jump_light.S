/* The light dispatcher: what a detour's light entry (detour.hpp, "The light entry") calls,
 * rdi = the probe address's site (ProbeTable::Site: the slot holding its probe point), to run
 * the point's one light kprobe. It jumps into the handler, which returns straight into the
 * light entry: one call and one return per hit. There, the light entry's finish (detour.cpp
 * emit_light_finish, LP_LIGHT_FINISH_SIZE bytes) ends the level of busy this took and the
 * handler's run; eax then says what to do: 0 run the relocated region, else the full entry
 * (jump_light.hpp LightAction). When it does not call the handler it returns the same way,
 * with eax = 0 or 1, and the finish still runs (its stores are then no-ops or the release);
 * when it took nothing because the thread has no record or is already dispatching or in a
 * handler, it returns past the finish, with eax = 1.
 *
 * Four entry points: lp_light_entry and lp_light_mid for the two detour shapes (their call frame
 * information differs), and their _fenced twins for a kernel without membarrier, whose busy
 * protocol needs a real fence on this side (dispatch.hpp publish_busy); the optimizer picks one
 * when it builds the detour, so no hit tests for it.
 *
 * It writes rax, rdx and rdi only (light_dispatcher_writes), and whatever the handler writes;
 * the light entry saved all of them. It runs the busy protocol of core/dispatch.hpp
 * (acquire_site) for the outermost level only: a thread already dispatching something, or in a
 * handler, or without a record yet, takes the full entry, which handles nesting. Vector state
 * is not touched: the handler was proven vector-free. The handler is called with regs = NULL
 * in spirit: it was proven never to read its second argument, so rsi is left as it is.
 *
 * Call frame information, for a signal that arrives while this runs: one rule for every
 * instruction (rsp does not move here). The frame it describes is the probed function at the
 * probed ip, as if interrupted there: the canonical frame address is the stack pointer the
 * thread had at the probed ip (the light entry's frame starts right above the return address:
 * + 136, + 128 for the red zone of the mid-function shape); the ip is the detour block's first
 * word (core/probe.hpp, DetourHeader), found by rounding the return address down to the
 * block's 1024 bytes; the callee-saved registers hold the thread's values (nothing here writes
 * them). The other registers are not described. The handler's own frame returns into the
 * detour, which has no call frame information: a walk started in a light handler ends there
 * (docs/DESIGN-NOTES.md, "The light entry"). */
#include "arch/x86_64/light_layout.h"

#define TL_REC _ZN9liveprobe4core6tl_recE

    .text
/* The call frame information of code running on a light entry's frame, with the dispatcher's
 * return address on top (see above). */
.macro LIGHT_FRAME_CFI rz
    .cfi_def_cfa %rsp, 8 + LP_LIGHT_FRAME + \rz
    /* rip = *(*rsp & -1024): DW_CFA_val_expression, DW_OP_breg7 0, deref, consts -1024, and,
     * deref */
    .cfi_escape 0x16, 16, 8, 0x77, 0x00, 0x06, 0x11, 0x80, 0x78, 0x1a, 0x06
    .cfi_same_value %rbx
    .cfi_same_value %rbp
    .cfi_same_value %r12
    .cfi_same_value %r13
    .cfi_same_value %r14
    .cfi_same_value %r15
.endm

.macro LIGHT_DISPATCH name, rz, fenced
    .globl \name
    .hidden \name
    .type \name, @function
    .p2align 5
\name:
    .cfi_startproc simple
    .cfi_signal_frame
    LIGHT_FRAME_CFI \rz
    movq TL_REC@GOTTPOFF(%rip), %rax
    movq %fs:(%rax), %rax                   /* the thread's record */
    testq %rax, %rax
    jz 7f                                   /* none yet: the full entry claims one */
    movl LP_REC_BUSY_DEPTH(%rax), %edx
    orl LP_REC_IN_HANDLER(%rax), %edx
    jnz 7f                                  /* nested: the full entry */
    movq (%rdi), %rdx                       /* the probe point */
    testq %rdx, %rdx
    jz 6f                                   /* going away: the original instructions */
    /* Publish the point in level 0 of busy (depth first, then the slot), then look it up
     * again: the reader's half of the quiescence protocol (dispatch.hpp publish_busy). */
    movl $1, LP_REC_BUSY_DEPTH(%rax)
    movq %rdx, LP_REC_BUSY_SLOT0(%rax)
    .if \fenced
    lock orq $0, (%rsp)
    .endif
    cmpq (%rdi), %rdx
    jne 6f
    movq LP_PP_LIGHT(%rdx), %rdx            /* the kprobe the light path runs */
    testq %rdx, %rdx
    jz 5f                                   /* none now: the full entry */
    cmpb $0, LP_KS_ENABLED(%rdx)
    je 6f
    /* core::count: never null in a claimed record (thread_state.hpp). */
    movl LP_KS_ID(%rdx), %edi
    shlq $3, %rdi
    addq LP_REC_COUNTERS(%rax), %rdi
    incq (%rdi)
    /* What a fault in the handler needs (light_fault_resume), then the handler, with this
     * call's return address: it returns into the light entry's finish. */
    movq %rdx, LP_REC_JUMP_KS(%rax)
    movq %rsp, LP_REC_JUMP_LIGHT(%rax)
    movl $1, LP_REC_IN_HANDLER(%rax)
    movq LP_KS_KP(%rdx), %rdi
    jmp *LP_KS_LIGHT_FN(%rdx)
5:  movl $1, %eax                           /* the finish releases the level */
    ret
6:  xorl %eax, %eax
    ret
7:  /* Nothing taken, and the level is not this call's to release: past the finish. */
    movl $1, %eax
    addq $LP_LIGHT_FINISH_SIZE, (%rsp)
    ret
    .cfi_endproc
    .size \name, .-\name
.endm

/* lp_kret_light_pre: a kretprobe's light handler (KprobeState::light_fn), rdi = its kprobe,
 * rax = the thread's record (the dispatcher's). Entered by the dispatcher's jump from a light
 * entry of the function-entry shape, it finds the return slot (the stack pointer at the
 * function's entry) above the light entry's frame and the dispatcher's return address, and
 * goes on to lp_kret_light_c(kp, slot, rec) (core/kret_hit.cpp), which returns into the light
 * entry's finish. */
    .globl lp_kret_light_pre
    .hidden lp_kret_light_pre
    .type lp_kret_light_pre, @function
lp_kret_light_pre:
    .cfi_startproc simple
    .cfi_signal_frame
    LIGHT_FRAME_CFI 0
    leaq 8 + LP_LIGHT_FRAME(%rsp), %rsi
    movq %rax, %rdx
    jmp lp_kret_light_c
    .cfi_endproc
    .size lp_kret_light_pre, .-lp_kret_light_pre


    LIGHT_DISPATCH lp_light_entry, 0, 0
    LIGHT_DISPATCH lp_light_mid, 128, 0
    LIGHT_DISPATCH lp_light_entry_fenced, 0, 1
    LIGHT_DISPATCH lp_light_mid_fenced, 128, 1

    .section .note.GNU-stack,"",@progbits
