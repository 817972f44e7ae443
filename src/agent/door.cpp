#include "agent/door.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "agent/channel.hpp"
#include "os/linux/fd_passing.hpp"

namespace liveprobe::agent {
namespace {

constexpr char kConnectTag[] = "connect 1";  // what a tool's message says (its version)

// The abstract name `name` as a socket address (no terminating byte: abstract names are
// counted, not terminated).
socklen_t abstract_address(const std::string &name, struct sockaddr_un *sa)
{
    *sa = {};
    sa->sun_family = AF_UNIX;
    const size_t n = std::min(name.size(), sizeof sa->sun_path - 1);
    std::memcpy(sa->sun_path + 1, name.data(), n);
    return static_cast<socklen_t>(offsetof(struct sockaddr_un, sun_path) + 1 + n);
}

// Binds fd to kDoorLabel PID:RANDOM. Another socket of the same name (one chance in 2^64, or a
// squatter who guessed) only means another draw.
int label(int fd, std::string *why)
{
    for (int attempt = 0; attempt < 8; ++attempt) {
        uint64_t r = 0;
        if (getrandom(&r, sizeof r, 0) != static_cast<ssize_t>(sizeof r)) r ^= static_cast<uint64_t>(attempt) * 0x9e3779b97f4a7c15u;
        struct sockaddr_un sa;
        const socklen_t len = abstract_address(fmt::format("{}{}:{:016x}", kDoorLabel, getpid(), r), &sa);
        if (bind(fd, reinterpret_cast<struct sockaddr *>(&sa), len) == 0) return 0;
        if (errno != EADDRINUSE) break;
    }
    const int e = errno;
    *why = fmt::format("cannot name the agent's door: {}", std::strerror(e));
    return -e;
}

// Whether fd is an AF_UNIX socket of `type`.
bool is_unix_socket(int fd, int type)
{
    int domain = 0, got = 0;
    socklen_t l = sizeof domain;
    if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &l) != 0 || domain != AF_UNIX) return false;
    l = sizeof got;
    return getsockopt(fd, SOL_SOCKET, SO_TYPE, &got, &l) == 0 && got == type;
}

// Whether fd is a door: an AF_UNIX SOCK_SEQPACKET socket whose abstract name starts with
// kDoorLabel.
bool is_door(int fd)
{
    if (!is_unix_socket(fd, SOCK_SEQPACKET)) return false;
    struct sockaddr_un sa {};
    socklen_t len = sizeof sa;
    if (getsockname(fd, reinterpret_cast<struct sockaddr *>(&sa), &len) != 0) return false;
    const size_t label_len = sizeof kDoorLabel - 1;
    const size_t name_len = len > offsetof(struct sockaddr_un, sun_path) + 1 ? len - offsetof(struct sockaddr_un, sun_path) - 1 : 0;
    return sa.sun_path[0] == '\0' && name_len >= label_len && std::memcmp(sa.sun_path + 1, kDoorLabel, label_len) == 0;
}

struct Fd {
    int fd = -1;
    explicit Fd(int f = -1) : fd(f) {}
    ~Fd()
    {
        if (fd >= 0) close(fd);
    }
    Fd(const Fd &) = delete;
    Fd &operator=(const Fd &) = delete;
    int release()
    {
        const int f = fd;
        fd = -1;
        return f;
    }
};

// The numbers of process pid's socket descriptors, highest first (liveprobe keeps its own at
// 512 and up), or -errno; with `inodes`, their sockets' inode numbers.
int socket_fds(pid_t pid, std::vector<int> *out, std::vector<unsigned long> *inodes = nullptr)
{
    const std::string dir = fmt::format("/proc/{}/fd", pid);
    DIR *d = opendir(dir.c_str());
    if (!d) return -errno;
    while (struct dirent *e = readdir(d)) {
        char *end = nullptr;
        const long n = std::strtol(e->d_name, &end, 10);
        if (end == e->d_name || *end || n < 0) continue;
        char link[64];
        const ssize_t l = readlinkat(dirfd(d), e->d_name, link, sizeof link - 1);
        if (l > 7 && std::memcmp(link, "socket:", 7) == 0) {
            out->push_back(static_cast<int>(n));
            link[l] = 0;
            if (inodes) inodes->push_back(std::strtoul(link + 8, nullptr, 10));  // "socket:[INODE]"
        }
    }
    closedir(d);
    std::sort(out->rbegin(), out->rend());
    return 0;
}

// The path of the control socket an agent older than the door listens on in process pid
// (".../liveprobe-UID/PID.sock", among its sockets' inodes), "" when none: said, never used.
std::string legacy_socket(pid_t pid, const std::vector<unsigned long> &inodes)
{
    FILE *f = std::fopen(fmt::format("/proc/{}/net/unix", pid).c_str(), "re");
    if (!f) return {};
    const std::string tail = fmt::format("/{}.sock", pid);
    std::string found;
    char line[4096];
    while (found.empty() && std::fgets(line, sizeof line, f)) {
        // "Num RefCount Protocol Flags Type St Inode Path"
        unsigned long inode = 0;
        char path[4096] = "";
        if (std::sscanf(line, "%*s %*s %*s %*s %*s %*s %lu %4095s", &inode, path) != 2) continue;
        const std::string p = path;
        if (std::find(inodes.begin(), inodes.end(), inode) != inodes.end() && p.find("/liveprobe-") != std::string::npos &&
            p.size() > tail.size() && p.compare(p.size() - tail.size(), tail.size(), tail) == 0)
            found = p;
    }
    std::fclose(f);
    return found;
}

std::string denied(pid_t pid)
{
    return fmt::format("the kernel does not let you ptrace process {} (another user's process, one that made itself "
                       "non-dumpable, or Yama's ptrace_scope: see /proc/sys/kernel/yama/ptrace_scope), and liveprobe "
                       "grants exactly what ptrace would",
                       pid);
}

// The door of the process pidfd names (pid in this namespace), or -errno with *why.
int find_door(pid_t pid, int pidfd, std::string *why)
{
    std::vector<int> fds;
    std::vector<unsigned long> inodes;
    if (int r = socket_fds(pid, &fds, &inodes); r < 0) {
        *why = r == -ENOENT ? fmt::format("no process {}", pid)
                            : r == -EACCES || r == -EPERM ? denied(pid)
                                                          : fmt::format("cannot list the descriptors of process {}: {}", pid,
                                                                        std::strerror(-r));
        return r == -EACCES ? -EPERM : r;
    }
    for (int n : fds) {
        Fd fd(static_cast<int>(syscall(SYS_pidfd_getfd, pidfd, n, 0)));
        if (fd.fd < 0) {
            const int e = errno;
            if (e == EBADF) continue;  // closed since the listing
            if (e == EPERM || e == EACCES) *why = denied(pid);
            else if (e == ENOSYS) *why = "this kernel has no pidfd_getfd (Linux 5.6 and later have it)";
            else if (e == ESRCH) *why = fmt::format("process {} exited", pid);
            else *why = fmt::format("cannot take descriptor {} of process {}: {}", n, pid, std::strerror(e));
            return e == EACCES ? -EPERM : -e;
        }
        if (is_door(fd.fd)) return fd.release();
    }
    if (const std::string old_socket = legacy_socket(pid, inodes); !old_socket.empty()) {
        *why = fmt::format("the agent in process {} is older than this tool: it listens on {}, a path any user could "
                           "have made, which this tool does not trust (restart the program for a current agent)",
                           pid, escape_controls(old_socket));
        return -EPROTONOSUPPORT;
    }
    *why = fmt::format("no agent in process {}", pid);
    return -ENOENT;
}

// Sends `conn` through the door, waiting up to 5 s for room: 0 or -errno with *why.
int pass(int door, int conn, pid_t pid, std::string *why)
{
    const long n = os::send_with_fd(door, kConnectTag, sizeof kConnectTag - 1, conn, 5000);
    if (n >= 0) return 0;
    const int e = static_cast<int>(-n);
    *why = e == EAGAIN ? fmt::format("the agent of process {} takes no connection (its door stayed full for 5 s)", pid)
                       : fmt::format("cannot reach the agent of process {}: {}", pid, std::strerror(e));
    return -e;
}

}  // namespace

int open_door(Door *d, std::string *why)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
        const int e = errno;
        *why = fmt::format("cannot make the agent's door: {}", std::strerror(e));
        return -e;
    }
    if (int r = label(sv[1], why); r < 0) {
        close(sv[0]);
        close(sv[1]);
        return r;
    }
    // Out of the program's way (os/linux/high_fd.hpp), and never blocking the agent's thread.
    d->in = os::move_fd_high(sv[0]);
    d->out = os::move_fd_high(sv[1]);
    fcntl(d->in, F_SETFL, fcntl(d->in, F_GETFL) | O_NONBLOCK);
    d->in_id = os::identity_of(d->in);
    d->out_id = os::identity_of(d->out);
    return 0;
}

bool door_is_ours(const Door &d)
{
    return d.in >= 0 && d.out >= 0 && os::is_same_file(d.in, d.in_id) && os::is_same_file(d.out, d.out_id);
}

void close_door(Door *d)
{
    if (d->in >= 0 && os::is_same_file(d->in, d->in_id)) close(d->in);
    if (d->out >= 0 && os::is_same_file(d->out, d->out_id)) close(d->out);
    *d = Door{};
}

int take_connection(int in)
{
    char data[64];
    std::vector<int> fds;
    const long n = os::receive_with_fds(in, data, sizeof data, MSG_DONTWAIT, &fds);
    if (n < 0) return static_cast<int>(n);
    if (n == 0 && fds.empty()) return -ECONNRESET;  // shut (or an empty message)
    // Every descriptor the message carried: the first, when the message is a tool's and it is
    // a stream socket, is the connection; the others are closed.
    int conn = -1;
    const bool tagged = static_cast<size_t>(n) == sizeof kConnectTag - 1 && std::memcmp(data, kConnectTag, n) == 0;
    for (int fd : fds) {
        if (conn < 0 && tagged && is_unix_socket(fd, SOCK_STREAM)) conn = fd;
        else close(fd);
    }
    return conn < 0 ? -1 : os::move_fd_high(conn);
}

int connect_through_door(pid_t pid, std::string *why)
{
    if (pid <= 0) {
        *why = fmt::format("{} is not a process id", pid);
        return -EINVAL;
    }
    Fd pidfd(static_cast<int>(syscall(SYS_pidfd_open, pid, 0)));
    if (pidfd.fd < 0) {
        const int e = errno;
        *why = e == ESRCH    ? fmt::format("no process {}", pid)
               : e == EINVAL ? fmt::format("{} is not a process id (a thread's?)", pid)
               : e == ENOSYS ? std::string("this kernel has no pidfd_open (Linux 5.3 and later have it)")
                             : fmt::format("cannot open process {}: {}", pid, std::strerror(e));
        return -e;
    }
    Fd door(find_door(pid, pidfd.fd, why));
    if (door.fd < 0) return door.fd;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
        const int e = errno;
        *why = fmt::format("socketpair: {}", std::strerror(e));
        return -e;
    }
    Fd mine(sv[0]), theirs(sv[1]);
    if (int r = pass(door.fd, theirs.fd, pid, why); r < 0) return r;
    return mine.release();
}

}  // namespace liveprobe::agent
