#include "agent/request_reader.hpp"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "os/linux/clock.hpp"

namespace liveprobe::agent {
namespace {

using os::clock::monotonic_ns;

// The error line a connection gets when its request is not taken, then the connection closed.
void refuse(int fd, const std::string &why)
{
    send_within(fd, fmt::format("error {} {}\n", EPROTO, why), 100);
    close(fd);
}

}  // namespace

void RequestReader::add(int fd)
{
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    reading_.push_back({fd, {}, monotonic_ns() + static_cast<uint64_t>(kRequestMs) * 1000000u});
}

void RequestReader::pollfds(std::vector<struct pollfd> *fds) const
{
    for (const Reading &r : reading_) fds->push_back({r.fd, POLLIN, 0});
}

int RequestReader::timeout_ms() const
{
    if (reading_.empty()) return -1;
    uint64_t first = UINT64_MAX;
    for (const Reading &r : reading_) first = std::min(first, r.deadline_ns);
    const uint64_t now = monotonic_ns();
    return first <= now ? 0 : static_cast<int>((first - now) / 1000000u) + 1;
}

std::vector<RequestReader::Whole> RequestReader::take(const std::vector<struct pollfd> &fds)
{
    std::vector<Whole> whole;
    const uint64_t now = monotonic_ns();
    std::vector<Reading> still;
    for (Reading &r : reading_) {
        const auto p = std::find_if(fds.begin(), fds.end(), [&](const struct pollfd &f) { return f.fd == r.fd; });
        bool done = false, broken = false;
        if (p != fds.end() && p->revents) {
            char buf[65536];
            for (;;) {
                const ssize_t n = recv(r.fd, buf, sizeof buf, 0);
                if (n < 0 && errno == EINTR) continue;
                if (n < 0) {
                    broken = errno != EAGAIN && errno != EWOULDBLOCK;
                    break;
                }
                if (n == 0) {
                    broken = true;
                    break;
                }
                // The client sends nothing after its newline.
                const char *nl = static_cast<const char *>(std::memchr(buf, '\n', static_cast<size_t>(n)));
                r.line.append(buf, nl ? static_cast<size_t>(nl - buf) : static_cast<size_t>(n));
                if (nl || r.line.size() >= kMaxRequest) {
                    done = nl != nullptr;
                    broken = !nl;
                    break;
                }
            }
        }
        if (done) whole.push_back({r.fd, std::move(r.line)});
        else if (broken && r.line.size() >= kMaxRequest) refuse(r.fd, fmt::format("request longer than {} bytes", kMaxRequest));
        else if (broken) refuse(r.fd, "request without its end of line");
        else if (now >= r.deadline_ns) refuse(r.fd, fmt::format("request not whole within {} ms", kRequestMs));
        else still.push_back(std::move(r));
    }
    reading_ = std::move(still);
    return whole;
}

void RequestReader::drop_all(bool close_them)
{
    for (const Reading &r : reading_)
        if (close_them) close(r.fd);
    reading_.clear();
}

bool send_within(int fd, const std::string &text, int ms)
{
    const uint64_t deadline = monotonic_ns() + static_cast<uint64_t>(ms) * 1000000u;
    for (size_t off = 0; off < text.size();) {
        const ssize_t n = send(fd, text.data() + off, text.size() - off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            off += static_cast<size_t>(n);
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) return false;
        const uint64_t now = monotonic_ns();
        if (now >= deadline) return false;
        struct pollfd p = {fd, POLLOUT, 0};
        poll(&p, 1, static_cast<int>((deadline - now) / 1000000u) + 1);
    }
    return true;
}

}  // namespace liveprobe::agent
