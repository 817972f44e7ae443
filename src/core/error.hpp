// Errors as values with a precise reason. Every public entry point that fails records
// (errno, reason) for the calling thread; liveprobe_strerror() returns the reason.
#pragma once

#include <string>

#include <fmt/format.h>

namespace liveprobe {

// A negative errno and the precise reason. err == 0 means success.
struct Status {
    int err = 0;
    std::string reason;

    bool ok() const { return err == 0; }
    static Status Ok() { return {}; }
};

template <typename... Args>
Status Fail(int err, fmt::format_string<Args...> f, Args &&...args)
{
    return Status{err, fmt::format(f, std::forward<Args>(args)...)};
}

// Records s as the calling thread's last failure (when it is one) and returns s.err.
int record(const Status &s);

// The calling thread's last failure reason for err, or a generic text for err.
const char *last_reason(int err);

}  // namespace liveprobe
