// liveprobe C++ API: typed probes, built from the probed function's own type.
//
//   auto p = liveprobe::probe(&parse)                        // or probe<int(const char*, double)>("parse")
//                .on_entry([&](const char *s, double scale) { ... })
//                .attach();
//
//   struct Timing { std::uint64_t t0; };
//   auto r = liveprobe::probe(&parse)
//                .with_slot<Timing>()
//                .on_entry([](auto &call, Timing &t) { t.t0 = now(); })
//                .on_return([&](auto &exit, Timing &t) {
//                    if (exit.returned()) record(exit.value(), now() - t.t0);  // else: unwound
//                })
//                .attach();
//
// A probe with only on_entry is a kprobe at the function's entry; its handler gets an
// Entry<Sig> (the arguments, read and writable, and skip(value) to return at once) or the
// arguments themselves as values. A probe with on_return is a kretprobe: on_entry gets an
// Args<Sig> and may return false to not follow this call; on_return gets an Exit<Sig> (the
// outcome, the return value, read and replaceable) or the return value itself.
//
// Handlers are called directly from the C handlers (no std::function, no allocation). They
// must not throw: the C handlers are noexcept, so an exception ends the program
// (std::terminate), as it would leaving any noexcept function.
#pragma once

#include <liveprobe/cxx/probe.hpp>
#include <liveprobe/cxx/sysv.hpp>

#include <cstdint>
#include <new>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>

namespace liveprobe {

// How a followed call ended. (A call that found maxactive calls in flight is not followed: it
// is counted in Counters::missed and reaches no handler.)
enum class Outcome : unsigned char {
    returned,  // it returned: the return value is there
    unwound,   // it left without returning (exception, longjmp, thread exit)
};

namespace detail {
struct Nothing {};  // no handler of this kind
template <typename...>
inline constexpr bool always_false = false;
struct NoFp {};
}  // namespace detail

template <typename Sig>
class Args;
template <typename Sig>
class Entry;
template <typename Sig>
class Exit;

// A call's arguments at the probed function's entry, by the function's type.
template <typename R, typename... A>
class Args<R(A...)> {
public:
    using Layout = sysv::Layout<R, A...>;
    using return_type = R;
    template <std::size_t I>
    using arg_type = std::tuple_element_t<I, std::tuple<A...>>;
    static constexpr std::size_t arity = sizeof...(A);

    explicit Args(struct pt_regs &regs) noexcept : regs_(&regs)
    {
        if constexpr (Layout::args_use_fp)
            if (liveprobe_get_fpregs(&fp_) != 0) fp_ = {};
    }

    // Argument I with its own type. A reference parameter, and a class passed in memory or by
    // invisible reference, come back as a reference to the object the function will use.
    template <std::size_t I>
    decltype(auto) arg() const noexcept
    {
        static_assert(I < sizeof...(A), "liveprobe: argument index out of range");
        using T = arg_type<I>;
        constexpr sysv::Place p = Layout::place[I];
        constexpr sysv::Class c = sysv::classify<T>();
        unsigned char *at = where<p>();
        if constexpr (std::is_reference_v<T>)
            return static_cast<T>(*sysv::load<std::remove_reference_t<T> *>(at));
        else if constexpr (c == sysv::Class::indirect)
            return static_cast<T &>(*sysv::load<T *>(at));
        else if constexpr (c == sysv::Class::memory)
            return static_cast<T &>(*std::launder(reinterpret_cast<T *>(at)));
        else if constexpr (p.where == sysv::Place::xmm)
            return at ? sysv::load<T>(at) : T{};
        else if constexpr (p.where == sysv::Place::gpr2)
            return sysv::load_pair<T>(sysv::gpr(*regs_, p.index), sysv::gpr(*regs_, p.index + 1));
        else if constexpr (p.where == sysv::Place::split)
            return sysv::load_split<T>(*regs_, fpregs(), p, false);
        else
            return sysv::load<T>(at);
    }

    // Replaces argument I for the function (not for references: write through arg<I>()).
    template <std::size_t I>
    void set_arg(const std::remove_cvref_t<arg_type<I>> &v) noexcept
    {
        using T = arg_type<I>;
        static_assert(!std::is_reference_v<T>, "liveprobe: a reference argument is changed through arg<I>()");
        constexpr sysv::Class c = sysv::classify<T>();
        if constexpr (c == sysv::Class::indirect || c == sysv::Class::memory) {
            arg<I>() = v;
        } else if constexpr (Layout::place[I].where == sysv::Place::split) {
            sysv::store_split(*regs_, fpregs(), Layout::place[I], false, v);
        } else if constexpr (Layout::place[I].where == sysv::Place::gpr2) {
            sysv::store_pair(v, sysv::gpr(*regs_, Layout::place[I].index), sysv::gpr(*regs_, Layout::place[I].index + 1));
        } else {
            unsigned char *at = where<Layout::place[I]>();
            if (at) sysv::store(at, v);
        }
    }

    // All arguments as a tuple of values (references stay references).
    std::tuple<A...> values() const noexcept
    {
        return [&]<std::size_t... I>(std::index_sequence<I...>) {
            return std::tuple<A...>(arg<I>()...);
        }(std::make_index_sequence<sizeof...(A)>{});
    }

    struct pt_regs &regs() const noexcept { return *regs_; }
    // Where the function will return to.
    void *return_address() const noexcept { return *reinterpret_cast<void **>(regs_->sp); }

protected:
    const struct liveprobe_fpregs &fpregs() const noexcept
    {
        if constexpr (Layout::args_use_fp) {
            return fp_;
        } else {
            static constexpr struct liveprobe_fpregs none {};
            return none;
        }
    }

    template <sysv::Place p>
    unsigned char *where() const noexcept
    {
        if constexpr (p.where == sysv::Place::gpr || p.where == sysv::Place::gpr2)
            return reinterpret_cast<unsigned char *>(&sysv::gpr(*regs_, p.index));
        else if constexpr (p.where == sysv::Place::split)
            return nullptr;
        else if constexpr (p.where == sysv::Place::stack)
            return reinterpret_cast<unsigned char *>(regs_->sp + 8 + p.index);
        else if constexpr (Layout::args_use_fp)
            return fp_.xmm ? fp_.xmm + p.index * fp_.xmm_stride : nullptr;
        else
            return nullptr;
    }

    struct pt_regs *regs_;
    [[no_unique_address]] std::conditional_t<Layout::args_use_fp, struct liveprobe_fpregs, detail::NoFp> fp_{};
};

// The entry of a call of an entry probe: its arguments, and skip().
template <typename R, typename... A>
class Entry<R(A...)> : public Args<R(A...)> {
    using Base = Args<R(A...)>;
    using Layout = typename Base::Layout;

public:
    using Base::Base;

    // Makes the function return `value` at once without running it (its caller continues).
    template <typename V = R>
        requires(!std::is_void_v<V>)
    void skip(const V &value) noexcept
    {
        static_assert(Layout::ret != sysv::Class::x87, "liveprobe: skip() cannot return a long double (st(0) would "
                                                       "have to be pushed)");
        struct pt_regs &r = *this->regs_;
        if constexpr (Layout::ret == sysv::Class::integer) {
            sysv::store(reinterpret_cast<unsigned char *>(&r.ax), value);
        } else if constexpr (Layout::ret == sysv::Class::integer2) {
            sysv::store_pair(value, r.ax, r.dx);
        } else if constexpr (Layout::ret == sysv::Class::sse) {
            struct liveprobe_fpregs fp {};
            if (liveprobe_get_fpregs(&fp) == 0) std::memcpy(fp.xmm, &value, sizeof(R));
        } else if constexpr (Layout::ret == sysv::Class::small) {
            struct liveprobe_fpregs fp {};
            if (Layout::ret_uses_fp && liveprobe_get_fpregs(&fp) != 0) fp = {};
            sysv::store_split(r, fp, Layout::ret_place(), true, value);
        } else {
            new (reinterpret_cast<void *>(r.di)) R(value);  // the caller's hidden return slot
            r.ax = r.di;
        }
        return_now();
    }
    template <typename V = R>
        requires std::is_void_v<V>
    void skip() noexcept
    {
        return_now();
    }
    bool skipped() const noexcept { return skipped_; }

private:
    void return_now() noexcept
    {
        struct pt_regs &r = *this->regs_;
        r.ip = *reinterpret_cast<unsigned long *>(r.sp);
        r.sp += 8;
        skipped_ = true;
    }
    bool skipped_ = false;
};

// The end of a followed call of a return probe.
template <typename R, typename... A>
class Exit<R(A...)> {
    using Layout = sysv::Layout<R, A...>;

public:
    using return_type = R;

    Exit(struct kretprobe_instance *ri, struct pt_regs *regs) noexcept : ri_(ri), regs_(regs)
    {
        if constexpr (Layout::ret_uses_fp)
            if (!regs || liveprobe_get_fpregs(&fp_) != 0) fp_ = {};
    }

    Outcome outcome() const noexcept { return regs_ ? Outcome::returned : Outcome::unwound; }
    bool returned() const noexcept { return regs_ != nullptr; }

    // The return value. A class returned through memory comes back as a reference to the
    // caller's object, and then outcome() must be returned; other types read R{} for an
    // unwound call.
    template <typename V = R>
        requires(!std::is_void_v<V>)
    decltype(auto) value() const noexcept
    {
        constexpr sysv::Class c = Layout::ret;
        if constexpr (c != sysv::Class::memory && c != sysv::Class::indirect)
            if (!regs_) return R{};
        if constexpr (c == sysv::Class::integer) {
            return sysv::load<R>(reinterpret_cast<const unsigned char *>(&regs_->ax));
        } else if constexpr (c == sysv::Class::integer2) {
            return sysv::load_pair<R>(regs_->ax, regs_->dx);
        } else if constexpr (c == sysv::Class::sse) {
            return fp_.xmm ? sysv::load<R>(fp_.xmm) : R{};
        } else if constexpr (c == sysv::Class::x87) {
            long double v = 0;
            if (fp_.st) std::memcpy(&v, fp_.st, 10);
            return v;
        } else if constexpr (c == sysv::Class::small) {
            return sysv::load_split<R>(*regs_, fpregs(), Layout::ret_place(), true);
        } else {
            return static_cast<R &>(*std::launder(reinterpret_cast<R *>(regs_->ax)));
        }
    }

    // Replaces the return value the caller gets (no effect on an unwound call).
    template <typename V = R>
        requires(!std::is_void_v<V>)
    void set_value(const V &v) noexcept
    {
        constexpr sysv::Class c = Layout::ret;
        if (!regs_) return;
        if constexpr (c == sysv::Class::integer) {
            sysv::store(reinterpret_cast<unsigned char *>(&regs_->ax), v);
        } else if constexpr (c == sysv::Class::integer2) {
            sysv::store_pair(v, regs_->ax, regs_->dx);
        } else if constexpr (c == sysv::Class::sse) {
            if (fp_.xmm) std::memcpy(fp_.xmm, &v, sizeof(R));
        } else if constexpr (c == sysv::Class::x87) {
            if (fp_.st) std::memcpy(fp_.st, &v, 10);
        } else if constexpr (c == sysv::Class::small) {
            sysv::store_split(*regs_, fpregs(), Layout::ret_place(), true, v);
        } else {
            value() = v;
        }
    }

    // The registers after the return (null when unwound).
    struct pt_regs *regs() const noexcept { return regs_; }
    // Where the call returned (or was to return) to.
    void *return_address() const noexcept { return ri_->ret_addr; }
    // The thread that made the call.
    pid_t tid() const noexcept { return ri_->tid; }

private:
    const struct liveprobe_fpregs &fpregs() const noexcept
    {
        if constexpr (Layout::ret_uses_fp) {
            return fp_;
        } else {
            static constexpr struct liveprobe_fpregs none {};
            return none;
        }
    }

    struct kretprobe_instance *ri_;
    struct pt_regs *regs_;
    [[no_unique_address]] std::conditional_t<Layout::ret_uses_fp, struct liveprobe_fpregs, detail::NoFp> fp_{};
};

namespace detail {

// Calls an entry handler in the first form it accepts; true unless it returned false.
template <typename F, typename Ctx, typename Slot>
inline bool call_entry(F &f, Ctx &ctx, Slot *slot) noexcept
{
    using SlotRef = std::add_lvalue_reference_t<Slot>;
    auto run = [&]() -> decltype(auto) {
        if constexpr (!std::is_void_v<Slot> && std::is_invocable_v<F &, Ctx &, SlotRef>)
            return f(ctx, *slot);
        else if constexpr (std::is_invocable_v<F &, Ctx &>)
            return f(ctx);
        else
            return [&]<std::size_t... I>(std::index_sequence<I...>) -> decltype(auto) {
                if constexpr (std::is_invocable_v<F &, decltype(ctx.template arg<I>())...>)
                    return f(ctx.template arg<I>()...);
                else
                    static_assert(always_false<F, std::index_sequence<I...>>, "liveprobe: on_entry's handler must be callable as f(ctx, slot), "
                                                   "f(ctx) or f(args...) (ctx: Entry<Sig>& or Args<Sig>&)");
            }(std::make_index_sequence<Ctx::arity>{});
    };
    using Ret = decltype(run());
    if constexpr (std::is_void_v<Ret>) {
        run();
        return true;
    } else {
        static_assert(std::is_convertible_v<Ret, bool>, "liveprobe: on_entry's handler returns void or bool");
        return static_cast<bool>(run());
    }
}

// Calls a return handler in the first form it accepts. The value forms (f(value), f()) are
// called for returned calls only.
template <typename F, typename R, typename... A, typename Slot>
inline void call_exit(F &f, Exit<R(A...)> &x, Slot *slot) noexcept
{
    using X = Exit<R(A...)>;
    if constexpr (!std::is_void_v<Slot> && std::is_invocable_v<F &, X &, std::add_lvalue_reference_t<Slot>>)
        f(x, *slot);
    else if constexpr (std::is_invocable_v<F &, X &>)
        f(x);
    else if constexpr (std::is_void_v<R> && std::is_invocable_v<F &>) {
        if (x.returned()) f();
    } else if constexpr (!std::is_void_v<R> && std::is_invocable_v<F &, decltype(x.value())>) {
        if (x.returned()) f(x.value());
    } else {
        static_assert(always_false<F>, "liveprobe: on_return's handler must be callable as f(exit, slot), "
                                       "f(exit) or f(value) (exit: Exit<Sig>&)");
    }
}

template <typename F, typename X>
inline constexpr bool wants_unwound = std::is_invocable_v<F &, X &>;
template <typename F, typename X, typename Slot>
inline constexpr bool wants_unwound_with_slot =
    !std::is_void_v<Slot> && std::is_invocable_v<F &, X &, std::add_lvalue_reference_t<Slot>>;

// The handlers of an entry probe, and its C pre handler.
template <typename Sig, typename OnEntry>
struct EntryHandlers {
    OnEntry on_entry;

    static int pre(struct kprobe *kp, struct pt_regs *regs) noexcept
    {
        auto &h = Block<EntryHandlers>::of(kp)->handlers;
        Entry<Sig> e(*regs);
        call_entry<OnEntry, Entry<Sig>, void>(h.on_entry, e, nullptr);
        return e.skipped() ? 1 : 0;
    }
};

// The handlers of a return probe, and its C handlers.
template <typename Sig, typename Slot, typename OnEntry, typename OnReturn>
struct ReturnHandlers {
    [[no_unique_address]] OnEntry on_entry;
    OnReturn on_return;

    static constexpr bool has_slot = !std::is_void_v<Slot>;
    static constexpr bool has_entry = !std::is_same_v<OnEntry, Nothing>;

    static Slot *slot_of(struct kretprobe_instance *ri) noexcept
    {
        if constexpr (has_slot)
            return std::launder(reinterpret_cast<Slot *>(ri->data));
        else
            return nullptr;
    }
    static void end(struct kretprobe_instance *ri) noexcept
    {
        if constexpr (has_slot) slot_of(ri)->~Slot();
    }

    static int entry(struct kretprobe_instance *ri, struct pt_regs *regs) noexcept
    {
        Slot *slot = nullptr;
        if constexpr (has_slot) slot = new (ri->data) Slot();
        if constexpr (has_entry) {
            auto &h = Block<ReturnHandlers>::of(ri->rp)->handlers;
            Args<Sig> a(*regs);
            if (!call_entry<OnEntry, Args<Sig>, Slot>(h.on_entry, a, slot)) {
                end(ri);
                return 1;
            }
        }
        (void)slot;
        return 0;
    }
    static int ret(struct kretprobe_instance *ri, struct pt_regs *regs) noexcept
    {
        auto &h = Block<ReturnHandlers>::of(ri->rp)->handlers;
        Exit<Sig> x(ri, regs);
        call_exit(h.on_return, x, slot_of(ri));
        end(ri);
        return 0;
    }

    // Unwound calls reach the handler when it takes the Exit; the slot is destroyed either way.
    static constexpr bool slot_needs_end = [] {
        if constexpr (has_slot)
            return !std::is_trivially_destructible_v<Slot>;
        else
            return false;
    }();
    static constexpr bool needs_unwind = wants_unwound<OnReturn, Exit<Sig>> ||
                                         wants_unwound_with_slot<OnReturn, Exit<Sig>, Slot> || slot_needs_end;
    static int unwind(struct kretprobe_instance *ri, struct pt_regs *) noexcept { return ret(ri, nullptr); }
};

}  // namespace detail

// Options of a probe at registration.
struct Options {
    bool disabled = false;  // register it disarmed (enable() arms it)
    int maxactive = 0;      // return probes: calls followed at once (<= 0: the C API's default)
};

// A typed probe being built: probe(&f) or probe<Sig>("symbol"), then on_entry / on_return /
// with_slot / options, then attach() (or Batch::add).
template <typename Sig, typename Slot = void, typename OnEntry = detail::Nothing, typename OnReturn = detail::Nothing>
class TypedProbe {
public:
    using signature = Sig;

    explicit TypedProbe(Target t, std::optional<Error> error = std::nullopt)
        : target_(std::move(t)), error_(std::move(error))
    {
    }

    // At the entry: f(Entry<Sig>&) or f(args...) for an entry probe; f(Args<Sig>&, Slot&),
    // f(Args<Sig>&) or f(args...) for a return probe (returning false: do not follow this call).
    template <typename F>
    TypedProbe<Sig, Slot, F, OnReturn> on_entry(F f) &&
    {
        static_assert(std::is_same_v<OnEntry, detail::Nothing>, "liveprobe: on_entry given twice");
        return {std::move(target_), std::move(error_), options_, std::move(f), std::move(on_return_)};
    }

    // At the return (makes this a return probe): f(Exit<Sig>&, Slot&), f(Exit<Sig>&) or
    // f(value) (f() for a void function).
    template <typename F>
    TypedProbe<Sig, Slot, OnEntry, F> on_return(F f) &&
    {
        static_assert(std::is_same_v<OnReturn, detail::Nothing>, "liveprobe: on_return given twice");
        return {std::move(target_), std::move(error_), options_, std::move(on_entry_), std::move(f)};
    }

    // A T per followed call of a return probe: value-initialized at the entry, destroyed after
    // the return handler (or once the call is known to have unwound).
    template <typename T>
    TypedProbe<Sig, T, OnEntry, OnReturn> with_slot() &&
    {
        static_assert(std::is_void_v<Slot>, "liveprobe: with_slot given twice");
        static_assert(sizeof(T) <= 4096, "liveprobe: a slot holds at most 4096 bytes (the C API's data_size)");
        static_assert(alignof(T) <= 16, "liveprobe: a slot is 16-byte aligned");
        static_assert(std::is_nothrow_default_constructible_v<T> && std::is_nothrow_destructible_v<T>,
                      "liveprobe: a slot is built and destroyed inside handlers: noexcept");
        return {std::move(target_), std::move(error_), options_, std::move(on_entry_), std::move(on_return_)};
    }

    TypedProbe &&options(Options o) &&
    {
        options_ = o;
        return std::move(*this);
    }

    // Registers it: the probe, or why not.
    Result<Probe> attach() &&
    {
        auto block = std::move(*this).prepare();
        if (!block) return block.error();
        return detail::attach(std::move(*block));
    }

    // The unregistered block (Batch).
    Result<detail::Owned> prepare() &&
    {
        using S = sysv::Signature<Sig>;
        using L = typename Unpack<typename S::type>::layout;
        constexpr bool is_return = !std::is_same_v<OnReturn, detail::Nothing>;
        static_assert(is_return || !std::is_same_v<OnEntry, detail::Nothing>,
                      "liveprobe: a typed probe needs on_entry or on_return");
        static_assert(is_return || std::is_void_v<Slot>, "liveprobe: with_slot is for return probes (on_return)");
        if (error_) return *error_;
        if (target_.by_symbol() && target_.offset() != 0)
            return Error{-EINVAL, "a typed probe goes at a function's entry: the offset must be 0, not " +
                                      std::to_string(target_.offset())};
        if constexpr (!is_return) {
            using H = detail::EntryHandlers<typename S::type, OnEntry>;
            detail::Owned o = detail::make_block(detail::Kind::kprobe, H{std::move(on_entry_)}, target_);
            struct kprobe &kp = o.get()->kp;
            kp.pre_handler = &H::pre;
            if (L::args_use_fp) kp.flags |= KPROBE_FLAG_FPREGS;
            if (options_.disabled) kp.flags |= KPROBE_FLAG_DISABLED;
            return o;
        } else {
            using H = detail::ReturnHandlers<typename S::type, Slot, OnEntry, OnReturn>;
            detail::Owned o =
                detail::make_block(detail::Kind::kretprobe, H{std::move(on_entry_), std::move(on_return_)}, target_);
            struct kretprobe &rp = o.get()->rp;
            rp.handler = &H::ret;
            if (H::has_entry || H::has_slot) rp.entry_handler = &H::entry;
            if (H::needs_unwind) rp.unwind_handler = &H::unwind;
            if constexpr (!std::is_void_v<Slot>) rp.data_size = sizeof(Slot);
            rp.maxactive = options_.maxactive;
            if (L::args_use_fp || L::ret_uses_fp) rp.kp.flags |= KPROBE_FLAG_FPREGS;
            if (options_.disabled) rp.kp.flags |= KPROBE_FLAG_DISABLED;
            return o;
        }
    }

    // (Used by the other specializations' builders.)
    TypedProbe(Target t, std::optional<Error> e, Options o, OnEntry en, OnReturn re)
        : target_(std::move(t)), error_(std::move(e)), options_(o), on_entry_(std::move(en)), on_return_(std::move(re))
    {
    }

private:
    template <typename T>
    struct Unpack;
    template <typename R, typename... A>
    struct Unpack<R(A...)> {
        using layout = sysv::Layout<R, A...>;
    };

    template <typename, typename, typename, typename>
    friend class TypedProbe;

    Target target_;
    std::optional<Error> error_;
    Options options_{};
    [[no_unique_address]] OnEntry on_entry_{};
    [[no_unique_address]] OnReturn on_return_{};
};

// A typed probe on function `f`, at its entry.
template <typename F>
    requires std::is_function_v<F>
TypedProbe<F> probe(F *f)
{
    if (!f) return TypedProbe<F>(Target(static_cast<const void *>(nullptr)), Error{-EINVAL, "the function pointer is null"});
    return TypedProbe<F>(Target(reinterpret_cast<const void *>(f)));
}

// A typed probe on the function named `symbol` (the C API's rules), of type Sig: a function
// type, or a pointer to member function type for a member function.
template <typename Sig>
TypedProbe<typename sysv::Signature<Sig>::type> probe(Target symbol)
{
    return TypedProbe<typename sysv::Signature<Sig>::type>(std::move(symbol));
}

// A typed probe on member function `m` (`this` is its first argument). Virtual member
// functions have no address without an object: name them by symbol instead.
template <typename M>
    requires std::is_member_function_pointer_v<M>
TypedProbe<typename sysv::Signature<M>::type> probe(M m)
{
    using P = TypedProbe<typename sysv::Signature<M>::type>;
    struct Rep {  // the Itanium C++ ABI's pointer to member function
        std::uintptr_t ptr;
        std::ptrdiff_t adj;
    } rep;
    static_assert(sizeof(M) == sizeof(Rep));
    std::memcpy(&rep, &m, sizeof rep);
    if (rep.ptr == 0) return P(Target(static_cast<const void *>(nullptr)), Error{-EINVAL, "the member function pointer is null"});
    if (rep.ptr & 1)
        return P(Target(static_cast<const void *>(nullptr)),
                 Error{-EINVAL, "a virtual member function has no address without an object: probe the "
                                "implementation by its symbol name, e.g. probe<Sig>(\"Class::method\")"});
    return P(Target(reinterpret_cast<const void *>(rep.ptr)));
}

}  // namespace liveprobe
