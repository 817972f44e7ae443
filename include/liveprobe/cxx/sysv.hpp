// liveprobe C++ API: where the System V x86-64 ABI puts a function's arguments and return
// value, computed at compile time from the function's type.
//
// Classes (psABI 3.2.3) and what liveprobe does with them:
//   INTEGER  integers, enums, pointers, references, bool: rdi rsi rdx rcx r8 r9, then the stack;
//            __int128 takes two registers (or 16 aligned bytes of stack).
//   SSE      float, double: xmm0-7, then the stack.
//   X87      long double: always on the stack (16-aligned); returned in st(0).
//   MEMORY   trivially copyable classes over 16 bytes: a copy on the stack; returned through a
//            hidden pointer the caller passes in rdi (which the arguments then follow).
//   classes that are not trivially copyable or destructible ("non-trivial for the purpose of
//            calls"): passed by invisible reference (a pointer, INTEGER); returned through the
//            hidden pointer.
// Trivially copyable classes of 16 bytes or less are classified by their fields, which C++20
// cannot enumerate: a probe on such a signature does not compile (say so with a pointer or
// reference parameter type instead, or use the untyped API).
//
// A C variadic function's fixed part is typed; the rest is reachable through regs().
// Member functions: `this` is the first argument (after the hidden return pointer).
#pragma once

#include <liveprobe/kprobes.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <tuple>
#include <type_traits>

namespace liveprobe {
namespace sysv {

// ---- the function type behind a pointer to function or member function -------------------

template <typename T>
struct Signature;  // Signature<F>::type is R(A...) with `this` made explicit

template <typename R, typename... A>
struct Signature<R(A...)> {
    using type = R(A...);
    using ret = R;
    using args = std::tuple<A...>;
    static constexpr bool variadic = false;
};
template <typename R, typename... A>
struct Signature<R(A..., ...)> : Signature<R(A...)> {
    static constexpr bool variadic = true;
};
template <typename R, typename... A>
struct Signature<R(A...) noexcept> : Signature<R(A...)> {};
template <typename R, typename... A>
struct Signature<R(A..., ...) noexcept> : Signature<R(A..., ...)> {};

#define LIVEPROBE_MEMBER_SIGNATURE(QUALS, THIS)                                  \
    template <typename R, typename C, typename... A>                              \
    struct Signature<R (C::*)(A...) QUALS> : Signature<R(THIS, A...)> {           \
        using object = C;                                                         \
    };                                                                            \
    template <typename R, typename C, typename... A>                              \
    struct Signature<R (C::*)(A...) QUALS noexcept> : Signature<R(THIS, A...)> {  \
        using object = C;                                                         \
    };
LIVEPROBE_MEMBER_SIGNATURE(, C *)
LIVEPROBE_MEMBER_SIGNATURE(const, const C *)
LIVEPROBE_MEMBER_SIGNATURE(volatile, volatile C *)
LIVEPROBE_MEMBER_SIGNATURE(const volatile, const volatile C *)
LIVEPROBE_MEMBER_SIGNATURE(&, C *)
LIVEPROBE_MEMBER_SIGNATURE(const &, const C *)
LIVEPROBE_MEMBER_SIGNATURE(&&, C *)
LIVEPROBE_MEMBER_SIGNATURE(const &&, const C *)
#undef LIVEPROBE_MEMBER_SIGNATURE

// ---- classification --------------------------------------------------------------------

enum class Class : unsigned char {
    none,      // void (return values only)
    integer,   // one general register (or 8 bytes of stack)
    integer2,  // two general registers (__int128)
    sse,       // one xmm register
    x87,       // long double: stack as an argument, st(0) as a return value
    memory,    // a copy on the stack / a hidden return pointer
    indirect,  // by invisible reference: a pointer in an INTEGER place
};

template <typename T>
inline constexpr bool is_int128 = std::is_same_v<std::remove_cv_t<T>, __int128> ||
                                  std::is_same_v<std::remove_cv_t<T>, unsigned __int128>;

template <typename T>
inline constexpr bool trivial_for_calls = std::is_trivially_copyable_v<T> && std::is_trivially_destructible_v<T>;

template <typename T>
constexpr Class classify()
{
    using U = std::remove_cv_t<T>;
    if constexpr (std::is_void_v<U>)
        return Class::none;
    else if constexpr (std::is_reference_v<U> || std::is_pointer_v<U> || std::is_null_pointer_v<U> ||
                       std::is_enum_v<U> || (std::is_integral_v<U> && !is_int128<U>))
        return Class::integer;
    else if constexpr (is_int128<U>)
        return Class::integer2;
    else if constexpr (std::is_same_v<U, float> || std::is_same_v<U, double>)
        return Class::sse;
    else if constexpr (std::is_same_v<U, long double>)
        return Class::x87;
    else if constexpr (std::is_class_v<U> || std::is_union_v<U>) {
        if constexpr (!trivial_for_calls<U>)
            return Class::indirect;
        else if constexpr (sizeof(U) > 16)
            return Class::memory;
        else {
            static_assert(sizeof(U) > 16, "liveprobe: a trivially copyable class of 16 bytes or less is passed in "
                                          "registers chosen by its fields, which C++ cannot enumerate; "
                                          "take it through the untyped API (regs)");
            return Class::memory;
        }
    } else {
        static_assert(std::is_void_v<U> && !std::is_void_v<U>, "liveprobe: unsupported parameter type");
        return Class::none;
    }
}

// Where one argument is. Stack offsets are from the first stack argument (8(%rsp) at entry).
struct Place {
    enum Where : unsigned char { gpr, gpr2, xmm, stack } where = gpr;
    bool indirect = false;   // the place holds a pointer to the argument
    unsigned short index = 0;  // gpr/xmm number, or stack offset in bytes
};

template <typename R, typename... A>
struct Layout {
    static constexpr Class ret = classify<R>();
    // MEMORY and indirect return values: the caller passes where to put them in rdi.
    static constexpr bool hidden_return = ret == Class::memory || ret == Class::indirect;
    static constexpr std::size_t count = sizeof...(A);

    static constexpr std::array<Place, sizeof...(A)> places()
    {
        std::array<Place, sizeof...(A)> out{};
        constexpr Class classes[] = {classify<A>()..., Class::none};
        constexpr std::size_t sizes[] = {sizeof(std::conditional_t<std::is_reference_v<A>, void *, A>)..., 0};
        constexpr std::size_t aligns[] = {alignof(std::conditional_t<std::is_reference_v<A>, void *, A>)..., 0};
        unsigned gp = hidden_return ? 1 : 0, vec = 0, stack = 0;
        for (std::size_t i = 0; i < sizeof...(A); ++i) {
            Place p;
            auto on_stack = [&](std::size_t size, std::size_t align) {
                if (align > 8) stack = (stack + 15) & ~15u;
                p.where = Place::stack;
                p.index = static_cast<unsigned short>(stack);
                stack += static_cast<unsigned>((size + 7) & ~std::size_t(7));
            };
            switch (classes[i]) {
            case Class::integer:
            case Class::indirect:
                p.indirect = classes[i] == Class::indirect;
                if (gp < 6) {
                    p.where = Place::gpr;
                    p.index = static_cast<unsigned short>(gp++);
                } else {
                    on_stack(8, 8);
                }
                break;
            case Class::integer2:
                if (gp < 5) {
                    p.where = Place::gpr2;
                    p.index = static_cast<unsigned short>(gp);
                    gp += 2;
                } else {
                    on_stack(16, 16);
                }
                break;
            case Class::sse:
                if (vec < 8) {
                    p.where = Place::xmm;
                    p.index = static_cast<unsigned short>(vec++);
                } else {
                    on_stack(8, 8);
                }
                break;
            case Class::x87:
            case Class::memory:
                on_stack(sizes[i], aligns[i] > 8 ? 16 : 8);
                break;
            case Class::none:
                break;
            }
            out[i] = p;
        }
        return out;
    }
    static constexpr std::array<Place, sizeof...(A)> place = places();

    // Whether reading or writing the arguments or return value needs the thread's xmm or x87
    // registers (KPROBE_FLAG_FPREGS, liveprobe_get_fpregs).
    static constexpr bool args_use_fp = ((classify<A>() == Class::sse) || ... || false);
    static constexpr bool ret_uses_fp = ret == Class::sse || ret == Class::x87;
};

// ---- access to registers ---------------------------------------------------------------

// The n-th INTEGER argument register of `r`.
inline unsigned long &gpr(struct pt_regs &r, unsigned n) noexcept
{
    switch (n) {
    case 0: return r.di;
    case 1: return r.si;
    case 2: return r.dx;
    case 3: return r.cx;
    case 4: return r.r8;
    default: return r.r9;
    }
}

// The bytes a Place names, given the registers at the function's entry.
inline unsigned char *bytes_of(struct pt_regs &r, const struct liveprobe_fpregs &fp, Place p) noexcept
{
    switch (p.where) {
    case Place::gpr:
    case Place::gpr2:
        return reinterpret_cast<unsigned char *>(&gpr(r, p.index));
    case Place::xmm:
        return fp.xmm ? fp.xmm + p.index * fp.xmm_stride : nullptr;
    case Place::stack:
        return reinterpret_cast<unsigned char *>(r.sp + 8 + p.index);
    }
    return nullptr;
}

// Loads a T from `at` (T as the ABI holds it: integers from the low bytes).
template <typename T>
inline T load(const unsigned char *at) noexcept
{
    T v;
    std::memcpy(static_cast<void *>(&v), at, sizeof(T));
    return v;
}

// A 16-byte value held in two registers (low eightbyte first), which pt_regs does not keep
// next to each other.
template <typename T>
inline T load_pair(unsigned long lo, unsigned long hi) noexcept
{
    unsigned char b[16];
    std::memcpy(b, &lo, 8);
    std::memcpy(b + 8, &hi, 8);
    return load<T>(b);
}
template <typename T>
inline void store_pair(const T &v, unsigned long &lo, unsigned long &hi) noexcept
{
    unsigned char b[16];
    std::memcpy(b, static_cast<const void *>(&v), 16);
    std::memcpy(&lo, b, 8);
    std::memcpy(&hi, b + 8, 8);
}

template <typename T, bool = std::is_enum_v<T>>
struct Underlying {
    using type = T;
};
template <typename T>
struct Underlying<T, true> {
    using type = std::underlying_type_t<T>;
};

template <typename T>
inline void store(unsigned char *at, const T &v) noexcept
{
    if constexpr (std::is_integral_v<T> || std::is_enum_v<T> || std::is_pointer_v<T>) {
        if constexpr (sizeof(T) < 8) {
            // Extended to the whole register, as callers do.
            using Wide = std::conditional_t<std::is_signed_v<typename Underlying<T>::type>, long, unsigned long>;
            Wide w = static_cast<Wide>(v);
            std::memcpy(at, &w, 8);
            return;
        }
    }
    std::memcpy(at, static_cast<const void *>(&v), sizeof(T));
}

}  // namespace sysv
}  // namespace liveprobe
