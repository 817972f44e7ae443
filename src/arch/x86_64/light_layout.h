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
#define LP_REC_KRET_BUSY_SLOT0 0x70   /* kret_busy.slot[0] */
#define LP_REC_KRET_BUSY_DEPTH 0x90   /* kret_busy.depth */
#define LP_REC_RET_TOP 0x98
#define LP_REC_KRET_LIGHT_SP 0xb0   /* kret_light_sp */
#define LP_REC_KRET_LIGHT_H 0xb8    /* kret_light_h */
#define LP_REC_KRET_LIGHT 0xf0
#define LP_REC_KRET_CACHE 0x300     /* kret_cache[0]; an entry is 32 bytes: ks, hot, head, n */
#define LP_CACHE_HEAD 0x10          /* KretCache::head, the list of instances after hot */
#define LP_CACHE_N 0x18             /* KretCache::n (32 bits), how many on the list */
#define LP_CACHE_MAX 8              /* ThreadRecord::kKretCacheMax */
#define LP_REC_KRET_SEEN 0xb00      /* kret_seen_unregistrations */
/* core::Inst, then its struct kretprobe_instance (rp, ret_addr, ...) */
#define LP_INST_BELOW 0x00
#define LP_INST_SLOT 0x08
#define LP_INST_KS 0x10
#define LP_INST_NEXT_FREE 0x18
#define LP_INST_RI 0x20
#define LP_RI_RET_ADDR 0x08
#define LP_RI_TID 0x10
#define LP_RI_DATA 0x20
/* core::KretState */
#define LP_KRS_RP 0x00
#define LP_KRS_LIVE 0x50
#define LP_KRS_RETURN_LIGHT 0x56
#define LP_KRS_ENTRY_BARE 0x52
#define LP_KRS_ENTRY_DIRECT 0x53
#define LP_KRS_RETURN_SAVES 0x57
#define LP_KRS_ENTRY_STAMP 0x59
#define LP_KRS_RETURN_FEW 0x5a
#define LP_KRS_RETURN_INLINE 0x5b
#define LP_KRS_CACHE_SLOT 0x60
/* struct kretprobe (its kprobe first: kp->__lp_reserved[0] is the KretState) */
#define LP_KP_KRET_STATE 0x48
#define LP_RP_HANDLER 0x68
#define LP_RP_ENTRY_HANDLER 0x70
/* core::ProbePoint */
#define LP_PP_LIGHT 0x18
/* core::KprobeState */
#define LP_KS_KP 0x00
#define LP_KS_ID 0x10
#define LP_KS_ENABLED 0x28
#define LP_KS_UNCOUNTED 0x2a
#define LP_KS_LIGHT_FN 0x30
/* struct kprobe */
#define LP_KP_PRE_HANDLER 0x18

/* The light entry's frame (detour.hpp): flags at 0, register r at 8 + 8r. */
#define LP_LIGHT_FRAME 136
/* The light entry's finish (detour.cpp emit_light_finish), right after its call: the bytes a
 * return skips to leave it out. */
#define LP_LIGHT_FINISH_SIZE 25

#endif
