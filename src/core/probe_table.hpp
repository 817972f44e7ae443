// The address -> probe point table read by the hit path.
//
// Open addressing over (key, value) pairs. Keys are never removed: removing a probe point
// nulls its value, and registering at that address again reuses the key. The table only
// grows; an outgrown array is kept forever (a reader may still be walking it), which costs at
// most as much memory again as the live table.
//
// Concurrency contract: lookup() is lock-free and async-signal-safe, from any thread.
// insert() and remove() are called with the registry mutex held.
#pragma once

#include <atomic>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace liveprobe::core {

struct ProbePoint;

class ProbeTable {
public:
    ProbePoint *lookup(uint64_t addr) const noexcept;
    void insert(uint64_t addr, ProbePoint *pp);  // addr must not map to a live point
    void remove(uint64_t addr);                  // seq_cst: see dispatch's quiescence protocol

    // The address's site: an immortal cell holding the same probe point as the table (null
    // when none), which a detour names directly, so the jump path needs no hash look-up.
    // Created on first use; registry mutex.
    using Site = std::atomic<ProbePoint *>;
    Site *site(uint64_t addr);

private:
    struct Slot {
        std::atomic<uint64_t> key{0};
        std::atomic<ProbePoint *> value{nullptr};
    };
    struct Array {
        size_t mask;  // capacity - 1
        Slot *slots;
    };
    static size_t hash(uint64_t addr) noexcept { return (addr * 0x9E3779B97F4A7C15ull) >> 20; }
    Slot *find_slot(Array *a, uint64_t addr) const noexcept;
    void grow();

    std::atomic<Array *> array_{nullptr};
    size_t used_keys_ = 0;  // registry mutex
    // Arrays replaced by a bigger one: a reader may still be searching one, so they are kept
    // (reachable, as the deliberate keep-alive they are). Registry mutex.
    std::vector<Array *> outgrown_;
    std::unordered_map<uint64_t, Site *> sites_;  // registry mutex; never freed
};

ProbeTable &probe_table();

}  // namespace liveprobe::core
