/* liveprobe: the kernel's short integer types (u8..u64, s8..s64; u64 is unsigned long long, s64
 * long long, as in the kernel), for probe modules. Included by <liveprobe/module.h> and by the
 * compatibility <linux/types.h>, which glibc's own headers include and so must stay this small. */
#ifndef LIVEPROBE_KERNEL_TYPES_H
#define LIVEPROBE_KERNEL_TYPES_H
typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;
typedef signed char s8;
typedef short s16;
typedef int s32;
typedef long long s64;
#endif /* LIVEPROBE_KERNEL_TYPES_H */
