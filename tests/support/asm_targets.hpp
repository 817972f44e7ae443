// Hand-written probe targets for the behaviour tests: each instruction a test probes has a
// global label, so tests name exact machine code. Defined in asm_targets.S.
#pragma once

extern "C" {
// long lp_t_ret42(void): movl $42,%eax (5 bytes) ; ret
long lp_t_ret42(void);
extern char lp_t_ret42_mov[], lp_t_ret42_ret[];

// long lp_t_load(const long *p): movq (%rdi),%rax ; ret
long lp_t_load(const long *p);
extern char lp_t_load_mov[];

// long lp_t_carry(void): xor %eax,%eax ; jc 1f (probe) ; ret ; 1: mov $1,%eax ; ret
long lp_t_carry(void);
extern char lp_t_carry_jc[];

// long lp_t_call(void): push %rbx ; call lp_t_ret42 (probe) ; pop %rbx ; ret
long lp_t_call(void);
extern char lp_t_call_site[];

// long lp_t_riprel(void): movq lp_t_data(%rip),%rax (probe) ; ret
long lp_t_riprel(void);
extern char lp_t_riprel_load[];
extern long lp_t_data;

// long lp_t_loop(long n): mov %rdi,%rcx ; xor %eax,%eax ; 1: inc %eax ; loop 1b (probe) ; ret
long lp_t_loop(long n);
extern char lp_t_loop_insn[];

// long lp_t_sys(void): movl $39,%eax ; syscall (probe: refused) ; ret
long lp_t_sys(void);
extern char lp_t_sys_syscall[];

// long lp_t_jmp(void): jmp 1f (probe, rel8) ; ud2 ; 1: movl $7,%eax ; ret
long lp_t_jmp(void);
extern char lp_t_jmp_insn[];

// long lp_t_icall(long (*f)(void)): push %rbx ; call *%rdi (probe) ; pop %rbx ; ret
long lp_t_icall(long (*f)(void));
extern char lp_t_icall_site[];

// int lp_t_clobber_fault(struct kprobe *, struct pt_regs *): a pre handler that overwrites every
// general register and the flags, then faults; integer-only (provably vector-free).
int lp_t_clobber_fault(struct kprobe *, struct pt_regs *);
// int lp_t_rbp_fault(void *, struct pt_regs *): a handler that overwrites rbp (the only
// callee-saved register it writes) and some caller-saved ones, then faults.
int lp_t_rbp_fault(void *, struct pt_regs *);
// int lp_t_rbx_rbp_fault(void *, struct pt_regs *): the same, overwriting rbx too.
int lp_t_rbx_rbp_fault(void *, struct pt_regs *);

// long lp_t_div(long a, long b): a / b with idiv (SIGFPE when b == 0), out of sight of UBSan
long lp_t_div(long a, long b);

// Register preservation (optimize_test.cpp): see asm_targets.S.
void lp_o_regs(void);
extern char lp_o_regs_probe[], lp_o_regs_after[];
extern unsigned char lp_o_pat_z[2048], lp_o_dump_z[2048];
extern unsigned long lp_o_pat_g[15], lp_o_dump_g[15], lp_o_pat_k[8], lp_o_dump_k[8];
extern unsigned long lp_o_pat_flags, lp_o_dump_flags;
// The same around a call of lp_o_leaf(), a 5-byte nop and ret, for return probes.
void lp_o_call_regs(void);
void lp_o_leaf(void);
// The same around a call of lp_o_nest(), which calls itself once more (two calls in flight).
void lp_o_call_nested(void);
void lp_o_nest(void);
// int lp_t_r8_r11(void *, struct pt_regs *): writes rcx and r8 to r11 (nothing callee-saved),
// counts its runs in lp_t_r8_r11_runs, returns 0.
int lp_t_r8_r11(void *, struct pt_regs *);
extern int lp_t_r8_r11_runs;

// long lp_o_loop(const volatile char *stop): see asm_targets.S.
long lp_o_loop(const volatile char *stop);
extern char lp_o_loop_probe[];

// long lp_o_tiny(long x): lea 1(%rdi),%rax ; ret
long lp_o_tiny(long x);
// long lp_o_short(long x): x, in 4 bytes (mov, ret), then nop padding up to lp_o_short_after
long lp_o_short(long x);
void lp_o_short_after();
// long lp_o_switch(long x): x, through a jump to an address it computes past its entry's bytes
long lp_o_switch(long x);
// long lp_o_goto_into(long x): x + 2, through a jump it computes back into its entry's bytes
long lp_o_goto_into(long x);
// long lp_o_table(long x): a PIE jump table: cases 0..3 give 10 20 30 40, others -1
long lp_o_table(long x);
// long lp_o_table_back(long x): a jump table whose case 1 loops back into the entry's region
long lp_o_table_back(long x);

// long lp_t_push(long x): push %rdi (probe) ; pop %rax ; ret
long lp_t_push(long x);
extern char lp_t_push_insn[];
}

// Vector state (vector_state_test.cpp): see asm_targets.S.
extern "C" {
unsigned long lp_v_clean(void);
extern char lp_v_clean_probe[];
extern unsigned char lp_v_pat[256], lp_v_dump[256];
double lp_v_x87(void);
extern char lp_v_x87_probe[];
extern double lp_v_a, lp_v_b;
void lp_v_nop(void);
extern char lp_v_nop_probe[];
}

// Return probes (kretprobe_test.cpp): see asm_targets.S.
extern "C" {
long lp_k_leaf(long x);
long lp_k_tail(long x);
long lp_k_callsite(long x);
extern char lp_k_callsite_ret[];
long lp_k_tailsite(long x);
extern char lp_k_tailsite_ret[];
long lp_k_tailrec(long n);
long lp_k_tailrecsite(long n);
extern char lp_k_tailrecsite_ret[];
}
