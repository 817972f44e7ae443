#include "agent/channel.hpp"
#include "agent/door.hpp"
#include "os/linux/fd_passing.hpp"
#include "os/linux/runtime_dir.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cctype>
#include <cstring>
#include <sstream>

#include <fmt/format.h>

namespace liveprobe::agent {

std::string runtime_dir(uid_t uid) { return os::runtime_dir(uid); }

int sweep_stale_sockets(uid_t uid)
{
    const std::string dir = runtime_dir(uid);
    DIR *d = opendir(dir.c_str());
    if (!d) return 0;
    int removed = 0;
    while (struct dirent *e = readdir(d)) {
        // follow-PID.sock, a tracer's that follows exec (follow.hpp).
        if (std::strncmp(e->d_name, "follow-", 7) != 0) continue;
        const char *name = e->d_name + 7;
        char *end = nullptr;
        const long pid = std::strtol(name, &end, 10);
        if (pid <= 0 || end == name || std::strcmp(end, ".sock") != 0) continue;
        if (kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;
        if (unlinkat(dirfd(d), e->d_name, 0) == 0) removed++;
    }
    closedir(d);
    return removed;
}

int ensure_runtime_dir(std::string *why)
{
    uid_t uid = getuid();
    std::string dir = runtime_dir(uid);
    if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
        int e = errno;
        *why = fmt::format("cannot create {}: {}", dir, std::strerror(e));
        return -e;
    }
    struct stat st {};
    if (lstat(dir.c_str(), &st) != 0) {
        int e = errno;
        *why = fmt::format("cannot stat {}: {}", dir, std::strerror(e));
        return -e;
    }
    if (!S_ISDIR(st.st_mode)) {
        *why = fmt::format("{} is not a directory", dir);
        return -ENOTDIR;
    }
    if (st.st_uid != uid) {
        *why = fmt::format("{} belongs to user {}, not {}: refusing to put a control socket there", dir, st.st_uid, uid);
        return -EPERM;
    }
    if (st.st_mode & 077) {
        *why = fmt::format("{} can be entered by others (mode {:o}): refusing to put a control socket there", dir,
                           st.st_mode & 07777);
        return -EPERM;
    }
    return 0;
}

std::string encode_arg(const std::string &a)
{
    std::string out;
    for (unsigned char c : a) {
        if (c <= 0x20 || c == '%' || c == 0x7f) out += fmt::format("%{:02X}", c);
        else out += static_cast<char>(c);
    }
    return out.empty() ? std::string("%") : out;  // a lone '%': the empty argument
}

std::string decode_arg(const std::string &a)
{
    if (a == "%") return "";
    std::string out;
    for (size_t i = 0; i < a.size(); ++i) {
        if (a[i] == '%' && i + 2 < a.size() && std::isxdigit(static_cast<unsigned char>(a[i + 1])) &&
            std::isxdigit(static_cast<unsigned char>(a[i + 2]))) {
            out += static_cast<char>(std::stoi(a.substr(i + 1, 2), nullptr, 16));
            i += 2;
        } else {
            out += a[i];
        }
    }
    return out;
}

std::string escape_controls(const std::string &s)
{
    std::string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size(); ++i) {
        const auto c = static_cast<unsigned char>(s[i]);
        const bool c1 = c == 0xc2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) >= 0x80 &&
                        static_cast<unsigned char>(s[i + 1]) <= 0x9f;
        if ((c < 0x20 && c != '\t') || c == 0x7f) {
            out += fmt::format("\\x{:02x}", c);
        } else if (c1) {
            out += fmt::format("\\xc2\\x{:02x}", static_cast<unsigned char>(s[i + 1]));
            ++i;
        } else {
            out += static_cast<char>(c);
        }
    }
    return out;
}

bool parse_request(const std::string &line, Request *out, std::string *why)
{
    std::istringstream in(line);
    std::string head;
    if (!(in >> head) || head.rfind(kProtocolPrefix, 0) != 0) {
        *why = fmt::format("not a liveprobe request (it starts with '{}')", head);
        return false;
    }
    char *end = nullptr;
    std::string v = head.substr(std::strlen(kProtocolPrefix));
    long version = std::strtol(v.c_str(), &end, 10);
    if (v.empty() || *end || version <= 0) {
        *why = fmt::format("bad protocol version '{}'", v);
        return false;
    }
    out->version = static_cast<int>(version);
    if (!(in >> out->verb)) {
        *why = "no verb";
        return false;
    }
    out->args.clear();
    for (std::string a; in >> a;) out->args.push_back(decode_arg(a));
    return true;
}

namespace {

// Waits for fd to be ready for `events` until `deadline_ms` has passed: false on timeout.
bool wait_fd(int fd, short events, int timeout_ms)
{
    struct pollfd p = {fd, events, 0};
    for (;;) {
        int r = poll(&p, 1, timeout_ms);
        if (r > 0) return true;
        if (r == 0) return false;
        if (errno != EINTR) return false;
    }
}

}  // namespace

namespace {

// Parses the reply's lines in buf; true when its last line ("ok" or "error ...") was there.
bool parse_reply(const std::string &buf, Reply *out)
{
    const int fd = out->fd;  // received with the reply's bytes
    *out = Reply{};
    out->fd = fd;
    std::istringstream in(buf);
    for (std::string l; std::getline(in, l);) {
        // Every line is the target's to write: its control characters escaped.
        if (l.rfind(". ", 0) == 0) {
            out->lines.push_back(escape_controls(l.substr(2)));
        } else if (l == ".") {
            out->lines.emplace_back();
        } else if (l == "ok") {
            out->ok = true;
            return true;
        } else if (l.rfind("error ", 0) == 0) {
            std::istringstream e(l.substr(6));
            e >> out->err;
            std::getline(e >> std::ws, out->reason);
            out->reason = escape_controls(out->reason);
            return true;
        }
    }
    return false;
}

// A request the agent does not know: an agent older than the tool (a package upgraded under a
// long-running process). Says so, and how to get a current one.
void explain_unknown(pid_t pid, const std::string &verb, Reply *out)
{
    if (out->ok || out->reason.rfind("unknown request", 0) != 0) return;
    out->reason = fmt::format(
        "the agent in process {} is older than this tool and does not serve '{}' ({}); {}", pid, verb, out->reason,
        verb == "detach" ? "restart the program to give it a current agent"
                         : fmt::format("detach it (liveprobe detach -p {}) and attach again, or restart the program", pid));
}

}  // namespace

int request(pid_t pid, const std::string &verb, const std::vector<std::string> &args, Reply *out, std::string *why,
            int timeout_ms, int *held)
{
    if (held) *held = -1;
    out->fd = -1;
    const int fd = connect_through_door(pid, why);
    if (fd < 0) return fd;
    struct Closer {
        int fd;
        ~Closer()
        {
            if (fd >= 0) close(fd);
        }
    } closer{fd};
    std::string line = fmt::format("{}{} {}", kProtocolPrefix, kProtocolVersion, verb);
    for (const std::string &a : args) line += " " + encode_arg(a);
    line += "\n";
    for (size_t off = 0; off < line.size();) {
        ssize_t n = send(fd, line.data() + off, line.size() - off, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            int e = errno;
            *why = fmt::format("cannot send to the agent of {}: {}", pid, std::strerror(e));
            return -e;
        }
        off += static_cast<size_t>(n);
    }
    // Until the agent closes the connection; or, for a held one (which the agent keeps open),
    // until the reply's last line.
    std::string buf;
    char chunk[4096];
    for (;;) {
        if (!wait_fd(fd, POLLIN, timeout_ms)) {
            *why = fmt::format("the agent of process {} did not answer within {} ms", pid, timeout_ms);
            return -ETIMEDOUT;
        }
        // Any descriptor the reply carries: the first kept (out->fd), the others closed.
        std::vector<int> fds;
        const long n = os::receive_with_fds(fd, chunk, sizeof chunk, 0, &fds);
        for (int f : fds) {
            if (out->fd < 0) out->fd = f;
            else close(f);
        }
        if (n < 0) {
            if (out->fd >= 0) close(out->fd);
            out->fd = -1;
            *why = fmt::format("cannot read the agent's reply: {}", std::strerror(static_cast<int>(-n)));
            return static_cast<int>(n);
        }
        if (n == 0) break;
        buf.append(chunk, static_cast<size_t>(n));
        if (held && !buf.empty() && buf.back() == '\n' && parse_reply(buf, out)) {
            explain_unknown(pid, verb, out);
            *held = fd;
            closer.fd = -1;
            return 0;
        }
    }
    if (parse_reply(buf, out)) {
        explain_unknown(pid, verb, out);
        return 0;
    }
    if (out->fd >= 0) close(out->fd);
    out->fd = -1;
    *why = fmt::format("the agent of process {} closed the connection without a complete reply", pid);
    return -EPROTO;
}

}  // namespace liveprobe::agent
