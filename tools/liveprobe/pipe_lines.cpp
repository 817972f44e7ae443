#include "pipe_lines.hpp"

#include <limits.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace liveprobe::tool {
namespace {

bool write_all(int fd, const char *p, size_t n)
{
    while (n) {
        const ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        p += w;
        n -= static_cast<size_t>(w);
    }
    return true;
}

// stdio's flush: the buffer in pieces of whole lines, each at most PIPE_BUF bytes.
ssize_t write_lines(void *cookie, const char *buf, size_t n)
{
    const int fd = static_cast<int>(reinterpret_cast<intptr_t>(cookie));
    size_t at = 0;
    while (at < n) {
        size_t piece = n - at < PIPE_BUF ? n - at : PIPE_BUF;
        if (at + piece < n) {  // end it at the last line's end within it, if there is one
            const void *nl = memrchr(buf + at, '\n', piece);
            if (nl) piece = static_cast<size_t>(static_cast<const char *>(nl) - (buf + at)) + 1;
        }
        if (!write_all(fd, buf + at, piece)) return at ? static_cast<ssize_t>(at) : -1;
        at += piece;
    }
    return static_cast<ssize_t>(n);
}

}  // namespace

FILE *open_pipe_lines(int fd)
{
    cookie_io_functions_t io{};
    io.write = write_lines;
    return fopencookie(reinterpret_cast<void *>(static_cast<intptr_t>(fd)), "w", io);
}

}  // namespace liveprobe::tool
