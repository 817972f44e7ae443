/* liveprobe compatibility header <linux/limits.h> for probe modules: the system's own <linux/limits.h>
 * first (glibc's headers include it and need what it defines), then everything of
 * <liveprobe/module.h> (API.md section 2), as the kernel's headers do through their includes. */
#include_next <linux/limits.h>
#include <liveprobe/module.h>
