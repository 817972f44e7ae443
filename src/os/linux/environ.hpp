// The process's environment, edited in place.
#pragma once

namespace liveprobe::os {

// Takes every NAME=... out of `environ` itself, whatever unsetenv the process binds: a program
// may define its own (bash does: before its variables are set up, its unsetenv leaves environ
// alone, and a LIVEPROBE_TRACE taken out that way reached every program the shell ran). Call
// it before other threads run (it does not take libc's environment lock).
void erase_env(const char *name) noexcept;

}  // namespace liveprobe::os
