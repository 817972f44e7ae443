// liveprobe C++ API: untyped kprobes and kretprobes, the C API's probes with lambdas.
//
//   auto p = liveprobe::kprobe({"parse", 0x12})
//                .pre([&](pt_regs &r) { seen = r.ax; })
//                .post([&](pt_regs &r) { ... })
//                .attach();
//
//   auto r = liveprobe::kretprobe("parse")
//                .entry([&](kretprobe_instance &ri, pt_regs &r) { ... })
//                .on_return([&](kretprobe_instance &ri, pt_regs &r) { ... })
//                .data_size(16)
//                .attach();
//
// The handlers have the C API's semantics (API.md section 1); they get references instead of
// pointers and may return void where the C handler returns 0. They must not throw.
#pragma once

#include <liveprobe/cxx/probe.hpp>
#include <liveprobe/cxx/typed.hpp>

#include <type_traits>
#include <utility>

namespace liveprobe {
namespace detail {

// The C return value of a handler that returns void (0) or something convertible to int.
template <typename F, typename... A>
inline int call_int(F &f, A &&...a) noexcept
{
    if constexpr (std::is_void_v<std::invoke_result_t<F &, A...>>) {
        f(std::forward<A>(a)...);
        return 0;
    } else {
        return static_cast<int>(f(std::forward<A>(a)...));
    }
}

template <typename Pre, typename Post, typename Fault>
struct KprobeHandlers {
    [[no_unique_address]] Pre pre;
    [[no_unique_address]] Post post;
    [[no_unique_address]] Fault fault;

    static int c_pre(struct kprobe *kp, struct pt_regs *regs) noexcept
    {
        return call_int(Block<KprobeHandlers>::of(kp)->handlers.pre, *regs);
    }
    static void c_post(struct kprobe *kp, struct pt_regs *regs, unsigned long) noexcept
    {
        Block<KprobeHandlers>::of(kp)->handlers.post(*regs);
    }
    static int c_fault(struct kprobe *kp, struct pt_regs *regs, int trapnr) noexcept
    {
        return call_int(Block<KprobeHandlers>::of(kp)->handlers.fault, *regs, trapnr);
    }
};

template <typename Entry, typename Return, typename Unwind>
struct KretprobeHandlers {
    [[no_unique_address]] Entry entry;
    [[no_unique_address]] Return ret;
    [[no_unique_address]] Unwind unwind;

    static KretprobeHandlers &of(struct kretprobe_instance *ri) noexcept
    {
        return Block<KretprobeHandlers>::of(ri->rp)->handlers;
    }
    static int c_entry(struct kretprobe_instance *ri, struct pt_regs *regs) noexcept
    {
        return call_int(of(ri).entry, *ri, *regs);
    }
    static int c_ret(struct kretprobe_instance *ri, struct pt_regs *regs) noexcept
    {
        return call_int(of(ri).ret, *ri, *regs);
    }
    static int c_unwind(struct kretprobe_instance *ri, struct pt_regs *) noexcept
    {
        return call_int(of(ri).unwind, *ri);
    }
};

}  // namespace detail

// A kprobe being built: kprobe(target), then pre / post / fault / options, then attach()
// (or Batch::add).
template <typename Pre = detail::Nothing, typename Post = detail::Nothing, typename Fault = detail::Nothing>
class Kprobe {
public:
    explicit Kprobe(Target t) : target_(std::move(t)) {}
    Kprobe(Target t, Options o, Pre pre, Post post, Fault fault)
        : target_(std::move(t)), options_(o), pre_(std::move(pre)), post_(std::move(post)), fault_(std::move(fault))
    {
    }

    // Before the probed instruction: f(pt_regs&), returning void, or non-zero / true when it
    // changed regs.ip (the instruction and post handlers are then skipped).
    template <typename F>
    Kprobe<F, Post, Fault> pre(F f) &&
    {
        static_assert(std::is_invocable_v<F &, struct pt_regs &>, "liveprobe: pre handler is f(pt_regs&)");
        return {std::move(target_), options_, std::move(f), std::move(post_), std::move(fault_)};
    }
    // After the probed instruction: f(pt_regs&).
    template <typename F>
    Kprobe<Pre, F, Fault> post(F f) &&
    {
        static_assert(std::is_invocable_v<F &, struct pt_regs &>, "liveprobe: post handler is f(pt_regs&)");
        return {std::move(target_), options_, std::move(pre_), std::move(f), std::move(fault_)};
    }
    // When a handler of this probe faults: f(pt_regs&, int signal).
    template <typename F>
    Kprobe<Pre, Post, F> fault(F f) &&
    {
        static_assert(std::is_invocable_v<F &, struct pt_regs &, int>, "liveprobe: fault handler is f(pt_regs&, int)");
        return {std::move(target_), options_, std::move(pre_), std::move(post_), std::move(f)};
    }
    Kprobe &&options(Options o) &&
    {
        options_ = o;
        return std::move(*this);
    }

    Result<Probe> attach() &&
    {
        return detail::attach(std::move(*this).prepare());
    }

    detail::Owned prepare() &&
    {
        using H = detail::KprobeHandlers<Pre, Post, Fault>;
        detail::Owned o =
            detail::make_block(detail::Kind::kprobe, H{std::move(pre_), std::move(post_), std::move(fault_)}, target_);
        struct kprobe &kp = o.get()->kp;
        if constexpr (!std::is_same_v<Pre, detail::Nothing>) kp.pre_handler = &H::c_pre;
        if constexpr (!std::is_same_v<Post, detail::Nothing>) kp.post_handler = &H::c_post;
        if constexpr (!std::is_same_v<Fault, detail::Nothing>) kp.fault_handler = &H::c_fault;
        if (options_.disabled) kp.flags |= KPROBE_FLAG_DISABLED;
        return o;
    }

private:
    Target target_;
    Options options_{};
    [[no_unique_address]] Pre pre_{};
    [[no_unique_address]] Post post_{};
    [[no_unique_address]] Fault fault_{};
};

inline Kprobe<> kprobe(Target t) { return Kprobe<>(std::move(t)); }

// A kretprobe being built: kretprobe(target), then entry / on_return / on_unwind / data_size /
// options, then attach() (or Batch::add).
template <typename Entry = detail::Nothing, typename Return = detail::Nothing, typename Unwind = detail::Nothing>
class Kretprobe {
public:
    explicit Kretprobe(Target t) : target_(std::move(t)) {}
    Kretprobe(Target t, Options o, std::size_t data_size, Entry e, Return r, Unwind u)
        : target_(std::move(t)), options_(o), data_size_(data_size), entry_(std::move(e)), ret_(std::move(r)),
          unwind_(std::move(u))
    {
    }

    // At the entry: f(kretprobe_instance&, pt_regs&), returning void, or non-zero for no
    // return handler for this call.
    template <typename F>
    Kretprobe<F, Return, Unwind> entry(F f) &&
    {
        static_assert(std::is_invocable_v<F &, struct kretprobe_instance &, struct pt_regs &>,
                      "liveprobe: entry handler is f(kretprobe_instance&, pt_regs&)");
        return {std::move(target_), options_, data_size_, std::move(f), std::move(ret_), std::move(unwind_)};
    }
    // At the return: f(kretprobe_instance&, pt_regs&).
    template <typename F>
    Kretprobe<Entry, F, Unwind> on_return(F f) &&
    {
        static_assert(std::is_invocable_v<F &, struct kretprobe_instance &, struct pt_regs &>,
                      "liveprobe: return handler is f(kretprobe_instance&, pt_regs&)");
        return {std::move(target_), options_, data_size_, std::move(entry_), std::move(f), std::move(unwind_)};
    }
    // For a call that left without returning: f(kretprobe_instance&).
    template <typename F>
    Kretprobe<Entry, Return, F> on_unwind(F f) &&
    {
        static_assert(std::is_invocable_v<F &, struct kretprobe_instance &>,
                      "liveprobe: unwind handler is f(kretprobe_instance&)");
        return {std::move(target_), options_, data_size_, std::move(entry_), std::move(ret_), std::move(f)};
    }
    // Bytes of ri.data per call (at most 4096).
    Kretprobe &&data_size(std::size_t n) &&
    {
        data_size_ = n;
        return std::move(*this);
    }
    Kretprobe &&options(Options o) &&
    {
        options_ = o;
        return std::move(*this);
    }

    Result<Probe> attach() &&
    {
        return detail::attach(std::move(*this).prepare());
    }

    detail::Owned prepare() &&
    {
        using H = detail::KretprobeHandlers<Entry, Return, Unwind>;
        detail::Owned o = detail::make_block(detail::Kind::kretprobe,
                                             H{std::move(entry_), std::move(ret_), std::move(unwind_)}, target_);
        struct kretprobe &rp = o.get()->rp;
        if constexpr (!std::is_same_v<Entry, detail::Nothing>) rp.entry_handler = &H::c_entry;
        if constexpr (!std::is_same_v<Return, detail::Nothing>) rp.handler = &H::c_ret;
        if constexpr (!std::is_same_v<Unwind, detail::Nothing>) rp.unwind_handler = &H::c_unwind;
        rp.data_size = data_size_;
        rp.maxactive = options_.maxactive;
        if (options_.disabled) rp.kp.flags |= KPROBE_FLAG_DISABLED;
        return o;
    }

private:
    Target target_;
    Options options_{};
    std::size_t data_size_ = 0;
    [[no_unique_address]] Entry entry_{};
    [[no_unique_address]] Return ret_{};
    [[no_unique_address]] Unwind unwind_{};
};

inline Kretprobe<> kretprobe(Target t) { return Kretprobe<>(std::move(t)); }

}  // namespace liveprobe
