#include "core/probe_table.hpp"

#include <new>

namespace liveprobe::core {

ProbeTable &probe_table()
{
    // Never destroyed: its sites are immortal (detours point at them), and a thread may still
    // hit a probe while the process exits.
    static ProbeTable *t = new ProbeTable;
    return *t;
}

ProbeTable::Slot *ProbeTable::find_slot(Array *a, uint64_t addr) const noexcept
{
    for (size_t i = hash(addr) & a->mask;; i = (i + 1) & a->mask) {
        uint64_t k = a->slots[i].key.load(std::memory_order_acquire);
        if (k == addr || k == 0) return &a->slots[i];
    }
}

ProbePoint *ProbeTable::lookup(uint64_t addr) const noexcept
{
    Array *a = array_.load(std::memory_order_seq_cst);
    if (!a) return nullptr;
    Slot *s = find_slot(a, addr);
    if (s->key.load(std::memory_order_acquire) != addr) return nullptr;
    return s->value.load(std::memory_order_seq_cst);
}

void ProbeTable::grow()
{
    Array *old = array_.load(std::memory_order_relaxed);
    size_t cap = old ? (old->mask + 1) * 2 : 1024;
    auto *a = new Array{cap - 1, new Slot[cap]};
    used_keys_ = 0;
    if (old) {
        for (size_t i = 0; i <= old->mask; ++i) {
            ProbePoint *v = old->slots[i].value.load(std::memory_order_relaxed);
            if (!v) continue;
            uint64_t k = old->slots[i].key.load(std::memory_order_relaxed);
            Slot *s = find_slot(a, k);
            s->value.store(v, std::memory_order_relaxed);
            s->key.store(k, std::memory_order_relaxed);
            ++used_keys_;
        }
    }
    array_.store(a, std::memory_order_seq_cst);  // the old array stays valid for readers
    if (old) outgrown_.push_back(old);
}

void ProbeTable::insert(uint64_t addr, ProbePoint *pp)
{
    Array *a = array_.load(std::memory_order_relaxed);
    if (!a || (used_keys_ + 1) * 2 > a->mask + 1) {
        grow();
        a = array_.load(std::memory_order_relaxed);
    }
    Slot *s = find_slot(a, addr);
    if (s->key.load(std::memory_order_relaxed) == 0) ++used_keys_;
    // Value before key: a reader that finds the key finds its value.
    s->value.store(pp, std::memory_order_seq_cst);
    s->key.store(addr, std::memory_order_release);
    site(addr)->store(pp, std::memory_order_seq_cst);
}

ProbeTable::Site *ProbeTable::site(uint64_t addr)
{
    auto [it, fresh] = sites_.try_emplace(addr, nullptr);
    if (fresh) it->second = new Site(nullptr);
    return it->second;
}

void ProbeTable::remove(uint64_t addr)
{
    Array *a = array_.load(std::memory_order_relaxed);
    if (!a) return;
    Slot *s = find_slot(a, addr);
    if (s->key.load(std::memory_order_relaxed) == addr) s->value.store(nullptr, std::memory_order_seq_cst);
    if (auto it = sites_.find(addr); it != sites_.end()) it->second->store(nullptr, std::memory_order_seq_cst);
}

}  // namespace liveprobe::core
