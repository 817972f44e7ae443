/* liveprobe compatibility header <linux/types.h> for probe modules: the system's own
 * <linux/types.h> (glibc's and the kernel's UAPI headers include it), and the kernel's short
 * integer types. Kept this small on purpose: it is included from inside system headers. */
#include_next <linux/types.h>
#include <liveprobe/kernel_types.h>
