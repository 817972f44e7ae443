// Notices objects leaving the process: dlclose() is interposed, and after libc's dlclose
// returns, the registered callback runs (it checks which probed objects are gone).
#pragma once

namespace liveprobe::os {

using UnloadCallback = void (*)();
void set_unload_callback(UnloadCallback cb);

}  // namespace liveprobe::os
