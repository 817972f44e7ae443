/* liveprobe compatibility header <linux/kallsyms.h> for probe modules: gives everything of
 * <liveprobe/module.h> (API.md section 2), as the kernel's headers do through their includes. */
#include <liveprobe/module.h>
