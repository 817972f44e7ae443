// The HTTP side of `trace --serve` (metrics_http.cpp): GET /metrics answered with what `render`
// writes, in the format the scrape's Accept header asks for (metrics_exposition.hpp). Served by
// libmicrohttpd from the trace loop's own thread (its epoll descriptor polled beside the
// loop's): a scrape reads the shared memory between two turns of the loop, with no lock, and
// costs the traced processes nothing.
#pragma once

#include <poll.h>

#include <functional>
#include <string>
#include <vector>

#include "metrics_exposition.hpp"

struct MHD_Daemon;

namespace liveprobe::tool {

class MetricsHttp {
public:
    MetricsHttp() = default;
    MetricsHttp(const MetricsHttp &) = delete;
    MetricsHttp &operator=(const MetricsHttp &) = delete;
    ~MetricsHttp();

    // Listens at `where`: "unix:PATH" (a socket only its owner can use), "HOST:PORT",
    // "[IPV6]:PORT", or ":PORT" / "PORT" on loopback (127.0.0.1). Port 0: one the kernel picks.
    // False with *why.
    bool listen(const std::string &where, std::string *why);
    // Where scrapes go: "http://127.0.0.1:9464/metrics", or "unix:PATH (GET /metrics)".
    const std::string &url() const { return url_; }

    // The descriptor to poll for POLLIN, and how long until a connection times out (ms, -1).
    void add_pollfds(std::vector<struct pollfd> *fds) const;
    int timeout_ms() const;
    // Serves the connections that are ready; a scrape calls render.
    void run();

    std::function<std::string(MetricsFormat)> render;
    // A scrape's body, by render; counted.
    std::string scrape(MetricsFormat f)
    {
        ++scrapes_;
        return render ? render(f) : std::string();
    }
    uint64_t scrapes() const { return scrapes_; }

private:
    MHD_Daemon *daemon_ = nullptr;
    int epoll_fd_ = -1;
    std::string url_, unix_path_;
    uint64_t scrapes_ = 0;
};

}  // namespace liveprobe::tool
