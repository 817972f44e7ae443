/* liveprobe compatibility header <linux/types.h> for probe modules: the system's own
 * <linux/types.h> (glibc's and the kernel's UAPI headers include it), and the kernel's short
 * integer types. Kept this small on purpose: it is included from inside system headers. */
#include_next <linux/types.h>
#ifndef LIVEPROBE_KERNEL_INT_TYPES
#define LIVEPROBE_KERNEL_INT_TYPES
typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;
typedef signed char s8;
typedef short s16;
typedef int s32;
typedef long long s64;
#endif
