#include "core/error.hpp"

#include <cstring>

namespace liveprobe {
namespace {
// Plain C types: initial-exec TLS without constructors, destructors or lazy init. 512 bytes,
// not more: the library's static TLS must fit glibc's surplus for libraries loaded by dlopen
// (about 1.5 KB for all of them together: `liveprobe attach` loads it so), and a reason is a
// line.
thread_local int tl_err;
thread_local char tl_reason[512];
}  // namespace

int record(const Status &s)
{
    if (s.err != 0) {
        tl_err = s.err;
        size_t n = std::min(s.reason.size(), sizeof(tl_reason) - 1);
        std::memcpy(tl_reason, s.reason.data(), n);
        tl_reason[n] = '\0';
    }
    return s.err;
}

const char *last_reason(int err)
{
    if (err < 0 && err == tl_err && tl_reason[0] != '\0') return tl_reason;
    if (err == 0) return "success";
    return strerror(err < 0 ? -err : err);
}

}  // namespace liveprobe
