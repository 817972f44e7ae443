#include "agent/module_quiesce.hpp"

#include <cerrno>

#include "core/probe.hpp"
#include "os/linux/code_alloc.hpp"
#include "os/linux/maps.hpp"
#include "os/linux/stop_threads.hpp"

namespace liveprobe::agent {
namespace {

constexpr uint64_t kStackScan = 256 * 1024;

bool inside(const std::vector<std::pair<uint64_t, uint64_t>> &text, uint64_t a, uint64_t before = 0)
{
    for (auto [s, e] : text)
        if (a >= s + before && a < e) return true;
    return false;
}

// v, a word in the text, follows a call: e8 rel32, or ff /2 (call through a register or memory)
// with 0, 1 or 4 bytes of displacement, a SIB byte or a REX prefix. The bytes read lie in the text.
bool after_call(const std::vector<std::pair<uint64_t, uint64_t>> &text, uint64_t v)
{
    if (!inside(text, v, 7)) return false;
    auto b = [v](int back) { return *reinterpret_cast<const volatile uint8_t *>(v - back); };
    if (b(5) == 0xe8) return true;
    for (int len : {2, 3, 4, 6, 7})
        if (b(len) == 0xff && (b(len - 1) & 0x38) == 0x10) return true;
    return false;
}

}  // namespace

int find_occupant(const std::vector<std::pair<uint64_t, uint64_t>> &text, Occupant *out, std::string *why)
{
    std::vector<os::Mapping> maps = os::read_maps();  // before the stop: it allocates
    os::WorldStop world;
    if (Status s = world.stop(); !s.ok()) {
        *why = s.reason;
        return s.err < 0 ? s.err : -EPERM;
    }
    int found = 0;
    for (const os::StoppedThread &t : world.threads()) {
        if (inside(text, t.ip)) {
            *out = Occupant{t.tid, t.ip, false};
            found = 1;
            break;
        }
        uint64_t block = 0;
        size_t kind = os::code_block(t.ip, &block);
        uint64_t orig = 0;
        if (kind == os::kSlotBlock) orig = reinterpret_cast<const core::SlotHeader *>(block)->orig;
        if (kind == os::kDetourBlock) orig = reinterpret_cast<const core::DetourHeader *>(block)->addr;
        if (orig && inside(text, orig)) {
            *out = Occupant{t.tid, t.ip, false};
            found = 1;
            break;
        }
        const os::Mapping *stack = nullptr;
        for (const os::Mapping &m : maps)
            if (t.sp >= m.start && t.sp < m.end) stack = &m;
        if (stack == nullptr || !stack->r) continue;  // a stack mapped since the snapshot: not scanned
        uint64_t end = stack->end - t.sp > kStackScan ? t.sp + kStackScan : stack->end;
        for (uint64_t a = t.sp & ~uint64_t{7}; a + 8 <= end; a += 8) {
            uint64_t v = *reinterpret_cast<const volatile uint64_t *>(a);
            if (inside(text, v) && after_call(text, v)) {
                *out = Occupant{t.tid, v, true};
                found = 1;
                break;
            }
        }
        if (found) break;
    }
    world.resume();
    return found;
}

}  // namespace liveprobe::agent
