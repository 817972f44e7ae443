/* Offsets the light dispatcher (jump_light.S) reads, shared by that assembly and the C++ that
 * checks them against the structures (jump_light.cpp static_asserts). Preprocessor only. */
#ifndef LIVEPROBE_ARCH_X86_64_LIGHT_LAYOUT_H
#define LIVEPROBE_ARCH_X86_64_LIGHT_LAYOUT_H

/* core::ThreadRecord */
#define LP_REC_BUSY_SLOT0 0x08   /* busy.slot[0] */
#define LP_REC_BUSY_DEPTH 0x28   /* busy.depth */
#define LP_REC_IN_HANDLER 0x30
#define LP_REC_JUMP_KS 0x48
#define LP_REC_JUMP_LIGHT 0x58
#define LP_REC_COUNTERS 0x60
#define LP_REC_KRET_LIGHT_SP 0xb0   /* kret_light_sp */
#define LP_REC_KRET_LIGHT_H 0xb8    /* kret_light_h */
/* core::ProbePoint */
#define LP_PP_LIGHT 0x18
/* core::KprobeState */
#define LP_KS_KP 0x00
#define LP_KS_ID 0x10
#define LP_KS_ENABLED 0x28
#define LP_KS_LIGHT_FN 0x30
/* struct kprobe */
#define LP_KP_PRE_HANDLER 0x18

/* The light entry's frame (detour.hpp): flags at 0, register r at 8 + 8r. */
#define LP_LIGHT_FRAME 136
/* The light entry's finish (detour.cpp emit_light_finish), right after its call: the bytes a
 * return skips to leave it out. */
#define LP_LIGHT_FINISH_SIZE 25

#endif
