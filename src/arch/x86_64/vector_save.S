/* lp_vec_save / lp_vec_restore: the vector state the jump path preserves around handlers that
 * may use it, with plain register moves instead of XSAVE (about 300 cycles here, against a few
 * dozen). Used when XCR0 holds only x87, SSE, AVX, the AVX-512 components (and PKRU), the CPU
 * has XGETBV with ECX=1 (XINUSE), and AVX-512BW with AVX-512F (vector_state.cpp decides;
 * XSAVE otherwise).
 *
 * What is saved follows XINUSE, the components not in their initial state:
 *   xmm0-15 always, as ymm when AVX is in use, as zmm when ZMM_Hi256 is; zmm16-31 when
 *   Hi16_ZMM is; k0-7 when the opmask is; MXCSR and the x87 control and status words always;
 *   the whole x87/MMX register file (FXSAVE) only when the x87 stack is not empty (TOP != 0).
 * A component not in use comes back in its initial state (vzeroupper, zeroing), so the program
 * keeps a clean upper state and pays no SSE/AVX transition.
 * Limitation: an MMX state (TOP = 0, all registers valid) is not recognised; a handler using
 * x87 there would clobber the MMX registers.
 *
 * Area (64-aligned, 2688 bytes): 0 XINUSE, 8 MXCSR, 12 FCW, 14 FSW, 16 x87-full flag,
 * 20 scratch, 64 k0-7, 128 zmm0-15, 1152 zmm16-31, 2176 FXSAVE or FNSTENV area (512).
 * Clobbers rax, rcx, rdx, rsi (and restore, the vector state itself). SysV calling convention.
 */
    .text

    .globl lp_vec_save
    .hidden lp_vec_save
    .type lp_vec_save, @function
lp_vec_save:
    .cfi_startproc
    movl $1, %ecx
    xgetbv
    movl %eax, %esi
    movq %rax, 0(%rdi)
    stmxcsr 8(%rdi)
    fnstcw 12(%rdi)
    fnstsw 14(%rdi)
    movb $0, 16(%rdi)
    testl $1, %esi
    jz 1f
    testw $0x3800, 14(%rdi)        /* TOP */
    jz 1f
    fxsave64 2176(%rdi)
    movb $1, 16(%rdi)
1:
    testl $0x40, %esi
    jnz 3f
    testl $0x04, %esi
    jnz 2f
    vmovdqu %xmm0, 128(%rdi)
    vmovdqu %xmm1, 192(%rdi)
    vmovdqu %xmm2, 256(%rdi)
    vmovdqu %xmm3, 320(%rdi)
    vmovdqu %xmm4, 384(%rdi)
    vmovdqu %xmm5, 448(%rdi)
    vmovdqu %xmm6, 512(%rdi)
    vmovdqu %xmm7, 576(%rdi)
    vmovdqu %xmm8, 640(%rdi)
    vmovdqu %xmm9, 704(%rdi)
    vmovdqu %xmm10, 768(%rdi)
    vmovdqu %xmm11, 832(%rdi)
    vmovdqu %xmm12, 896(%rdi)
    vmovdqu %xmm13, 960(%rdi)
    vmovdqu %xmm14, 1024(%rdi)
    vmovdqu %xmm15, 1088(%rdi)
    jmp 4f
2:
    vmovdqu %ymm0, 128(%rdi)
    vmovdqu %ymm1, 192(%rdi)
    vmovdqu %ymm2, 256(%rdi)
    vmovdqu %ymm3, 320(%rdi)
    vmovdqu %ymm4, 384(%rdi)
    vmovdqu %ymm5, 448(%rdi)
    vmovdqu %ymm6, 512(%rdi)
    vmovdqu %ymm7, 576(%rdi)
    vmovdqu %ymm8, 640(%rdi)
    vmovdqu %ymm9, 704(%rdi)
    vmovdqu %ymm10, 768(%rdi)
    vmovdqu %ymm11, 832(%rdi)
    vmovdqu %ymm12, 896(%rdi)
    vmovdqu %ymm13, 960(%rdi)
    vmovdqu %ymm14, 1024(%rdi)
    vmovdqu %ymm15, 1088(%rdi)
    jmp 4f
3:
    vmovdqu64 %zmm0, 128(%rdi)
    vmovdqu64 %zmm1, 192(%rdi)
    vmovdqu64 %zmm2, 256(%rdi)
    vmovdqu64 %zmm3, 320(%rdi)
    vmovdqu64 %zmm4, 384(%rdi)
    vmovdqu64 %zmm5, 448(%rdi)
    vmovdqu64 %zmm6, 512(%rdi)
    vmovdqu64 %zmm7, 576(%rdi)
    vmovdqu64 %zmm8, 640(%rdi)
    vmovdqu64 %zmm9, 704(%rdi)
    vmovdqu64 %zmm10, 768(%rdi)
    vmovdqu64 %zmm11, 832(%rdi)
    vmovdqu64 %zmm12, 896(%rdi)
    vmovdqu64 %zmm13, 960(%rdi)
    vmovdqu64 %zmm14, 1024(%rdi)
    vmovdqu64 %zmm15, 1088(%rdi)
4:
    testl $0x80, %esi
    jz 5f
    vmovdqu64 %zmm16, 1152(%rdi)
    vmovdqu64 %zmm17, 1216(%rdi)
    vmovdqu64 %zmm18, 1280(%rdi)
    vmovdqu64 %zmm19, 1344(%rdi)
    vmovdqu64 %zmm20, 1408(%rdi)
    vmovdqu64 %zmm21, 1472(%rdi)
    vmovdqu64 %zmm22, 1536(%rdi)
    vmovdqu64 %zmm23, 1600(%rdi)
    vmovdqu64 %zmm24, 1664(%rdi)
    vmovdqu64 %zmm25, 1728(%rdi)
    vmovdqu64 %zmm26, 1792(%rdi)
    vmovdqu64 %zmm27, 1856(%rdi)
    vmovdqu64 %zmm28, 1920(%rdi)
    vmovdqu64 %zmm29, 1984(%rdi)
    vmovdqu64 %zmm30, 2048(%rdi)
    vmovdqu64 %zmm31, 2112(%rdi)
5:
    testl $0x20, %esi
    jz 6f
    kmovq %k0, 64(%rdi)
    kmovq %k1, 72(%rdi)
    kmovq %k2, 80(%rdi)
    kmovq %k3, 88(%rdi)
    kmovq %k4, 96(%rdi)
    kmovq %k5, 104(%rdi)
    kmovq %k6, 112(%rdi)
    kmovq %k7, 120(%rdi)
6:
    ret
    .cfi_endproc
    .size lp_vec_save, .-lp_vec_save

    .globl lp_vec_restore
    .hidden lp_vec_restore
    .type lp_vec_restore, @function
lp_vec_restore:
    .cfi_startproc
    movl 0(%rdi), %esi
    cmpb $0, 16(%rdi)
    je 1f
    fxrstor64 2176(%rdi)           /* x87 and MMX registers (xmm and MXCSR again below) */
    jmp 3f
1:
    fnstcw 20(%rdi)
    movzwl 20(%rdi), %eax
    cmpw 12(%rdi), %ax
    je 2f
    fldcw 12(%rdi)
2:
    fnstsw %ax
    cmpw 14(%rdi), %ax
    je 3f
    /* A handler used the x87 unit: put the status word back through the environment (the
     * stack was empty before, and is again under the ABI). */
    fnstenv 2176(%rdi)
    movzwl 12(%rdi), %eax
    movw %ax, 2176+0(%rdi)
    movzwl 14(%rdi), %eax
    movw %ax, 2176+4(%rdi)
    movw $0xffff, 2176+8(%rdi)
    fldenv 2176(%rdi)
3:
    stmxcsr 20(%rdi)
    movl 20(%rdi), %eax
    cmpl 8(%rdi), %eax
    je 4f
    ldmxcsr 8(%rdi)
4:
    testl $0x40, %esi
    jnz 6f
    testl $0x04, %esi
    jnz 5f
    vmovdqu 128(%rdi), %xmm0
    vmovdqu 192(%rdi), %xmm1
    vmovdqu 256(%rdi), %xmm2
    vmovdqu 320(%rdi), %xmm3
    vmovdqu 384(%rdi), %xmm4
    vmovdqu 448(%rdi), %xmm5
    vmovdqu 512(%rdi), %xmm6
    vmovdqu 576(%rdi), %xmm7
    vmovdqu 640(%rdi), %xmm8
    vmovdqu 704(%rdi), %xmm9
    vmovdqu 768(%rdi), %xmm10
    vmovdqu 832(%rdi), %xmm11
    vmovdqu 896(%rdi), %xmm12
    vmovdqu 960(%rdi), %xmm13
    vmovdqu 1024(%rdi), %xmm14
    vmovdqu 1088(%rdi), %xmm15
    vzeroupper                     /* AVX and ZMM_Hi256 were in their initial state */
    jmp 7f
5:
    vmovdqu 128(%rdi), %ymm0
    vmovdqu 192(%rdi), %ymm1
    vmovdqu 256(%rdi), %ymm2
    vmovdqu 320(%rdi), %ymm3
    vmovdqu 384(%rdi), %ymm4
    vmovdqu 448(%rdi), %ymm5
    vmovdqu 512(%rdi), %ymm6
    vmovdqu 576(%rdi), %ymm7
    vmovdqu 640(%rdi), %ymm8
    vmovdqu 704(%rdi), %ymm9
    vmovdqu 768(%rdi), %ymm10
    vmovdqu 832(%rdi), %ymm11
    vmovdqu 896(%rdi), %ymm12
    vmovdqu 960(%rdi), %ymm13
    vmovdqu 1024(%rdi), %ymm14
    vmovdqu 1088(%rdi), %ymm15
    jmp 7f
6:
    vmovdqu64 128(%rdi), %zmm0
    vmovdqu64 192(%rdi), %zmm1
    vmovdqu64 256(%rdi), %zmm2
    vmovdqu64 320(%rdi), %zmm3
    vmovdqu64 384(%rdi), %zmm4
    vmovdqu64 448(%rdi), %zmm5
    vmovdqu64 512(%rdi), %zmm6
    vmovdqu64 576(%rdi), %zmm7
    vmovdqu64 640(%rdi), %zmm8
    vmovdqu64 704(%rdi), %zmm9
    vmovdqu64 768(%rdi), %zmm10
    vmovdqu64 832(%rdi), %zmm11
    vmovdqu64 896(%rdi), %zmm12
    vmovdqu64 960(%rdi), %zmm13
    vmovdqu64 1024(%rdi), %zmm14
    vmovdqu64 1088(%rdi), %zmm15
7:
    cmpb $0, lp_vec_has_avx512(%rip)
    je 10f
    testl $0x80, %esi
    jz 8f
    vmovdqu64 1152(%rdi), %zmm16
    vmovdqu64 1216(%rdi), %zmm17
    vmovdqu64 1280(%rdi), %zmm18
    vmovdqu64 1344(%rdi), %zmm19
    vmovdqu64 1408(%rdi), %zmm20
    vmovdqu64 1472(%rdi), %zmm21
    vmovdqu64 1536(%rdi), %zmm22
    vmovdqu64 1600(%rdi), %zmm23
    vmovdqu64 1664(%rdi), %zmm24
    vmovdqu64 1728(%rdi), %zmm25
    vmovdqu64 1792(%rdi), %zmm26
    vmovdqu64 1856(%rdi), %zmm27
    vmovdqu64 1920(%rdi), %zmm28
    vmovdqu64 1984(%rdi), %zmm29
    vmovdqu64 2048(%rdi), %zmm30
    vmovdqu64 2112(%rdi), %zmm31
    jmp 9f
8:
    vpxord %xmm16, %xmm16, %xmm16
    vpxord %xmm17, %xmm17, %xmm17
    vpxord %xmm18, %xmm18, %xmm18
    vpxord %xmm19, %xmm19, %xmm19
    vpxord %xmm20, %xmm20, %xmm20
    vpxord %xmm21, %xmm21, %xmm21
    vpxord %xmm22, %xmm22, %xmm22
    vpxord %xmm23, %xmm23, %xmm23
    vpxord %xmm24, %xmm24, %xmm24
    vpxord %xmm25, %xmm25, %xmm25
    vpxord %xmm26, %xmm26, %xmm26
    vpxord %xmm27, %xmm27, %xmm27
    vpxord %xmm28, %xmm28, %xmm28
    vpxord %xmm29, %xmm29, %xmm29
    vpxord %xmm30, %xmm30, %xmm30
    vpxord %xmm31, %xmm31, %xmm31
9:
    testl $0x20, %esi
    jz 11f
    kmovq 64(%rdi), %k0
    kmovq 72(%rdi), %k1
    kmovq 80(%rdi), %k2
    kmovq 88(%rdi), %k3
    kmovq 96(%rdi), %k4
    kmovq 104(%rdi), %k5
    kmovq 112(%rdi), %k6
    kmovq 120(%rdi), %k7
10:
    ret
11:
    kxorw %k0, %k0, %k0
    kxorw %k1, %k1, %k1
    kxorw %k2, %k2, %k2
    kxorw %k3, %k3, %k3
    kxorw %k4, %k4, %k4
    kxorw %k5, %k5, %k5
    kxorw %k6, %k6, %k6
    kxorw %k7, %k7, %k7
    ret
    .cfi_endproc
    .size lp_vec_restore, .-lp_vec_restore

    .section .note.GNU-stack,"",@progbits
