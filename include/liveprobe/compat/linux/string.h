/* liveprobe compatibility header <linux/string.h> for probe modules: the C library's <string.h>
 * and everything of <liveprobe/module.h>. */
#include <string.h>
#include <liveprobe/module.h>
