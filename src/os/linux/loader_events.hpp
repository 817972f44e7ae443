// Notices objects leaving the process: dlclose() is interposed, and after libc's dlclose
// returns, the registered callback runs (it checks which probed objects are gone).
#pragma once

namespace liveprobe::os {

using UnloadCallback = void (*)();
void set_unload_callback(UnloadCallback cb);
// Runs the callback now: after a dlclose that did not go through the interposed one. A library
// loaded by dlopen (the agent, attached) binds its own dlclose calls to libc's.
void notify_unloaded();

}  // namespace liveprobe::os
