/* Probe targets for the behaviour tests; see asm_targets.hpp. */
    .text

#define FUNC(name) .globl name; .type name, @function; name:
#define LABEL(name) .globl name; name:
#define END(name) .size name, .-name

FUNC(lp_t_ret42)
LABEL(lp_t_ret42_mov)
    movl $42, %eax
LABEL(lp_t_ret42_ret)
    ret
END(lp_t_ret42)

FUNC(lp_t_load)
LABEL(lp_t_load_mov)
    movq (%rdi), %rax
    ret
END(lp_t_load)

FUNC(lp_t_carry)
    xorl %eax, %eax
LABEL(lp_t_carry_jc)
    jc 1f
    ret
1:  movl $1, %eax
    ret
END(lp_t_carry)

FUNC(lp_t_call)
    pushq %rbx
LABEL(lp_t_call_site)
    call lp_t_ret42
    popq %rbx
    ret
END(lp_t_call)

FUNC(lp_t_riprel)
LABEL(lp_t_riprel_load)
    movq lp_t_data(%rip), %rax
    ret
END(lp_t_riprel)

FUNC(lp_t_loop)
    movq %rdi, %rcx
    xorl %eax, %eax
1:  incl %eax
LABEL(lp_t_loop_insn)
    loop 1b
    ret
END(lp_t_loop)

FUNC(lp_t_sys)
    movl $39, %eax
LABEL(lp_t_sys_syscall)
    syscall
    ret
END(lp_t_sys)

FUNC(lp_t_jmp)
LABEL(lp_t_jmp_insn)
    jmp 1f
    ud2
1:  movl $7, %eax
    ret
END(lp_t_jmp)

FUNC(lp_t_icall)
    pushq %rbx
LABEL(lp_t_icall_site)
    call *%rdi
    popq %rbx
    ret
END(lp_t_icall)

FUNC(lp_t_push)
LABEL(lp_t_push_insn)
    pushq %rdi
    popq %rax
    ret
END(lp_t_push)

FUNC(lp_t_div)
    movq %rdi, %rax
    cqto
    idivq %rsi
    ret
END(lp_t_div)

    .data
    .globl lp_t_data
    .align 8
lp_t_data:
    .quad 0x1122334455667788

    .section .note.GNU-stack,"",@progbits
