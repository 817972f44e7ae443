/* liveprobe compatibility header <linux/fs.h> for probe modules: the system's own <linux/fs.h>
 * first (the kernel's UAPI part, which other UAPI headers include), then everything of
 * <liveprobe/module.h> (API.md section 2), as the kernel's headers do through their includes. */
#include_next <linux/fs.h>
#include <liveprobe/module.h>
