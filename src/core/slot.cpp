#include "core/slot.hpp"
#include "core/immortal.hpp"

#include <cstddef>
#include <cstring>
#include <map>
#include <string>

#include "os/linux/code_alloc.hpp"
#include "os/linux/text_poke.hpp"

namespace liveprobe::core {
namespace {

// Slots are immortal and reused for the same address and bytes (probe.hpp): a thread may
// still be executing one after its probe is gone.
struct Cached {
    uint64_t slot;
    bool written;
};
Immortal<std::map<std::pair<uint64_t, std::string>, Cached>> g_slots_storage;
std::map<std::pair<uint64_t, std::string>, Cached> &g_slots = g_slots_storage.value;

std::pair<uint64_t, std::string> key_of(const ProbePoint *pp)
{
    return {pp->addr, std::string(reinterpret_cast<const char *>(pp->insn.bytes), pp->insn.len)};
}

}  // namespace

Status prepare_slot(ProbePoint *pp)
{
    if (pp->insn.cls != arch::InsnClass::kOutOfLine) return Status::Ok();
    auto key = key_of(pp);
    auto it = g_slots.find(key);
    if (it != g_slots.end() && it->second.written) {
        pp->slot = it->second.slot;
        return Status::Ok();
    }
    // A slot allocated for this address and bytes but never written (its point went away
    // first) is reused; its bytes are built again for this point.
    uint64_t slot = it != g_slots.end() ? it->second.slot : os::alloc_code(pp->addr, os::kSlotBlock);
    if (!slot) return Fail(-ENOMEM, "no memory for out-of-line code within +-2 GiB of {:#x}", pp->addr);
    uint8_t *buf = pp->slot_bytes;
    std::memset(buf, 0xcc, kSlotSize);
    SlotHeader h{pp->addr, pp->addr + pp->insn.len};
    std::memcpy(buf, &h, sizeof h);
    size_t trap_off = 0, jump_trap_off = 0;
    int n1 = arch::build_slot(pp->insn, slot + kSlotJumpOffset, arch::SlotTail::kTrap, buf + kSlotJumpOffset,
                              kSlotTrapOffset - kSlotJumpOffset - 5, &jump_trap_off);
    int n2 = arch::build_slot(pp->insn, slot + kSlotTrapOffset, arch::SlotTail::kTrap, buf + kSlotTrapOffset,
                              kSlotSize - kSlotTrapOffset, &trap_off);
    if (n1 >= 0) {
        // The jump variant continues through the header's `next`: jmp *next(%rip).
        uint8_t *j = buf + kSlotJumpOffset + jump_trap_off;
        uint64_t after = slot + kSlotJumpOffset + jump_trap_off + 6;
        int32_t rel = static_cast<int32_t>(int64_t(slot + offsetof(SlotHeader, next)) - int64_t(after));
        j[0] = 0xff;
        j[1] = 0x25;
        std::memcpy(j + 2, &rel, 4);
    }
    if (n1 < 0 || n2 < 0)
        return Fail(-ENOMEM, "cannot relocate the instruction at {:#x} to {:#x}: {}", pp->addr, slot,
                    (n1 == -ERANGE || n2 == -ERANGE) ? "its RIP-relative operand is out of reach" : "slot too small");
    g_slots.emplace(key, Cached{slot, false});  // no-op when it was there, unwritten
    pp->slot = slot;
    return Status::Ok();
}

Status write_slot(ProbePoint *pp)
{
    if (!pp->slot) return Status::Ok();
    auto it = g_slots.find(key_of(pp));
    if (it == g_slots.end() || it->second.written) return Status::Ok();
    if (Status s = os::poke_text(pp->slot, pp->slot_bytes, kSlotSize); !s.ok()) return s;
    it->second.written = true;
    return Status::Ok();
}

bool slot_written(const ProbePoint *pp)
{
    auto it = g_slots.find(key_of(pp));
    return it != g_slots.end() && it->second.written;
}

}  // namespace liveprobe::core
