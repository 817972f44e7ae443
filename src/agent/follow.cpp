#include "agent/follow.hpp"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "agent/channel.hpp"
#include "os/linux/fd_passing.hpp"

namespace liveprobe::agent {
namespace {

// A report is a few lines; the verbose ones are capped by the sender.
constexpr size_t kMaxReport = 64u << 10;

bool address_of(const std::string &path, struct sockaddr_un *sa)
{
    *sa = {};
    sa->sun_family = AF_UNIX;
    if (path.size() >= sizeof sa->sun_path) return false;
    std::memcpy(sa->sun_path, path.c_str(), path.size() + 1);
    return true;
}

}  // namespace

std::string follow_path(pid_t tool) { return fmt::format("{}/follow-{}.sock", runtime_dir(getuid()), tool); }

int follow_listen(const std::string &path, std::string *why)
{
    struct sockaddr_un sa;
    if (!address_of(path, &sa)) {
        *why = fmt::format("socket path too long: {}", path);
        return -ENAMETOOLONG;
    }
    // Sequenced packets: one report a message, the memfd with it; the end of the connection is
    // the end of the image's process tree (or of its session).
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        int e = errno;
        *why = fmt::format("socket: {}", std::strerror(e));
        return -e;
    }
    unlink(path.c_str());
    mode_t old = umask(0177);
    int b = bind(fd, reinterpret_cast<struct sockaddr *>(&sa), sizeof sa);
    umask(old);
    // A test suite starts programs faster than the tool accepts them at times: they wait in
    // the backlog (connect blocks when it is full), never lost.
    if (b != 0 || listen(fd, SOMAXCONN) != 0) {
        int e = errno;
        close(fd);
        *why = fmt::format("cannot listen on {}: {}", path, std::strerror(e));
        return -e;
    }
    return fd;
}

bool follow_receive(int conn, std::string *report, int *memfd)
{
    *memfd = -1;
    report->assign(kMaxReport, '\0');
    std::vector<int> fds;
    const long n = os::receive_with_fds(conn, report->data(), report->size(), 0, &fds);
    // The report's memfd: the first descriptor; any other is closed.
    for (int fd : fds) {
        if (*memfd < 0) *memfd = fd;
        else close(fd);
    }
    if (n <= 0 || report->compare(0, 6, "image ") != 0) {
        if (*memfd >= 0) close(*memfd);
        *memfd = -1;
        return false;
    }
    report->resize(static_cast<size_t>(n));
    return true;
}

int follow_connect(const std::string &path, pid_t *tool)
{
    struct sockaddr_un sa;
    if (!address_of(path, &sa)) return -1;
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    int r;
    do r = connect(fd, reinterpret_cast<struct sockaddr *>(&sa), sizeof sa);
    while (r != 0 && errno == EINTR);
    struct ucred cred {};
    socklen_t len = sizeof cred;
    // Only a tool of this user (or root) is told about the image and given its memory.
    if (r != 0 || getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 ||
        (cred.uid != getuid() && cred.uid != 0)) {
        close(fd);
        return -1;
    }
    *tool = cred.pid;
    return fd;
}

bool follow_send(int conn, const std::string &report, int memfd)
{
    const size_t len = std::min(report.size(), kMaxReport);
    return os::send_with_fd(conn, report.data(), len, memfd, -1) == static_cast<long>(len);
}

}  // namespace liveprobe::agent
