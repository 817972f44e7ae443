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
//   small    trivially copyable classes of 16 bytes or less: each eightbyte in the next general
//            register (INTEGER) or xmm register (SSE) by the fields it holds, or the whole
//            object on the stack when the registers it needs are not all free.
// C++20 cannot enumerate a class's fields, so a small class's eightbytes are declared:
// liveprobe knows std::pair of scalars, std::basic_string_view, std::span, std::chrono::duration
// and std::complex<float/double>; for others, specialize Eightbytes:
//   template <> struct liveprobe::sysv::Eightbytes<Point> : liveprobe::sysv::Classes<liveprobe::sysv::Class::integer> {};
//   template <> struct liveprobe::sysv::Eightbytes<Vec3f> : liveprobe::sysv::Classes<liveprobe::sysv::Class::sse, liveprobe::sysv::Class::sse> {};
// (an eightbyte holding any integer or pointer byte is integer, one of floats/doubles only is
// sse). A signature with an undeclared small class does not compile.
//
// A C variadic function's fixed part is typed; the rest is reachable through regs().
// Member functions: `this` is the first argument (after the hidden return pointer).
#pragma once

#include <liveprobe/kprobes.h>

#include <array>
#include <chrono>
#include <complex>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <span>
#include <string_view>
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
    small,     // a class of up to two eightbytes, each integer or sse (Eightbytes<T>)
};

// The classes of a small class's eightbytes, low first (integer or sse each).
template <Class... C>
struct Classes {
    static_assert(sizeof...(C) >= 1 && sizeof...(C) <= 2, "liveprobe: one or two eightbytes");
    static_assert(((C == Class::integer || C == Class::sse) && ...), "liveprobe: eightbytes are integer or sse");
    static constexpr Class list[] = {C..., Class::none};
    static constexpr std::array<Class, 2> value{list[0], list[1]};
};

// Declared per small class (see above); not defined: not declared.
template <typename T>
struct Eightbytes;

template <typename T>
inline constexpr Class scalar_class = std::is_floating_point_v<T> && sizeof(T) <= 8 ? Class::sse : Class::integer;

template <typename A, typename B>
    requires(std::is_scalar_v<A> && std::is_scalar_v<B> && !std::is_same_v<A, long double> &&
             !std::is_same_v<B, long double>)
struct Eightbytes<std::pair<A, B>> {
    // second at the first offset past first aligned for B, as std::pair lays them out.
    static constexpr std::size_t second_at = (sizeof(A) + alignof(B) - 1) / alignof(B) * alignof(B);
    static constexpr Class merge(Class x, Class y) { return x == Class::integer || y == Class::integer ? Class::integer : Class::sse; }
    static constexpr std::array<Class, 2> value =
        second_at >= 8 ? std::array<Class, 2>{scalar_class<A>, scalar_class<B>}
                       : std::array<Class, 2>{merge(scalar_class<A>, scalar_class<B>),
                                              sizeof(std::pair<A, B>) > 8 ? scalar_class<B> : Class::none};
};
template <typename C, typename Tr>
struct Eightbytes<std::basic_string_view<C, Tr>> : Classes<Class::integer, Class::integer> {};
template <typename T>
struct Eightbytes<std::span<T, std::dynamic_extent>> : Classes<Class::integer, Class::integer> {};
template <typename T, std::size_t N>
    requires(N != std::dynamic_extent)
struct Eightbytes<std::span<T, N>> : Classes<Class::integer> {};
template <typename Rep, typename Period>
    requires std::is_arithmetic_v<Rep> && (sizeof(Rep) <= 8)
struct Eightbytes<std::chrono::duration<Rep, Period>> {
    static constexpr std::array<Class, 2> value{scalar_class<Rep>, Class::none};
};
template <>
struct Eightbytes<std::complex<float>> : Classes<Class::sse> {};
template <>
struct Eightbytes<std::complex<double>> : Classes<Class::sse, Class::sse> {};

template <typename T>
concept declared_small = requires { Eightbytes<T>::value; };

template <typename T>
inline constexpr bool is_int128 = std::is_same_v<std::remove_cv_t<T>, __int128> ||
                                  std::is_same_v<std::remove_cv_t<T>, unsigned __int128>;

// "Trivial for the purposes of calls" (Itanium C++ ABI): passed by value in registers or on the
// stack, as a C struct would be, rather than by invisible reference. A trivial destructor and
// trivial copy and move constructors (those that exist) are what counts; assignment does not
// (std::pair's is not trivial, and std::pair is passed in registers).
template <typename T>
inline constexpr bool trivial_for_calls =
    std::is_trivially_destructible_v<T> && (std::is_copy_constructible_v<T> || std::is_move_constructible_v<T>) &&
    (!std::is_copy_constructible_v<T> || std::is_trivially_copy_constructible_v<T>) &&
    (!std::is_move_constructible_v<T> || std::is_trivially_move_constructible_v<T>);

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
            static_assert(declared_small<U>, "liveprobe: a trivially copyable class of 16 bytes or less is passed in "
                                             "registers chosen by its fields, which C++ cannot enumerate: declare "
                                             "them with liveprobe::sysv::Eightbytes<T> (see sysv.hpp)");
            return Class::small;
        }
    } else {
        static_assert(std::is_void_v<U> && !std::is_void_v<U>, "liveprobe: unsupported parameter type");
        return Class::none;
    }
}

// The eightbytes of a small class (none for the others).
template <typename T>
constexpr std::array<Class, 2> eightbytes()
{
    if constexpr (classify<T>() == Class::small)
        return Eightbytes<std::remove_cv_t<T>>::value;
    else
        return {Class::none, Class::none};
}

// Where one argument is. Stack offsets are from the first stack argument (8(%rsp) at entry).
struct Place {
    enum Where : unsigned char { gpr, gpr2, xmm, stack, split } where = gpr;
    bool indirect = false;     // the place holds a pointer to the argument
    unsigned short index = 0;  // gpr/xmm number, or stack offset in bytes
    // split (a small class in registers): eightbyte k in register part_index[k], a general
    // register when part_sse[k] is false, else an xmm register; `parts` of them.
    unsigned char parts = 0;
    bool part_sse[2] = {false, false};
    unsigned char part_index[2] = {0, 0};
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
        constexpr std::array<Class, 2> ebs[] = {eightbytes<A>()..., {Class::none, Class::none}};
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
            case Class::small: {
                unsigned need_gp = 0, need_vec = 0, parts = 0;
                for (Class e : ebs[i]) {
                    if (e == Class::none) continue;
                    ++parts;
                    (e == Class::sse ? need_vec : need_gp)++;
                }
                if (gp + need_gp <= 6 && vec + need_vec <= 8) {
                    p.where = Place::split;
                    p.parts = static_cast<unsigned char>(parts);
                    for (unsigned k = 0; k < parts; ++k) {
                        p.part_sse[k] = ebs[i][k] == Class::sse;
                        p.part_index[k] = static_cast<unsigned char>(p.part_sse[k] ? vec++ : gp++);
                    }
                } else {
                    on_stack(sizes[i], aligns[i] > 8 ? 16 : 8);
                }
                break;
            }
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
    static constexpr bool args_use_fp =
        ((classify<A>() == Class::sse || eightbytes<A>()[0] == Class::sse || eightbytes<A>()[1] == Class::sse) || ... ||
         false);
    static constexpr bool ret_uses_fp = ret == Class::sse || ret == Class::x87 || eightbytes<R>()[0] == Class::sse ||
                                        eightbytes<R>()[1] == Class::sse;

    // A small return value: eightbyte k in rax/rdx (integer) or xmm0/xmm1 (sse), in order.
    static constexpr Place ret_place()
    {
        Place p;
        p.where = Place::split;
        unsigned gp = 0, vec = 0;
        for (Class e : eightbytes<R>()) {
            if (e == Class::none) continue;
            p.part_sse[p.parts] = e == Class::sse;
            p.part_index[p.parts] = static_cast<unsigned char>(e == Class::sse ? vec++ : gp++);
            ++p.parts;
        }
        return p;
    }
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

// Loads a T from `at` (T as the ABI holds it: integers from the low bytes). T is trivial for
// calls, so its bytes are its value; it need not be default-constructible.
template <typename T>
inline T load(const unsigned char *at) noexcept
{
    alignas(T) unsigned char buf[sizeof(T)];
    std::memcpy(buf, at, sizeof(T));
    return *std::launder(reinterpret_cast<T *>(buf));
}

// The register holding eightbyte k of a split Place: in argument registers (rdi, rsi, ...) or,
// for a return value (`ret`), in rax/rdx; xmm registers from the saved area.
inline unsigned char *part_of(struct pt_regs &r, const struct liveprobe_fpregs &fp, const Place &p, unsigned k,
                              bool ret) noexcept
{
    unsigned i = p.part_index[k];
    if (p.part_sse[k]) return fp.xmm ? fp.xmm + i * fp.xmm_stride : nullptr;
    if (ret) return reinterpret_cast<unsigned char *>(i == 0 ? &r.ax : &r.dx);
    return reinterpret_cast<unsigned char *>(&gpr(r, i));
}

// Reads / writes a small class held in registers, eightbyte by eightbyte.
template <typename T>
inline T load_split(struct pt_regs &r, const struct liveprobe_fpregs &fp, const Place &p, bool ret) noexcept
{
    unsigned char b[16] = {};
    for (unsigned k = 0; k < p.parts; ++k)
        if (unsigned char *src = part_of(r, fp, p, k, ret)) std::memcpy(b + 8 * k, src, 8);
    return load<T>(b);
}
template <typename T>
inline void store_split(struct pt_regs &r, const struct liveprobe_fpregs &fp, const Place &p, bool ret,
                        const T &v) noexcept
{
    unsigned char b[16] = {};
    std::memcpy(b, static_cast<const void *>(&v), sizeof(T));
    for (unsigned k = 0; k < p.parts; ++k)
        if (unsigned char *dst = part_of(r, fp, p, k, ret)) std::memcpy(dst, b + 8 * k, 8);
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
