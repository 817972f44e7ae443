// The agent: what serves the `liveprobe` tool from inside a process. It is the library itself
// (API.md section 2): started at load when the environment says so (`liveprobe run` sets
// LIVEPROBE_AGENT=1 with LD_PRELOAD), or by liveprobe_agent_start() (the injector calls it
// after loading the library into a running process).
//
// It adds one thread, named "liveprobe", with every signal blocked (it takes none of the
// program's signals), serving the control socket (agent/channel.hpp); it installs no signal
// handler and changes no signal mask of the program's threads. After fork() the child runs its
// own agent, on its own socket.
#pragma once

#include <liveprobe/kprobes.h>

extern "C" {
// Starts the agent (idempotent): 0, or a negative errno (liveprobe_strerror says why).
LIVEPROBE_API int liveprobe_agent_start(void);
// The same, called by `liveprobe attach` in a process it loaded the library into.
LIVEPROBE_API int liveprobe_agent_start_attached(void);
// The library's version, "MAJOR.MINOR.PATCH".
LIVEPROBE_API const char *liveprobe_version(void);
// Appends one line to the process's log (what `liveprobe dmesg` shows; printk writes there).
// Never blocks; async-signal-safe.
LIVEPROBE_API void liveprobe_log_write(const char *text, size_t len);
// Loads the module LIVEPROBE_INSMOD names (`liveprobe insmod ... -- CMD`), before main: 0 when
// there is none or it loaded; a module that does not load ends the process with status 1.
LIVEPROBE_API int liveprobe_insmod_from_environment(void);
// Starts the trace LIVEPROBE_TRACE describes (`liveprobe trace ... -- CMD`), before main: 0 when
// there is none or it started; a trace that cannot start ends the process with status 1, but
// in an image the tool follows (agent/follow.hpp), which runs on untraced and tells the tool.
LIVEPROBE_API int liveprobe_trace_from_environment(void);
// Called by libliveprobe-start.so before the program executes `path` with `envp`: when a tool
// follows exec there and the program is set-uid or set-gid (not followed: the loader ignores
// LD_PRELOAD for it), the tool is told. errno is left as it was.
LIVEPROBE_API void liveprobe_trace_before_exec(const char *path, char *const envp[]);
}

namespace liveprobe::agent {

// How the agent came to run, for `status`: "preload", "attach" or "api".
void set_start_reason(const char *why) noexcept;

// The connection to the tool that follows this image (`trace -- CMD` following exec,
// agent/follow.hpp), owner of the session LIVEPROBE_TRACE starts: -1 when there is none (the
// program the tool started, a tool that is gone, no following).
int followed_connection();

}  // namespace liveprobe::agent
