/* lp_kretprobe_trampoline: where a probed function whose return address liveprobe replaced
 * returns to (core/kretprobe.cpp). It arrives by the function's `ret`: rsp is the return slot
 * + 8, rax/rdx (and xmm0/xmm1, st0/st1) hold the return value. It first tries the light
 * return (below, at its start); else lp_kretprobe_full, the full return, builds a struct pt_regs
 * (sp: the stack pointer after the return), calls lp_kretprobe_return(regs), which runs the
 * return handlers and gives the real return address (regs->ip), restores every general
 * register from regs and jumps there with the stack pointer the function returned with.
 * The flags are neither saved nor restored: no one may rely on them across a return, and the
 * ABI has DF clear there; handlers see regs->flags = 0x202 (IF).
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
#include "arch/x86_64/light_layout.h"

#define TL_REC _ZN9liveprobe4core6tl_recE
#define G_HIT_PATH_NEEDS_FENCE _ZN9liveprobe2os22g_hit_path_needs_fenceE
#define G_STACK_REGIONS _ZN9liveprobe2os15g_stack_regionsE
#define G_KRET_UNREGISTRATIONS _ZN9liveprobe4core22g_kret_unregistrationsE
#define G_KRET_INLINE_BODY _ZN9liveprobe4core18g_kret_inline_bodyE

    .text
    .globl lp_kretprobe_trampoline
    .hidden lp_kretprobe_trampoline
    .type lp_kretprobe_trampoline, @function
    .globl liveprobe_replaced_return
    .hidden liveprobe_replaced_return
    .globl lp_kret_rsb_call
    .hidden lp_kret_rsb_call
#define SLOW_FLAGS 0x244500   /* TF DF NT AC ID */
/* The six arithmetic flags from the flags word at off(%rsp), rax as scratch, without popfq
 * (as detour.cpp emit_arith_flags). */
.macro ARITH_FLAGS off
    movb \off + 1(%rsp), %al   /* OF, from bit 11 */
    andb $8, %al
    addb $0x78, %al            /* sets OF exactly when al was 8 */
    movb \off(%rsp), %ah       /* SF ZF AF PF CF */
    sahf
.endm
/* Stores rcx and r8 to r11 into their words of the light return's frame (rsp = S - 88), for
 * a handler that may write them or read them in its regs, or for a C function. */
.macro SAVE_FIVE
    movq %rcx, 48(%rsp)
    movq %r8, 32(%rsp)
    movq %r9, 24(%rsp)
    movq %r10, 16(%rsp)
    movq %r11, 8(%rsp)
.endm
/* lp_kret_light_tail: a light entry whose kretprobe replaced the return slot (arch::kLightKret),
 * rsp = its frame (flags at 0, rax at 8; the other registers restored already), the relocated
 * region's address at 112(%rsp), which is sp - 24 once the frame is left. The saved flags hold
 * none of TF DF NT AC ID (the light entry leaves those to the full path). It runs on into
 * lp_kret_rsb_call, placed right after it. */
    .globl lp_kret_light_tail
    .hidden lp_kret_light_tail
    .type lp_kret_light_tail, @function
    .p2align 6   /* the tail, lp_kret_rsb_call and the trampoline's start in one line: 40.7 -> 40.3 TSC
                  * cycles a call in liveprobe-kret-cycles */
lp_kret_light_tail:
    ARITH_FLAGS 0
    movq 8(%rsp), %rax
    leaq LP_LIGHT_FRAME(%rsp), %rsp
    /* on into lp_kret_rsb_call, right below: no jump */
    .size lp_kret_light_tail, .-lp_kret_light_tail

/* lp_kret_rsb_call: where a detour whose kretprobe has just taken the call goes on (detour.hpp,
 * case 3), every register as the function's entry had it, the return slot at the stack pointer
 * (holding the real return address, or the trampoline's already) and the relocated region's
 * address in the flags slot of the pt_regs just below it (at sp - 24, inside the 128 bytes no
 * signal frame touches). It steps over the slot and calls the relocated region through that
 * word: the call writes the trampoline's address (the one right after it) into the slot, and
 * pushes it onto the return stack buffer, where the function's own `ret` will find it: the
 * return into the trampoline is predicted, and so is the trampoline's `ret` home after it (the
 * caller's entry is on top again). The call's last byte is liveprobe_replaced_return, the byte
 * before the trampoline: no call frame information of the library covers it (see below). */
lp_kret_rsb_call:
    leaq 8(%rsp), %rsp
    call *-32(%rsp)
liveprobe_replaced_return = . - 1   /* unwinders look up the return address - 1: see below */
lp_kretprobe_trampoline:
    /* The light return: for the newest call in flight when its probe's return handler is
     * none or proven vector-free and to read no field of its regs but ip and the caller-saved
     * registers' (KretState::return_light), the thread at the outermost level. Only the
     * caller-saved registers, rbp and rbx are saved here (the return value among them), and
     * of those rcx and r8 to r11 only when something may write or read them: not for a
     * handler that leaves them alone (KretState::return_few), nor for none. The
     * common case runs below in assembly and calls the handler itself (the fast path); the
     * rest goes to lp_kret_light_return (core/kret_hit.cpp), a C function, which decides again
     * and calls the handler through lp_kret_call_bare or lp_kret_call_saving. When that
     * declines, nothing has changed: on to the full path (lp_kretprobe_full), as for a stack
     * pointer not 16-aligned after the return (the frame below keeps it aligned for calls only
     * from an aligned one).
     *
     * The frame, from the return slot S down: S the real return address (0 until the light
     * return writes it, before the handler runs), S - 8 rbp, S - 16 .. S - 80 rdi rsi rdx rcx
     * rax r8 r9 r10 r11, S - 88 rbx (rcx and r8 to r11 stored only as said above); the
     * handler's regs is S - 128: its ip and its caller-saved registers' fields are the frame's
     * words (the handler was proven to use no other: arch::regs_fields_only, with the fields
     * of rcx and r8 to r11 left out for return_few), and what it stores there takes effect.
     * Call frame information: the frame is the probed function's at its return: the canonical
     * frame address is the stack pointer after the return (S + 8), the return address is at S
     * (0 ends a walk), rbp at S - 8, rbx at S - 88. */
    .cfi_startproc simple
    .cfi_def_cfa %rsp, 0
    .cfi_undefined %rip
    testl $15, %esp
    jnz lp_kretprobe_full
    pushq $0
    .cfi_adjust_cfa_offset 8
    .cfi_offset %rip, -8
    pushq %rbp
    .cfi_adjust_cfa_offset 8
    .cfi_offset %rbp, -16
    pushq %rdi
    pushq %rsi
    pushq %rdx
    leaq -8(%rsp), %rsp   /* rcx's word: SAVE_FIVE */
    pushq %rax
    leaq -32(%rsp), %rsp  /* r8 to r11's */
    pushq %rbx
    .cfi_adjust_cfa_offset 80
    .cfi_offset %rbx, -96
    /* The fast path: lp_kret_light_return's common case in assembly, the handler called from
     * here: no C call around it. It writes rax, rdx, rsi, rdi, rbx and rbp only, whose words
     * were stored above; rcx and r8 to r11 are stored (SAVE_FIVE) once it is known that
     * something will write them: the handler (unless return_few), or a C function. Bit 2 of
     * rbp, then of rdx, says they were: they are loaded back at the end. rbx: the thread's
     * record. A handler called from here keeps rbx and rbp when it returns, as the ABI has
     * it; one that faults may leave them changed, and lp_kret_light_after sets them again
     * (the program's come back from this frame either way); one that writes other callee-saved
     * registers runs through lp_kret_call_saving. Anything else, before anything changed:
     * lp_kret_light_return (8), which decides again. */
    movq TL_REC@GOTTPOFF(%rip), %rbx
    movq %fs:(%rbx), %rbx
    testq %rbx, %rbx
    jz 8f
    movl LP_REC_IN_HANDLER(%rbx), %eax
    orl LP_REC_KRET_BUSY_DEPTH(%rbx), %eax
    jnz 8f
    cmpb $0, G_HIT_PATH_NEEDS_FENCE(%rip)
    jne 8f
    movq LP_REC_RET_TOP(%rbx), %rdi      /* e, the newest call in flight */
    testq %rdi, %rdi
    jz 8f
    leaq 88(%rsp), %rsi                  /* the slot */
    cmpq %rsi, LP_INST_SLOT(%rdi)
    jne 8f
    movq LP_INST_BELOW(%rdi), %rax       /* the call below: not of this slot, on this stack */
    testq %rax, %rax
    jz 1f
    cmpq %rsi, LP_INST_SLOT(%rax)
    je 8f
    cmpl $0, G_STACK_REGIONS(%rip)
    jne 8f
1:  movq LP_INST_KS(%rdi), %rdx
    cmpb $0, LP_KRS_RETURN_LIGHT(%rdx)
    je 8f
    xorl %ebp, %ebp
    cmpb $0, LP_KRS_RETURN_FEW(%rdx)
    jne 10f
    SAVE_FIVE
    movl $4, %ebp
10: /* Named first, then taken: off the return stack, its real return address into the slot.
     * From here until the instance goes back, kret_light and in_handler say a return runs: a
     * signal that lands here and whose handler leaves by siglongjmp leaves a return that
     * core::reset_abandoned_handler sees (its frame is the slot's), and gives back once taken
     * (the return stack's top is no longer it); the signal handler's own hits are missed. */
    movq %rdi, LP_REC_KRET_LIGHT(%rbx)
    movl $1, LP_REC_IN_HANDLER(%rbx)
    movq %rax, LP_REC_RET_TOP(%rbx)
    movq $0, LP_INST_BELOW(%rdi)
    movq LP_INST_RI + LP_RI_RET_ADDR(%rdi), %rax
    movq %rax, (%rsi)
    /* A level of kret_busy for ks (depth first, then the slot), then live: the busy protocol
     * (core/dispatch.hpp publish_busy; this thread's kret_busy was at depth 0). */
    movl $1, LP_REC_KRET_BUSY_DEPTH(%rbx)
    movq %rdx, LP_REC_KRET_BUSY_SLOT0(%rbx)
    cmpb $0, LP_KRS_LIVE(%rdx)
    je 3f
    cmpb $0, LP_KRS_RETURN_INLINE(%rdx)
    jne 17f
    movq LP_KRS_RP(%rdx), %rax
    movq LP_RP_HANDLER(%rax), %rax
    testq %rax, %rax
    jz 3f
    /* kret_light_h while the handler runs, and only then: a fault is the handler's
     * (core::kret_fault_resume), not one of a signal handler that landed elsewhere here. */
18: movq %rax, LP_REC_KRET_LIGHT_H(%rbx)
    cmpb $0, LP_KRS_RETURN_SAVES(%rdx)
    leaq LP_INST_RI(%rdi), %rdi          /* ri */
    leaq -40(%rsp), %rsi                 /* regs: S - 128, of which only the fields saved here are read */
    jne 2f
    call *%rax
14: /* rbx and rbp as they were: the handler returned (the ABI keeps them; a fault resumes at
     * lp_kret_light_after, below, which sets them again). */
    movq $0, LP_REC_KRET_LIGHT_H(%rbx)
    movq LP_REC_KRET_LIGHT(%rbx), %rdi
    movq LP_INST_KS(%rdi), %rdx
    .globl lp_kret_inline_done
    .hidden lp_kret_inline_done
lp_kret_inline_done:  /* where a registered inline return's body comes back (core/kretprobe.hpp) */
3:  /* The level released (the slot first, then depth), then the return's names. rdi = e, rdx =
     * its KretState. */
    movq $0, LP_REC_KRET_BUSY_SLOT0(%rbx)
    movl $0, LP_REC_KRET_BUSY_DEPTH(%rbx)
    movq $0, LP_REC_KRET_LIGHT(%rbx)
    movl $0, LP_REC_IN_HANDLER(%rbx)
    xorl %eax, %eax                      /* bit 0 of rbp: the return stack buffer holds the caller */
    cmpl $1, LP_INST_NEXT_FREE(%rdi)     /* kInstRsb */
    sete %al
    orl %eax, %ebp
    /* The instance back to the thread's cache entry when it is the probe's and the probe
     * lives: as its hot instance when it has none (give_back's common case), else onto its
     * list while that has room (a recursive call's: core/kret_hit.cpp keep); the rest in C. */
    movl LP_KRS_CACHE_SLOT(%rdx), %eax
    shlq $5, %rax
    leaq LP_REC_KRET_CACHE(%rbx,%rax), %rax
    cmpq %rdx, (%rax)
    jne 6f
    cmpb $0, LP_KRS_LIVE(%rdx)
    je 6f
    cmpq $0, 8(%rax)
    jne 15f
    movq %rdi, 8(%rax)
16: movq G_KRET_UNREGISTRATIONS(%rip), %rax
    cmpq %rax, LP_REC_KRET_SEEN(%rbx)
    jne 7f
4:  movl %ebp, %edx
9:  testb $4, %dl         /* rcx and r8 to r11 saved: back */
    jz 11f
    movq 48(%rsp), %rcx
    movq 32(%rsp), %r8
    movq 24(%rsp), %r9
    movq 16(%rsp), %r10
    movq 8(%rsp), %r11
11: andl $3, %edx
    cmpq $1, %rdx         /* 0: jump home; 1: ret home (predicted); 2: the full path */
    popq %rbx
    .cfi_restore %rbx
    leaq 32(%rsp), %rsp
    popq %rax
    leaq 8(%rsp), %rsp
    popq %rdx
    popq %rsi
    popq %rdi
    .cfi_adjust_cfa_offset -80
    popq %rbp
    .cfi_adjust_cfa_offset -8
    .cfi_restore %rbp
    .cfi_remember_state
    ja 5f
    jb 3f
    ret
3:  .cfi_restore_state
    .cfi_remember_state
    leaq 8(%rsp), %rsp    /* as lp_kretprobe_dispatch does: the red zone keeps -8(%rsp) */
    .cfi_adjust_cfa_offset -8
    jmp *-8(%rsp)
5:  .cfi_restore_state    /* declined: every register as it came, the slot holding 0 */
    leaq 8(%rsp), %rsp
    .cfi_def_cfa %rsp, 0
    .cfi_undefined %rip
    jmp lp_kretprobe_full
    /* Out of the fast path's line: */
    .cfi_def_cfa %rsp, 96
    .cfi_offset %rip, -8
    .cfi_offset %rbp, -16
    .cfi_offset %rbx, -96
2:  /* A handler that writes callee-saved registers: through lp_kret_call_saving (not
     * return_few: SAVE_FIVE was done), which keeps rbx and rbp, after a fault in it too. */
    movq %rbx, %rdx
    call lp_kret_call_saving
    movq $0, LP_REC_KRET_LIGHT_SP(%rbx)
    jmp 14b
    .globl lp_kret_light_after
    .hidden lp_kret_light_after
lp_kret_light_after:  /* where a fault in the handler resumes (kret_fault_resume): rsp = S - 88 */
    movq TL_REC@GOTTPOFF(%rip), %rbx     /* the record again: the handler may have written rbx */
    movq %fs:(%rbx), %rbx
    movq LP_REC_KRET_LIGHT(%rbx), %rdx
    movq LP_INST_KS(%rdx), %rdx
    xorl %ebp, %ebp                      /* and rbp: bit 2 again, as it was set above */
    cmpb $0, LP_KRS_RETURN_FEW(%rdx)
    jne 14b
    movl $4, %ebp
    jmp 14b
17: /* The registered inline return (core::set_kret_return_inline): its body in place of the
     * handler's call, on this frame, unmarked (it never faults); back at lp_kret_inline_done, or
     * at lp_kret_inline_call (below) for the call after all. */
    jmp *G_KRET_INLINE_BODY(%rip)
    .globl lp_kret_inline_call
    .hidden lp_kret_inline_call
lp_kret_inline_call:  /* rdi = e: its handler called as any other's */
    movq LP_INST_KS(%rdi), %rdx
    movq LP_KRS_RP(%rdx), %rax
    movq LP_RP_HANDLER(%rax), %rax
    testq %rax, %rax
    jz lp_kret_inline_done
    jmp 18b
15: /* The list, while it has room (rdx is free from here). */
    cmpl $LP_CACHE_MAX, LP_CACHE_N(%rax)
    jae 6f
    movq LP_CACHE_HEAD(%rax), %rdx
    movq %rdx, LP_INST_BELOW(%rdi)
    movq %rdi, LP_CACHE_HEAD(%rax)
    incl LP_CACHE_N(%rax)
    jmp 16b
6:  /* give_back's other cases, and the flush: C, which may write rcx and r8 to r11. */
    testl $4, %ebp
    jnz 12f
    SAVE_FIVE
    orl $4, %ebp
12: movq %rdi, %rsi
    movq %rbx, %rdi
    call lp_kret_light_finish
    jmp 4b
7:  /* The instance went back; caches of probes being unregistered to flush. */
    testl $4, %ebp
    jnz 13f
    SAVE_FIVE
    orl $4, %ebp
13: xorl %esi, %esi
    movq %rbx, %rdi
    call lp_kret_light_finish
    jmp 4b
8:  /* Not the fast path's: lp_kret_light_return, nothing changed yet (rbx is restored last). */
    SAVE_FIVE
    leaq 88(%rsp), %rdi
    call lp_kret_light_return
    orl $4, %edx
    jmp 9b
    .cfi_endproc
    .size lp_kretprobe_trampoline, .-lp_kretprobe_trampoline

    .type lp_kretprobe_full, @function
lp_kretprobe_full:
    .cfi_startproc simple
    .cfi_def_cfa %rsp, 0
    .cfi_undefined %rip
    pushq $0        /* the real return address, filled in below */
    .cfi_adjust_cfa_offset 8
    pushq $0x2b     /* ss */
    .cfi_adjust_cfa_offset 8
    pushq %rax      /* sp, set below */
    .cfi_adjust_cfa_offset 8
    pushq $0x202    /* flags: none survive a return (the ABI; DF is clear there too), so none
                     * are read: pushfq and cld cost more than the rest of the frame */
    .cfi_adjust_cfa_offset 8
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
    .size lp_kretprobe_full, .-lp_kretprobe_full
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
    /* rdx: whether the return stack buffer holds the caller's return address on top (the
     * entry went through lp_kret_rsb_call); the flags carry it past the pops. */
    testq %rdx, %rdx
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
    leaq 48(%rsp), %rsp   /* orig_ax ip cs flags sp ss: the real return address on top */
    .cfi_adjust_cfa_offset -48
    jz 1f
    /* The return stack buffer holds the caller: a ret is predicted. */
    ret
1:  /* It does not (the entry took the breakpoint path, or another way than case 3): a ret
     * would be mispredicted, an indirect jump is predicted by its target. A signal arriving
     * now does not reach -8(%rsp): the kernel skips the red zone. */
    leaq 8(%rsp), %rsp
    .cfi_adjust_cfa_offset -8
    jmp *-8(%rsp)
    .cfi_endproc
    .size lp_kretprobe_dispatch, .-lp_kretprobe_dispatch

/* int lp_kret_call_saving(struct kretprobe_instance *ri, struct pt_regs *regs,
 * ThreadRecord *rec) and lp_kret_call_bare: rec->kret_light_h(ri, regs), rec the calling
 * thread's record, for a handler the light paths call (lp_kret_light_c's entry handler, with
 * regs NULL; the light return's, lp_kret_light_return). While it runs, kret_light_sp points at
 * a word holding where a fault in it resumes, the stack pointer to resume with just above
 * (arch::light_fault_resume, kret_fault_resume): 1 is returned from here then.
 * lp_kret_call_saving saves the callee-saved registers around the handler and restores them
 * after a fault too; the bare one, for a handler proven to write none of them but rbp (a frame
 * pointer), saves rbp only. */
.macro PUSH_CALLEE_SAVED_CFI
    pushq %rbp
    .cfi_adjust_cfa_offset 8
    .cfi_offset %rbp, -16
    pushq %rbx
    .cfi_adjust_cfa_offset 8
    .cfi_offset %rbx, -24
    pushq %r12
    .cfi_adjust_cfa_offset 8
    .cfi_offset %r12, -32
    pushq %r13
    .cfi_adjust_cfa_offset 8
    .cfi_offset %r13, -40
    pushq %r14
    .cfi_adjust_cfa_offset 8
    .cfi_offset %r14, -48
    pushq %r15
    .cfi_adjust_cfa_offset 8
    .cfi_offset %r15, -56
.endm
.macro POP_CALLEE_SAVED_CFI
    popq %r15
    .cfi_adjust_cfa_offset -8
    popq %r14
    .cfi_adjust_cfa_offset -8
    popq %r13
    .cfi_adjust_cfa_offset -8
    popq %r12
    .cfi_adjust_cfa_offset -8
    popq %rbx
    .cfi_adjust_cfa_offset -8
    popq %rbp
    .cfi_adjust_cfa_offset -8
.endm
.macro KRET_CALL_HANDLER name, save
    .globl \name
    .hidden \name
    .type \name, @function
\name:
    .cfi_startproc
    .if \save
    PUSH_CALLEE_SAVED_CFI
    .else
    pushq %rbp
    .cfi_adjust_cfa_offset 8
    .cfi_offset %rbp, -16
    leaq -8(%rsp), %rsp     /* the handler's call aligned */
    .cfi_adjust_cfa_offset 8
    .endif
    leaq 2f(%rip), %rax
    pushq %rax              /* where a fault resumes, with the stack pointer above it */
    .cfi_adjust_cfa_offset 8
    movq %rsp, LP_REC_KRET_LIGHT_SP(%rdx)
    call *LP_REC_KRET_LIGHT_H(%rdx)
    leaq 8(%rsp), %rsp
    .cfi_adjust_cfa_offset -8
1:
    .if \save
    POP_CALLEE_SAVED_CFI
    .else
    leaq 8(%rsp), %rsp
    .cfi_adjust_cfa_offset -8
    popq %rbp
    .cfi_adjust_cfa_offset -8
    .cfi_restore %rbp
    .endif
    ret
    .if \save
    .cfi_adjust_cfa_offset 48
    .else
    .cfi_adjust_cfa_offset 16
    .cfi_offset %rbp, -16
    .endif
2:  movl $1, %eax
    jmp 1b
    .cfi_endproc
    .size \name, .-\name
.endm

    KRET_CALL_HANDLER lp_kret_call_saving, 1
    KRET_CALL_HANDLER lp_kret_call_bare, 0

/* The two ways detours reach lp_kret_rsb_call, shared here rather than written into every
 * detour block (a block is 1024 bytes: a detour with its full path, its post path and a
 * kretprobe's light entry did not fit). No call frame information, as for the detours'
 * own code: a walk started here stops.
 *
 * lp_kret_full_tail: detour case 3 (detour.hpp), rsp = the detour's struct pt_regs, the
 * relocated region's address in its orig_ax word. Restores the flags (the arithmetic six, or
 * all of them by popfq when the saved ones hold TF DF NT AC or ID, as the detour's own restore
 * does), then every register, the stack pointer last, with the address left in the flags word
 * (sp - 24), and goes on to lp_kret_rsb_call. */
    .globl lp_kret_full_tail
    .hidden lp_kret_full_tail
    .type lp_kret_full_tail, @function
lp_kret_full_tail:
    testl $SLOW_FLAGS, 144(%rsp)
    jnz 1f
    ARITH_FLAGS 144
    jmp 2f
1:  pushq 144(%rsp)
    popfq
2:  movq 120(%rsp), %rax
    movq %rax, 144(%rsp)
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
    movq 32(%rsp), %rsp
    jmp lp_kret_rsb_call
    .size lp_kret_full_tail, .-lp_kret_full_tail

    .section .note.GNU-stack,"",@progbits
