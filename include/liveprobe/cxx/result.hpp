// liveprobe C++ API: errors as values.
//
// Every call that can fail returns a Result<T>: the value, or an Error that carries the
// negative errno of the C API and the precise reason liveprobe gave for it (the text of
// liveprobe_strerror at the failure, such as "symbol 'parse' is defined in libfoo.so.1 and
// libbar.so"). C++20 has no std::expected; Result is the part of it this API needs.
#pragma once

#include <liveprobe/kprobes.h>

#include <cstdlib>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>

namespace liveprobe {

// Why an operation failed.
struct Error {
    int code = 0;        // a negative errno: -EINVAL, -ENOENT, -EILSEQ, -EOPNOTSUPP, -E2BIG, ...
    std::string reason;  // precise and complete: what was wrong with which input

    // "Invalid argument: <reason>", for logs and exceptions.
    std::string message() const { return std::string(std::strerror(-code)) + ": " + reason; }
};

// Thrown by Result::value() on an error (as std::expected's value() throws).
class BadResultAccess : public std::runtime_error {
public:
    explicit BadResultAccess(const Error &e) : std::runtime_error(e.message()), error_(e) {}
    const Error &error() const noexcept { return error_; }

private:
    Error error_;
};

namespace detail {
// The calling thread's reason for the C API's last failure `code`.
inline Error last_error(int code)
{
    const char *why = liveprobe_strerror(code);
    return Error{code, why && *why ? why : std::strerror(-code)};
}
}  // namespace detail

// A value of type T, or an Error.
template <typename T>
class [[nodiscard]] Result {
public:
    Result(T value) : v_(std::in_place_index<0>, std::move(value)) {}
    Result(Error error) : v_(std::in_place_index<1>, std::move(error)) {}

    bool has_value() const noexcept { return v_.index() == 0; }
    explicit operator bool() const noexcept { return has_value(); }

    // The value; throws BadResultAccess with the error when there is none.
    T &value() &
    {
        check();
        return std::get<0>(v_);
    }
    const T &value() const &
    {
        check();
        return std::get<0>(v_);
    }
    T &&value() &&
    {
        check();
        return std::get<0>(std::move(v_));
    }
    // Unchecked access (the value must be there).
    T &operator*() & noexcept { return *std::get_if<0>(&v_); }
    T &&operator*() && noexcept { return std::move(*std::get_if<0>(&v_)); }
    T *operator->() noexcept { return std::get_if<0>(&v_); }
    const T *operator->() const noexcept { return std::get_if<0>(&v_); }

    // The error (must be there).
    const Error &error() const noexcept { return *std::get_if<1>(&v_); }

private:
    void check() const
    {
        if (!has_value()) throw BadResultAccess(error());
    }
    std::variant<T, Error> v_;
};

// Success, or an Error.
template <>
class [[nodiscard]] Result<void> {
public:
    Result() = default;
    Result(Error error) : e_(std::move(error)) {}

    bool has_value() const noexcept { return !e_; }
    explicit operator bool() const noexcept { return has_value(); }
    void value() const
    {
        if (e_) throw BadResultAccess(*e_);
    }
    const Error &error() const noexcept { return *e_; }

private:
    std::optional<Error> e_;
};

}  // namespace liveprobe
