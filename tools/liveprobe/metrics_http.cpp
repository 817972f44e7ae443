// `trace --serve`'s HTTP server (metrics_http.hpp), on libmicrohttpd: a well-kept server of
// HTTP/1.1 (keep-alive, pipelining, slow and malformed clients, timeouts) that runs inside
// another program's event loop.
#include "metrics_http.hpp"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace liveprobe::tool {
namespace {

// A listening socket for `where` (MetricsHttp::listen's forms): its descriptor, or -1 with *why.
int listen_socket(const std::string &where, std::string *url, std::string *unix_path, std::string *why)
{
    if (where.rfind("unix:", 0) == 0) {
        const std::string path = where.substr(5);
        struct sockaddr_un a {};
        a.sun_family = AF_UNIX;
        if (path.empty() || path.size() >= sizeof a.sun_path) {
            *why = fmt::format("--serve {}: a socket's path of 1 to {} bytes", where, sizeof a.sun_path - 1);
            return -1;
        }
        std::memcpy(a.sun_path, path.data(), path.size());
        const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        // Its owner's alone: the functions' names are not for every local user.
        const mode_t mask = umask(0177);
        struct stat st {};
        if (lstat(path.c_str(), &st) == 0 && !S_ISSOCK(st.st_mode)) {
            *why = fmt::format("--serve {}: {} is there, and is no socket", where, path);
            close(fd);
            umask(mask);
            return -1;
        }
        if (lstat(path.c_str(), &st) == 0) unlink(path.c_str());  // a server's before us
        const bool bound = fd >= 0 && bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof a) == 0;
        umask(mask);
        if (!bound || ::listen(fd, 64) != 0) {
            *why = fmt::format("--serve {}: {}", where, std::strerror(errno));
            if (fd >= 0) close(fd);
            return -1;
        }
        *unix_path = path;
        *url = fmt::format("unix:{} (GET /metrics)", path);
        return fd;
    }
    std::string host = "127.0.0.1", port = where;
    if (const size_t colon = where.rfind(':'); colon != std::string::npos) {
        host = where.substr(0, colon);
        port = where.substr(colon + 1);
        if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
        if (host.empty()) host = "127.0.0.1";
    }
    // (At most 5 digits before stoul: more threw out_of_range and aborted the tool.)
    if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos ||
        std::stoul(port) > 65535) {
        *why = fmt::format("--serve {}: ADDR:PORT, :PORT (loopback) or unix:PATH", where);
        return -1;
    }
    struct addrinfo hints {}, *res = nullptr;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV | AI_PASSIVE;
    if (int r = getaddrinfo(host.c_str(), port.c_str(), &hints, &res); r != 0) {
        *why = fmt::format("--serve {}: {}", where, gai_strerror(r));
        return -1;
    }
    int fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    const int one = 1;
    if (fd >= 0) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (fd < 0 || bind(fd, res->ai_addr, res->ai_addrlen) != 0 || ::listen(fd, 64) != 0) {
        *why = fmt::format("--serve {}: {}", where, std::strerror(errno));
        if (fd >= 0) close(fd);
        freeaddrinfo(res);
        return -1;
    }
    freeaddrinfo(res);
    struct sockaddr_storage bound {};
    socklen_t len = sizeof bound;
    getsockname(fd, reinterpret_cast<sockaddr *>(&bound), &len);
    char text[INET6_ADDRSTRLEN] = "?";
    unsigned bound_port = 0;
    if (bound.ss_family == AF_INET6) {
        auto *a6 = reinterpret_cast<sockaddr_in6 *>(&bound);
        inet_ntop(AF_INET6, &a6->sin6_addr, text, sizeof text);
        bound_port = ntohs(a6->sin6_port);
        *url = fmt::format("http://[{}]:{}/metrics", text, bound_port);
    } else {
        auto *a4 = reinterpret_cast<sockaddr_in *>(&bound);
        inet_ntop(AF_INET, &a4->sin_addr, text, sizeof text);
        bound_port = ntohs(a4->sin_port);
        *url = fmt::format("http://{}:{}/metrics", text, bound_port);
    }
    return fd;
}

MHD_Result reply(MHD_Connection *c, unsigned status, const std::string &body, const char *type)
{
    MHD_Response *r = MHD_create_response_from_buffer(body.size(), const_cast<char *>(body.data()), MHD_RESPMEM_MUST_COPY);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    const MHD_Result q = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return q;
}

// GET or HEAD of /metrics: the metrics; / says where they are; anything else is not here.
MHD_Result answer(void *cls, MHD_Connection *c, const char *url, const char *method, const char *, const char *,
                  size_t *, void **)
{
    auto *self = static_cast<MetricsHttp *>(cls);
    const bool get = std::strcmp(method, MHD_HTTP_METHOD_GET) == 0, head = std::strcmp(method, MHD_HTTP_METHOD_HEAD) == 0;
    if (!get && !head) return reply(c, MHD_HTTP_METHOD_NOT_ALLOWED, "GET /metrics\n", "text/plain; charset=utf-8");
    if (std::strcmp(url, "/") == 0)
        return reply(c, MHD_HTTP_OK, "liveprobe: the metrics are at /metrics\n", "text/plain; charset=utf-8");
    if (std::strcmp(url, "/metrics") != 0) return reply(c, MHD_HTTP_NOT_FOUND, "not found: GET /metrics\n", "text/plain; charset=utf-8");
    const MetricsFormat f = format_accepted(MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT));
    return reply(c, MHD_HTTP_OK, self->scrape(f), content_type(f));
}

}  // namespace

MetricsHttp::~MetricsHttp()
{
    if (daemon_) MHD_stop_daemon(daemon_);  // closes the listening socket too
    if (!unix_path_.empty()) unlink(unix_path_.c_str());
}

bool MetricsHttp::listen(const std::string &where, std::string *why)
{
    const int fd = listen_socket(where, &url_, &unix_path_, why);
    if (fd < 0) return false;
    daemon_ = MHD_start_daemon(MHD_USE_EPOLL, 0, nullptr, nullptr,
                               &answer, this,
                               MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_CONNECTION_TIMEOUT, 30u,
                               MHD_OPTION_CONNECTION_LIMIT, 64u, MHD_OPTION_END);
    if (!daemon_) {
        *why = fmt::format("--serve {}: the HTTP server (libmicrohttpd) did not start", where);
        close(fd);
        if (!unix_path_.empty()) unlink(unix_path_.c_str());
        unix_path_.clear();
        return false;
    }
    const MHD_DaemonInfo *info = MHD_get_daemon_info(daemon_, MHD_DAEMON_INFO_EPOLL_FD);
    epoll_fd_ = info ? info->epoll_fd : -1;
    return true;
}

void MetricsHttp::add_pollfds(std::vector<struct pollfd> *fds) const
{
    if (epoll_fd_ >= 0) fds->push_back({epoll_fd_, POLLIN, 0});
}

int MetricsHttp::timeout_ms() const
{
    MHD_UNSIGNED_LONG_LONG ms = 0;
    if (!daemon_ || MHD_get_timeout(daemon_, &ms) != MHD_YES) return -1;
    return ms > 1000 ? 1000 : static_cast<int>(ms);
}

void MetricsHttp::run()
{
    if (daemon_) MHD_run(daemon_);
}

}  // namespace liveprobe::tool
