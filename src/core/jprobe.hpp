// jprobes (jprobe.cpp: registration; jprobe_hit.cpp: the hit path).
#pragma once

#include <liveprobe/kprobes.h>

#include "core/error.hpp"

namespace liveprobe::core {

// The kprobe pre handler of every jprobe; the registry runs it after the other pre handlers
// at its address.
int jprobe_pre(struct kprobe *kp, struct pt_regs *regs) noexcept;

Status register_jprobe(struct jprobe *jp);
void unregister_jprobe(struct jprobe *jp);

}  // namespace liveprobe::core
