/* Offsets inside struct ThreadRecord (core/thread_state.hpp) that the return trampoline
 * (kretprobe_trampoline.S) uses, checked by static_assert in core/kret_hit.cpp. Shared by C++
 * and assembly: plain #defines only. */
#pragma once

#define LP_KRET_FRAMES_USED 744 /* uint32_t kret_frames_used */
#define LP_KRET_FRAMES 752      /* KretFrame kret_frames[4] */
#define LP_KRET_FRAME_SIZE 176  /* struct pt_regs (168 bytes), then the frame's index */
#define LP_KRET_FRAME_INDEX 168
