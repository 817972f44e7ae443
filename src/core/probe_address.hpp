// Where a probe may go: the checks an address passes before a probe is placed there
// (core/registry.cpp calls them with its mutex held). check_no_handlers and
// check_function_entry, for jprobes and kretprobes, are declared in core/registry.hpp.
#pragma once

#include <liveprobe/kprobes.h>

#include <cstdint>
#include <map>
#include <string>

#include "arch/x86_64/insn.hpp"
#include "core/error.hpp"
#include "os/linux/maps.hpp"

namespace liveprobe::core {

struct ProbePoint;

// That addr may hold a probe: mapped, executable, not liveprobe's own code nor the signal
// return trampoline nor the vDSO. *object: the path of its mapping.
Status check_region(uint64_t addr, const os::MapsSnapshot &maps, std::string *object);

// Decodes from the start of the function containing addr, with the original bytes under
// liveprobe's own int3s and jmps (`points`, the registry's), and checks that addr starts an
// instruction; then decodes it into insn.
Status check_instruction(uint64_t addr, const os::MapsSnapshot &maps, const std::map<uint64_t, ProbePoint *> &points,
                         arch::Insn &insn);

// p's address: kp.addr, or kp.symbol_name resolved, plus kp.offset.
Status resolve_address(struct kprobe *p, uint64_t *out);

}  // namespace liveprobe::core
