#include "progress_line.hpp"

#include <unistd.h>

#include <cstdio>

#include <fmt/format.h>

namespace liveprobe::tool {

ProgressLine::ProgressLine(bool wanted) : enabled_(wanted && isatty(STDERR_FILENO) == 1) {}

void ProgressLine::show(const std::string &text)
{
    if (!enabled_) return;
    const auto now = std::chrono::steady_clock::now();
    if (shown_ && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    shown_ = true;
    // \r and "erase to the end of the line": a shorter text leaves nothing of the longer one.
    std::fprintf(stderr, "\r%s\033[K", text.c_str());
    std::fflush(stderr);
}

void ProgressLine::clear()
{
    if (!shown_) return;
    shown_ = false;
    std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
}

ProgressTicker::ProgressTicker(std::function<std::string(double)> text)
{
    if (!line_.enabled()) return;
    thread_ = std::thread([this, text = std::move(text)] {
        const auto t0 = std::chrono::steady_clock::now();
        std::unique_lock lk(mu_);
        while (!cv_.wait_for(lk, std::chrono::milliseconds(100), [&] { return stop_; }))
            line_.show(text(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()));
        line_.clear();
    });
}

void ProgressTicker::stop()
{
    if (!thread_.joinable()) return;
    {
        std::lock_guard lk(mu_);
        stop_ = true;
    }
    cv_.notify_one();
    thread_.join();
}

std::string human_bytes(double bytes)
{
    const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (bytes >= 1024 && u < 4) bytes /= 1024, ++u;
    return u == 0 ? fmt::format("{:.0f} B", bytes) : fmt::format("{:.1f} {}", bytes, unit[u]);
}

}  // namespace liveprobe::tool
