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
 * return address on top (see above), or at rsp + off under off bytes pushed since:
 * rip = *(*(rsp + off) & -1024) (off < 64): DW_CFA_val_expression, DW_OP_breg7 off, deref,
 * consts -1024, and, deref */
.macro LIGHT_RIP_RULE off
    .cfi_escape 0x16, 16, 8, 0x77, \off, 0x06, 0x11, 0x80, 0x78, 0x1a, 0x06
.endm
.macro LIGHT_FRAME_CFI rz
    .cfi_def_cfa %rsp, 8 + LP_LIGHT_FRAME + \rz
    LIGHT_RIP_RULE 0
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
    LIGHT_DISPATCH_BODY \fenced, 5f, 6f, 7f
    jmp *LP_KS_LIGHT_FN(%rdx)
    LIGHT_DISPATCH_EXITS 5, 6, 7
    .cfi_endproc
    .size \name, .-\name
.endm

/* The dispatcher up to the handler: rax = the record, rdx = the KprobeState, rdi = its kprobe.
 * Its ways out (LIGHT_DISPATCH_EXITS): l5 the full entry, the level taken; l6 the original
 * instructions, the level taken; l7 the full entry, nothing taken. */
.macro LIGHT_DISPATCH_BODY fenced, l5, l6, l7
    movq TL_REC@GOTTPOFF(%rip), %rax
    movq %fs:(%rax), %rax                   /* the thread's record */
    testq %rax, %rax
    jz \l7                                  /* none yet: the full entry claims one */
    movl LP_REC_BUSY_DEPTH(%rax), %edx
    orl LP_REC_IN_HANDLER(%rax), %edx
    jnz \l7                                 /* nested: the full entry */
    movq (%rdi), %rdx                       /* the probe point */
    testq %rdx, %rdx
    jz \l6                                  /* going away: the original instructions */
    /* Publish the point in level 0 of busy (depth first, then the slot), then look it up
     * again: the reader's half of the quiescence protocol (dispatch.hpp publish_busy). The
     * frame first: while the level is taken, jump_light says where its dispatch runs, so that
     * a level left by a siglongjmp out of a signal that landed here (before the handler runs,
     * or in the finish) is seen as abandoned (core::reset_abandoned_handler). */
    movq %rsp, LP_REC_JUMP_LIGHT(%rax)
    movl $1, LP_REC_BUSY_DEPTH(%rax)
    movq %rdx, LP_REC_BUSY_SLOT0(%rax)
    .if \fenced
    lock orq $0, (%rsp)
    .endif
    cmpq (%rdi), %rdx
    jne \l6
    movq LP_PP_LIGHT(%rdx), %rdx            /* the kprobe the light path runs */
    testq %rdx, %rdx
    jz \l5                                  /* none now: the full entry */
    cmpb $0, LP_KS_ENABLED(%rdx)
    je \l6
    /* core::count: never null in a claimed record (thread_state.hpp); not for an uncounted
     * probe (the tracer's: its counter would be one more line touched at every hit). */
    cmpb $0, LP_KS_UNCOUNTED(%rdx)
    jne 19f
    movl LP_KS_ID(%rdx), %edi
    shlq $3, %rdi
    addq LP_REC_COUNTERS(%rax), %rdi
    incq (%rdi)
19:
    /* What a fault in the handler needs (light_fault_resume), then the handler, with this
     * call's return address: it returns into the light entry's finish. */
    movq %rdx, LP_REC_JUMP_KS(%rax)
    movl $1, LP_REC_IN_HANDLER(%rax)
    movq LP_KS_KP(%rdx), %rdi
.endm

.macro LIGHT_DISPATCH_EXITS l5, l6, l7
\l5:  movl $1, %eax                         /* the finish releases the level */
    ret
\l6:  xorl %eax, %eax
    ret
\l7:  /* Nothing taken, and the level is not this call's to release: past the finish. */
    movl $1, %eax
    addq $LP_LIGHT_FINISH_SIZE, (%rsp)
    ret
.endm

/* lp_kret_light_pre: a kretprobe's light handler (KprobeState::light_fn), rdi = its kprobe,
 * rax = the thread's record (the dispatcher's). Entered by the dispatcher's jump from a light
 * entry of the function-entry shape: the return slot (the stack pointer at the function's
 * entry) is above the light entry's frame and the dispatcher's return address. It returns
 * into the light entry's finish what lp_kret_light_c(kp, slot, rec) (core/kret_hit.cpp) would,
 * and does its common case itself, in the same order (core/kret_hit.cpp enter()): no call in
 * flight at or below the slot, nor on another stack; no tail call (the slot does not hold the
 * trampoline's address already); no unregistration to catch up with; an instance in the
 * thread's cache entry for the probe (its hot one, else the head of its list: a recursive
 * call's). Anything else goes to lp_kret_light_c,
 * before anything changed. The entry handler, if any: the registered TSC stamp is stored here
 * (KretState::entry_stamp); one that writes no callee-saved register but rbp and rbx is
 * called from here (entry_direct); any other runs through lp_kret_call_bare or
 * lp_kret_call_saving. A fault in it answers 1, and 1 (or any non-zero) gives the instance
 * back (lp_kret_light_finish) and returns 0: the call goes on unprobed. It records the call
 * but leaves the slot to lp_kret_rsb_call, whose call writes the trampoline's address there
 * when the detour goes on (lp_kret_light_c writes it itself: the same word). Writes rax, rcx,
 * rdx, rsi and rdi, and what the entry handler it calls writes (the light entry saved them).
 *
 * lp_kret_light_entry, the dispatcher of light entries built for a kretprobe (function-entry
 * shape, no fence), is lp_light_entry running on into lp_kret_light_pre, right after it, when
 * the point's light kprobe is still a kretprobe: one jump fewer. */
/* A call of the C function fn from lp_kret_light_pre's frame (the stack pointer as at its entry:
 * 8 off 16-alignment), r8 to r11 kept around it: a light entry built for a kretprobe saves only
 * what lp_kret_light_pre and the entry handler it calls write (core/optimizer.cpp light_needs). */
.macro CALL_KEEPING_R8_R11 fn
    pushq %r8
    .cfi_adjust_cfa_offset 8
    LIGHT_RIP_RULE 8
    pushq %r9
    .cfi_adjust_cfa_offset 8
    LIGHT_RIP_RULE 16
    pushq %r10
    .cfi_adjust_cfa_offset 8
    LIGHT_RIP_RULE 24
    pushq %r11
    .cfi_adjust_cfa_offset 8
    LIGHT_RIP_RULE 32
    leaq -8(%rsp), %rsp
    .cfi_adjust_cfa_offset 8
    LIGHT_RIP_RULE 40
    call \fn
    leaq 8(%rsp), %rsp
    .cfi_adjust_cfa_offset -8
    LIGHT_RIP_RULE 32
    popq %r11
    .cfi_adjust_cfa_offset -8
    LIGHT_RIP_RULE 24
    popq %r10
    .cfi_adjust_cfa_offset -8
    LIGHT_RIP_RULE 16
    popq %r9
    .cfi_adjust_cfa_offset -8
    LIGHT_RIP_RULE 8
    popq %r8
    .cfi_adjust_cfa_offset -8
    LIGHT_RIP_RULE 0
.endm

#define G_STACK_REGIONS _ZN9liveprobe2os15g_stack_regionsE
#define G_KRET_UNREGISTRATIONS _ZN9liveprobe4core22g_kret_unregistrationsE
    .globl lp_kret_light_entry
    .hidden lp_kret_light_entry
    .type lp_kret_light_entry, @function
    .globl lp_kret_light_pre
    .hidden lp_kret_light_pre
    .type lp_kret_light_pre, @function
    .p2align 5
lp_kret_light_entry:
    .cfi_startproc simple
    .cfi_signal_frame
    LIGHT_FRAME_CFI 0
    LIGHT_DISPATCH_BODY 0, 15f, 16f, 17f
    leaq lp_kret_light_pre(%rip), %rsi
    cmpq %rsi, LP_KS_LIGHT_FN(%rdx)
    jne 18f
lp_kret_light_pre:
    leaq 8 + LP_LIGHT_FRAME(%rsp), %rsi  /* the slot */
    movq LP_KP_KRET_STATE(%rdi), %rcx    /* ks */
    testq %rcx, %rcx
    jz 9f
    movq LP_REC_RET_TOP(%rax), %rdx
    testq %rdx, %rdx
    jz 1f
    cmpq %rsi, LP_INST_SLOT(%rdx)        /* the newest call in flight is an outer one */
    jbe 9f
    cmpl $0, G_STACK_REGIONS(%rip)
    jne 9f
1:  leaq lp_kretprobe_trampoline(%rip), %rdx
    cmpq %rdx, (%rsi)                    /* the return address: a tail call's is ours already */
    je 9f
    movq G_KRET_UNREGISTRATIONS(%rip), %rdx
    cmpq %rdx, LP_REC_KRET_SEEN(%rax)
    jne 9f
    movl LP_KRS_CACHE_SLOT(%rcx), %edx
    shlq $5, %rdx
    leaq LP_REC_KRET_CACHE(%rax,%rdx), %rdx
    cmpq %rcx, (%rdx)
    jne 9f
    cmpq $0, 8(%rdx)                     /* the entry's hot instance */
    je 23f
    movq 8(%rdx), %rdi                   /* in */
    movq $0, 8(%rdx)
    /* Taken. An instance the cache holds was this thread's for this probe: its ks and ri->rp
     * are this probe's already (core/kret_hit.cpp keep); its ri->tid is this thread's unless
     * the record changed owner since (a fork). kp is ks->rp's from here. */
24: movq %rsi, LP_INST_SLOT(%rdi)
    movl $1, LP_INST_NEXT_FREE(%rdi)     /* kInstRsb: the detour goes on through lp_kret_rsb_call */
    movq (%rsi), %rdx
    movq %rdx, LP_INST_RI + LP_RI_RET_ADDR(%rdi)
    movl (%rax), %edx                    /* rec->owner */
    cmpl %edx, LP_INST_RI + LP_RI_TID(%rdi)
    jne 21f
22: cmpb $0, LP_KRS_ENTRY_STAMP(%rcx)
    jne 20f
    movq LP_KRS_RP(%rcx), %rdx
    cmpq $0, LP_RP_ENTRY_HANDLER(%rdx)
    jne 3f
2:  /* The call recorded (rax = the record, rdi = in): on the thread's return stack. The slot
     * is replaced on the way on: lp_kret_rsb_call's call writes the trampoline's address there. */
    movq LP_REC_RET_TOP(%rax), %rdx
    movq %rdx, LP_INST_BELOW(%rdi)
    movq %rdi, LP_REC_RET_TOP(%rax)
    movl $3, %eax                        /* arch::kLightKret */
    ret
21: movl %edx, LP_INST_RI + LP_RI_TID(%rdi)
    jmp 22b
23: /* No hot instance (an outer call of this probe has it: recursion): the head of the entry's
     * list, if any (core/kret_hit.cpp take), rcx (ks) borrowed for the link and read back from
     * the entry, whose ks it is; rdi (kp) kept until then, for lp_kret_light_c. */
    cmpq $0, LP_CACHE_HEAD(%rdx)
    je 9f
    movq LP_CACHE_HEAD(%rdx), %rdi       /* in */
    movq LP_INST_BELOW(%rdi), %rcx
    movq %rcx, LP_CACHE_HEAD(%rdx)
    decl LP_CACHE_N(%rdx)
    movq (%rdx), %rcx
    jmp 24b
3:  /* The entry handler (rax = the record, rcx = ks, rdx = rp, rdi = in). */
    cmpb $0, LP_KRS_ENTRY_DIRECT(%rcx)
    je 10f
    /* It writes no callee-saved register but rbp and rbx: called from here. The light entry
     * saved those two if it writes them (core/optimizer.cpp light_needs): a fault may leave
     * them changed, and the entry restores them. in is kept in memory, with what a fault
     * needs as the thunks leave it (kret_light_sp: the word holding where it resumes, 7
     * below, the stack pointer to resume with just above, at in). */
    pushq %rdi
    .cfi_adjust_cfa_offset 8
    LIGHT_RIP_RULE 8
    leaq 7f(%rip), %rsi
    pushq %rsi
    .cfi_adjust_cfa_offset 8
    LIGHT_RIP_RULE 16
    movq %rsp, LP_REC_KRET_LIGHT_SP(%rax)
    leaq -8(%rsp), %rsp                  /* the call aligned */
    .cfi_adjust_cfa_offset 8
    LIGHT_RIP_RULE 24
    movq LP_RP_ENTRY_HANDLER(%rdx), %rax
    leaq LP_INST_RI(%rdi), %rdi
    xorl %esi, %esi
    call *%rax
    leaq 16(%rsp), %rsp
    .cfi_adjust_cfa_offset -16
    LIGHT_RIP_RULE 8
11: movq TL_REC@GOTTPOFF(%rip), %rdx
    movq %fs:(%rdx), %rdx
    movq $0, LP_REC_KRET_LIGHT_SP(%rdx)
    popq %rdi
    .cfi_adjust_cfa_offset -8
    LIGHT_RIP_RULE 0
    testl %eax, %eax
    jnz 12f
    movq %rdx, %rax
    jmp 2b
12: /* Declined, or it faulted: the instance back (lp_kret_light_finish(rec, in), r8 to r11
     * kept: the detour saved only what this handler writes), the call goes on unprobed. */
    movq %rdi, %rsi
    movq %rdx, %rdi
    CALL_KEEPING_R8_R11 lp_kret_light_finish
    xorl %eax, %eax
    ret
10: /* Through lp_kret_call_bare or lp_kret_call_saving (it writes other callee-saved
     * registers: the thunk saves them; the detour saved every caller-saved one); rbx keeps in
     * across it (the thunks keep rbx). */
    pushq %rbx
    .cfi_adjust_cfa_offset 8
    .cfi_offset %rbx, -(16 + LP_LIGHT_FRAME)
    LIGHT_RIP_RULE 8
    movq %rdi, %rbx
    movq LP_RP_ENTRY_HANDLER(%rdx), %rsi
    movq %rsi, LP_REC_KRET_LIGHT_H(%rax)
    movq %rax, %rdx
    leaq LP_INST_RI(%rdi), %rdi
    xorl %esi, %esi
    cmpb $0, LP_KRS_ENTRY_BARE(%rcx)
    je 4f
    call lp_kret_call_bare
    jmp 5f
4:  call lp_kret_call_saving
5:  movq TL_REC@GOTTPOFF(%rip), %rdx
    movq %fs:(%rdx), %rdx
    movq $0, LP_REC_KRET_LIGHT_SP(%rdx)
    movq $0, LP_REC_KRET_LIGHT_H(%rdx)   /* set only while a handler runs (kret_fault_resume) */
    testl %eax, %eax
    jnz 6f
    movq %rbx, %rdi
    movq %rdx, %rax
    popq %rbx
    .cfi_adjust_cfa_offset -8
    .cfi_restore %rbx
    LIGHT_RIP_RULE 0
    jmp 2b
6:  .cfi_adjust_cfa_offset 8
    .cfi_offset %rbx, -(16 + LP_LIGHT_FRAME)
    LIGHT_RIP_RULE 8
    /* Declined, or it faulted: the instance back, the call goes on unprobed. */
    movq %rdx, %rdi
    movq %rbx, %rsi
    call lp_kret_light_finish
    popq %rbx
    .cfi_adjust_cfa_offset -8
    .cfi_restore %rbx
    LIGHT_RIP_RULE 0
    xorl %eax, %eax
    ret
7:  /* A fault in a handler called from here resumes here (arch::light_fault_resume), the stack
     * pointer right above the resume word: as if it had returned 1. */
    .cfi_adjust_cfa_offset 8
    LIGHT_RIP_RULE 8
    movl $1, %eax
    jmp 11b
    .cfi_adjust_cfa_offset -8
    LIGHT_RIP_RULE 0
20: /* The entry handler is the registered TSC stamp (core::set_kret_entry_stamp): what it would
     * store, stored here. */
    movq %rax, %rcx
    rdtsc
    shlq $32, %rdx
    orq %rdx, %rax
    movq %rax, LP_INST_RI + LP_RI_DATA(%rdi)
    movq %rcx, %rax
    jmp 2b
9:  /* Not the common case: lp_kret_light_c(kp, slot, rec), nothing changed yet, r8 to r11 kept. */
    movq %rax, %rdx
    CALL_KEEPING_R8_R11 lp_kret_light_c
    ret
    .size lp_kret_light_pre, .-lp_kret_light_pre
18: jmp *LP_KS_LIGHT_FN(%rdx)                /* lp_kret_light_entry: another light kprobe now */
    LIGHT_DISPATCH_EXITS 15, 16, 17
    .cfi_endproc
    .size lp_kret_light_entry, .-lp_kret_light_entry


    LIGHT_DISPATCH lp_light_entry, 0, 0
    LIGHT_DISPATCH lp_light_mid, 128, 0
    LIGHT_DISPATCH lp_light_entry_fenced, 0, 1
    LIGHT_DISPATCH lp_light_mid_fenced, 128, 1

    .section .note.GNU-stack,"",@progbits
