/* --hist's return handler when the clock is the TSC (trace/handlers.hpp hist_return), in
 * assembly: it writes no general register but rax, rdx, rsi and rdi and calls nothing but
 * lp_call_keeping, which keeps the rest, so the light return saves six registers around it, not
 * eleven (core/kretprobe.hpp, KretState::return_few); and it is short. Slot 0's session's only
 * (handlers.hpp g_slots; the others' is hist_return_other, in C). Its common case only: this
 * thread has its rows in this session (t_rows: set for g_slots[0].generation). The rest is
 * hist_return_slow's (handlers.cpp), through lp_call_keeping. It does not test the slot's silent:
 * a child that is silent moved the generation, and its rows are never set again.
 *
 *   int hist_return(struct kretprobe_instance *ri, struct pt_regs *regs)
 *
 * What it adds, as hist_add(index, tsc_delta_ns(stamp, end)) in C++ would: the TSC read now
 * (unordered) less the entry's stamp (ri->data), 0 when not later; one more call in its
 * bucket (NS_BUCKET) of its probe's row. The row is this thread's alone: a plain
 * increment, which the reader sees whole or not at all. */
#include "arch/x86_64/light_layout.h"
#include "trace/hist_layout.h"

#define T_ROWS _ZN9liveprobe5trace6t_rowsE
#define G_SLOTS _ZN9liveprobe5trace7g_slotsE
#define G_GEN _ZN9liveprobe2os5clock5g_genE
#define G_CONV _ZN9liveprobe2os5clock6g_convE
#define HIST_RETURN _ZN9liveprobe5trace11hist_returnEP18kretprobe_instanceP7pt_regs
#define HIST_RETURN_SLOW _ZN9liveprobe5trace16hist_return_slowEPv


/* The call's bucket, into eax: the TSC read now (unordered) less the entry's stamp in rdi, 0
 * ns when not later; else 64 - clz of the cycles' nanoseconds by the
 * clock's current conversion (os::clock::cycles_to_ns: cycles * mult >> 32), 0 ns going to
 * \zero, the last bucket for anything from 2^39 ns on. Where the cycles and the rate fit 32
 * bits each, the product fits 64 and the bucket is bsr(product) - 31 (no shift, no cap: at most
 * 33); else (NS_BUCKET_WIDE, out of the line, back at \back) the 128-bit product, as scale()
 * takes it. Writes rdx and rdi. */
.macro NS_BUCKET zero, wide
    rdtsc
    shlq $32, %rdx
    orq %rdx, %rax
    subq %rdi, %rax                          /* the cycles since the stamp */
    jbe \zero                                /* not later: 0 ns */
    movl G_GEN(%rip), %edx
    andl $LP_CONV_RING_MASK, %edx
    shll $LP_CONV_SIZE_LOG2, %edx
    leaq G_CONV + LP_CONV_MULT(%rip), %rdi
    movq (%rdi,%rdx), %rdx                   /* mult */
    movq %rax, %rdi
    orq %rdx, %rdi
    shrq $32, %rdi
    jnz \wide
    imulq %rdx, %rax
    bsrq %rax, %rax
    jz \zero
    subl $31, %eax
    jbe \zero
.endm
.macro NS_BUCKET_WIDE zero, back
    mulq %rdx                                /* rdx:rax = cycles * mult */
    shrdq $32, %rdx, %rax                    /* the nanoseconds */
    bsrq %rax, %rax
    jz \zero
    incl %eax                                /* 64 - clz */
    movl $LP_HIST_LAST, %edx
    cmpl %edx, %eax
    cmova %edx, %eax
    jmp \back
.endm

/* This thread's rows (t_rows), to \slow unless set for this session and generation: rax =
 * t_rows.hists, rsi = t_rows' offset from the thread pointer. Writes rdx. */
.macro THREAD_ROWS slow
    movq T_ROWS@GOTTPOFF(%rip), %rsi
    movq %fs:LP_ROWS_HISTS(%rsi), %rax
    testq %rax, %rax
    jz \slow
    movq %fs:LP_ROWS_GENERATION(%rsi), %rdx
    cmpq G_SLOTS + LP_SLOT_GENERATION(%rip), %rdx
    jne \slow
.endm

    .text
    .globl HIST_RETURN
    .hidden HIST_RETURN
    .type HIST_RETURN, @function
    .p2align 5
HIST_RETURN:
    .cfi_startproc
    THREAD_ROWS 8f
    /* rsi: the probe's row */
    movq (%rdi), %rsi                        /* ri->rp */
    movl LP_PROBE_INDEX_FROM_RP(%rsi), %esi
    imulq $LP_HIST_ROW_BYTES, %rsi, %rsi
    addq %rax, %rsi
    movq LP_RI_DATA(%rdi), %rdi              /* the stamp */
    NS_BUCKET 2f, 5f
4:  incq (%rsi,%rax,8)
    xorl %eax, %eax
    ret
2:  incq (%rsi)
    xorl %eax, %eax
    ret
5:  NS_BUCKET_WIDE 2b, 4b
8:  leaq HIST_RETURN_SLOW(%rip), %rsi
    jmp lp_call_keeping
    .cfi_endproc
    .size HIST_RETURN, .-HIST_RETURN

/* lp_trace_hist_inline: hist_return's common case as the body of a registered inline return
 * (core::set_kret_return_inline, session.cpp), which the light return jumps to in place of
 * calling hist_return: rbx = the thread's record, rdi = the call's Inst (its kretprobe_instance
 * at LP_INST_RI), rdx = its KretState, rsp = the light return's frame (the return slot - 88).
 * It writes rax, rdx and rsi, and two words below the stack pointer (rdi and rsi kept there),
 * and goes back to lp_kret_inline_done with rdi and rdx as they came; its rare cases (no rows)
 * to lp_kret_inline_call, before anything changed, which calls hist_return.
 *
 * The bucket as hist_return finds it, but counted one call late: the ring's hist_pending
 * (rings.hpp RingHead) holds the bucket of this thread's previous such return: this call's
 * is left there in its place, and then that one counted (its address known long since). A store
 * to the bucket whose address hangs on the rdtsc just made held the loads after it up:
 * liveprobe-call-cycles 1 under --hist, 72 TSC cycles a call against 64 with the same work
 * and a store to a fixed address. The tool counts what is left pending at the end.
 *
 * Call frame information: the light return's frame (kretprobe_trampoline.S): the canonical
 * frame address 96 above the stack pointer as it came, the return address at the slot, rbp
 * and rbx in their words. */
    .globl lp_trace_hist_inline
    .hidden lp_trace_hist_inline
    .type lp_trace_hist_inline, @function
    .p2align 6                               /* a line's start: at 32 past one it ran 1.5 cycles slower */
lp_trace_hist_inline:
    .cfi_startproc simple
    .cfi_def_cfa %rsp, 96
    .cfi_offset %rip, -8
    .cfi_offset %rbp, -16
    .cfi_offset %rbx, -96
    THREAD_ROWS 8f
    pushq %rdi
    .cfi_adjust_cfa_offset 8
    pushq %rsi
    .cfi_adjust_cfa_offset 8
    movq LP_INST_KS(%rdi), %rdx
    movq LP_KRS_RP(%rdx), %rdx               /* ks->rp */
    movl LP_PROBE_INDEX_FROM_RP(%rdx), %esi
    imull $LP_HIST_BUCKETS, %esi, %esi       /* the probe's row, in words */
    movq LP_INST_RI + LP_RI_DATA(%rdi), %rdi /* the stamp */
    NS_BUCKET 2f, 5f
4:  leal 1(%rsi,%rax), %eax                  /* its bucket word + 1 */
    /* This call's bucket left pending first, then the one it replaces counted: a signal that
     * lands in here and whose handler leaves by siglongjmp (the return abandoned:
     * core::reset_abandoned_handler) loses one call, never counts one twice. */
3:  popq %rsi
    .cfi_adjust_cfa_offset -8
    movq %fs:LP_ROWS_PENDING(%rsi), %rdi     /* the ring's hist_pending */
    movq (%rdi), %rdx                        /* the previous call's bucket word + 1, or 0 */
    movq %rax, (%rdi)                        /* pending */
    testq %rdx, %rdx
    jz 1f
    movq %fs:LP_ROWS_HISTS(%rsi), %rax
    incq -8(%rax,%rdx,8)                     /* counted */
1:  popq %rdi
    .cfi_adjust_cfa_offset -8
    movq LP_INST_KS(%rdi), %rdx
    jmp lp_kret_inline_done
    .cfi_adjust_cfa_offset 16
2:  leal 1(%rsi), %eax                       /* bucket 0 */
    jmp 3b
5:  NS_BUCKET_WIDE 2b, 4b
    .cfi_adjust_cfa_offset -16
8:  jmp lp_kret_inline_call
    .cfi_endproc
    .size lp_trace_hist_inline, .-lp_trace_hist_inline

    .section .note.GNU-stack,"",@progbits
