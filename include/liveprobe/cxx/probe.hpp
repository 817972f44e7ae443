// liveprobe C++ API: where a probe goes (Target) and the handle that owns a registered probe
// (Probe).
//
// A Probe owns one heap block made when the probe was built: the C API's struct kprobe or
// struct kretprobe first, then the handlers, stored by value (lambdas with their captures; no
// std::function). The C handlers liveprobe calls are static functions that find the block from
// the struct they are given and call the stored handlers directly: a hit allocates nothing and
// goes through no indirection beyond the C API's own.
//
// Destroying a Probe unregisters it; it returns once no other thread runs its handlers (the C
// API's contract), and then frees the block. A probe's own handlers must not destroy it.
// Probes are move-only; a moved-from Probe owns nothing (registered() is false).
#pragma once

#include <liveprobe/cxx/result.hpp>
#include <liveprobe/kprobes.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>

namespace liveprobe {

// Where a probe goes: an address, or a symbol name (the C API's rules: "name", "OBJECT:name",
// mangled or demangled C++) plus an offset into it.
class Target {
public:
    Target(const void *address) noexcept : address_(address) {}
    template <typename R, typename... A>
    Target(R (*function)(A...)) noexcept : address_(reinterpret_cast<const void *>(function))
    {
    }
    template <typename R, typename... A>
    Target(R (*function)(A..., ...)) noexcept : address_(reinterpret_cast<const void *>(function))
    {
    }
    Target(const char *symbol, unsigned offset = 0) : symbol_(symbol ? symbol : ""), offset_(offset) {}
    Target(std::string symbol, unsigned offset = 0) : symbol_(std::move(symbol)), offset_(offset) {}

    const void *address() const noexcept { return address_; }
    const std::string &symbol() const noexcept { return symbol_; }
    unsigned offset() const noexcept { return offset_; }
    bool by_symbol() const noexcept { return address_ == nullptr; }

private:
    const void *address_ = nullptr;
    std::string symbol_;
    unsigned offset_ = 0;
};

// A probe's counters, summed over threads.
struct Counters {
    unsigned long hits = 0;    // handler runs (for return probes: calls entered)
    unsigned long missed = 0;  // hits whose handlers did not run: a handler was already running
                               // on the thread, or (return probes) maxactive calls were in flight
    unsigned long faults = 0;  // handler runs abandoned on a fault
};

// A probe's state.
struct State {
    bool enabled = false;
    bool optimized = false;                  // hits take the jump path (no trap)
    const char *why_not_optimized = nullptr; // null when optimized: one precise reason otherwise
};

namespace detail {

enum class Kind : unsigned char { kprobe, kretprobe };

// The first part of every block. The C struct is its first member: the C handlers get back to
// the block from the struct kprobe / struct kretprobe they are given.
struct Header {
    union {
        struct kprobe kp;
        struct kretprobe rp;
    };
    Kind kind;
    void (*destroy)(Header *) noexcept;  // deletes the whole block
    char *symbol;                        // owned copy of kp.symbol_name (new[]), or null

    explicit Header(Kind k) noexcept : rp{}, kind(k), destroy(nullptr), symbol(nullptr) {}
    struct kprobe *c_kprobe() noexcept { return kind == Kind::kprobe ? &kp : &rp.kp; }
    const struct kprobe *c_kprobe() const noexcept { return kind == Kind::kprobe ? &kp : &rp.kp; }
};

// Fills the C struct's location from `t`.
inline void place(Header *h, const Target &t)
{
    struct kprobe *kp = h->c_kprobe();
    if (t.by_symbol()) {
        h->symbol = new char[t.symbol().size() + 1];
        std::memcpy(h->symbol, t.symbol().c_str(), t.symbol().size() + 1);
        kp->symbol_name = h->symbol;
        kp->offset = t.offset();
    } else {
        kp->addr = static_cast<kprobe_opcode_t *>(const_cast<void *>(t.address()));
    }
}

// A block made but not registered, or handed over to a Probe once registered.
class Owned {
public:
    Owned() = default;
    explicit Owned(Header *h) noexcept : h_(h) {}
    Owned(Owned &&o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
    Owned &operator=(Owned &&o) noexcept
    {
        if (this != &o) {
            reset();
            h_ = std::exchange(o.h_, nullptr);
        }
        return *this;
    }
    ~Owned() { reset(); }
    Header *get() const noexcept { return h_; }
    Header *release() noexcept { return std::exchange(h_, nullptr); }
    void reset() noexcept
    {
        if (Header *h = std::exchange(h_, nullptr)) {
            delete[] h->symbol;
            h->destroy(h);
        }
    }

private:
    Header *h_ = nullptr;
};

}  // namespace detail

class Probe;
namespace detail {
Probe adopt(Owned block) noexcept;
}

// A registered probe; unregisters it when destroyed.
class [[nodiscard]] Probe {
public:
    Probe() = default;
    Probe(Probe &&o) noexcept = default;
    Probe &operator=(Probe &&o) noexcept
    {
        if (this != &o) {
            reset();
            block_ = std::move(o.block_);
        }
        return *this;
    }
    Probe(const Probe &) = delete;
    Probe &operator=(const Probe &) = delete;
    ~Probe() { reset(); }

    // Whether this handle owns a registered probe (false once moved from or reset).
    bool registered() const noexcept { return block_.get() != nullptr; }
    explicit operator bool() const noexcept { return registered(); }

    // Unregisters now (returns once no other thread runs its handlers). No-op if empty.
    void reset() noexcept
    {
        detail::Header *h = block_.get();
        if (!h) return;
        if (h->kind == detail::Kind::kprobe)
            unregister_kprobe(&h->kp);
        else
            unregister_kretprobe(&h->rp);
        block_.reset();
    }

    // The probed address (resolved from the symbol at registration); null if empty.
    void *address() const noexcept { return registered() ? kp()->addr : nullptr; }

    // Disarms / re-arms the probe; the counters stay.
    Result<void> disable() { return toggle(false); }
    Result<void> enable() { return toggle(true); }

    Counters counters() const noexcept
    {
        Counters c;
        struct liveprobe_info info {};
        if (!registered() || liveprobe_kprobe_info(kp(), &info) != 0) return c;
        c.hits = info.hits;
        c.missed = info.nmissed;
        if (block_.get()->kind == detail::Kind::kretprobe)
            c.missed += static_cast<unsigned long>(__atomic_load_n(&block_.get()->rp.nmissed, __ATOMIC_RELAXED));
        c.faults = liveprobe_kprobe_faults(kp());
        return c;
    }

    State state() const noexcept
    {
        State s;
        struct liveprobe_info info {};
        if (!registered() || liveprobe_kprobe_info(kp(), &info) != 0) return s;
        s.enabled = !(__atomic_load_n(&kp()->flags, __ATOMIC_RELAXED) & KPROBE_FLAG_DISABLED);
        s.optimized = info.optimized != 0;
        s.why_not_optimized = info.why_not_optimized;
        return s;
    }

    // The C structs underneath, for code that mixes both APIs (read-only use).
    const struct kprobe *c_kprobe() const noexcept { return registered() ? kp() : nullptr; }
    const struct kretprobe *c_kretprobe() const noexcept
    {
        return registered() && block_.get()->kind == detail::Kind::kretprobe ? &block_.get()->rp : nullptr;
    }

private:
    friend Probe detail::adopt(detail::Owned) noexcept;
    explicit Probe(detail::Owned block) noexcept : block_(std::move(block)) {}

    const struct kprobe *kp() const noexcept { return block_.get()->c_kprobe(); }

    Result<void> toggle(bool on)
    {
        detail::Header *h = block_.get();
        if (!h) return Error{-EINVAL, "this probe handle is empty (moved from or reset)"};
        int r = h->kind == detail::Kind::kprobe ? (on ? enable_kprobe(&h->kp) : disable_kprobe(&h->kp))
                                                : (on ? enable_kretprobe(&h->rp) : disable_kretprobe(&h->rp));
        if (r < 0) return detail::last_error(r);
        return {};
    }

    detail::Owned block_;
};

namespace detail {

inline Probe adopt(Owned block) noexcept { return Probe(std::move(block)); }

// Registers one prepared block: a Probe that owns it, or the error (the block is freed).
inline Result<Probe> attach(Owned block)
{
    Header *h = block.get();
    int r = h->kind == Kind::kprobe ? register_kprobe(&h->kp) : register_kretprobe(&h->rp);
    if (r < 0) return last_error(r);
    return adopt(std::move(block));
}

// The block type of a set of handlers: Header first, then the handlers by value.
template <typename Handlers>
struct Block {
    Header header;
    Handlers handlers;

    Block(Kind k, Handlers h) : header(k), handlers(std::move(h)) { header.destroy = &destroy; }
    static void destroy(Header *h) noexcept { delete reinterpret_cast<Block *>(h); }
    static Block *of(struct kprobe *kp) noexcept { return reinterpret_cast<Block *>(kp); }
    static Block *of(struct kretprobe *rp) noexcept { return reinterpret_cast<Block *>(rp); }
};

template <typename Handlers>
Owned make_block(Kind k, Handlers h, const Target &t)
{
    auto *b = new Block<Handlers>(k, std::move(h));
    Owned o(&b->header);
    place(&b->header, t);
    return o;
}

}  // namespace detail
}  // namespace liveprobe
