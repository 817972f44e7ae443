// Out-of-line copies of probed instructions for the breakpoint path ("slots", probe.hpp).
// Prepared at registration (allocated near the address, bytes built: a relocation that
// cannot work fails registration), written only when the breakpoint path needs them: a point
// optimized from the start never writes its slot. Registry mutex held.
#pragma once

#include "core/error.hpp"
#include "core/probe.hpp"

namespace liveprobe::core {

Status prepare_slot(ProbePoint *pp);
Status write_slot(ProbePoint *pp);  // no-op when written already (or the insn is emulated)
bool slot_written(const ProbePoint *pp);

}  // namespace liveprobe::core
