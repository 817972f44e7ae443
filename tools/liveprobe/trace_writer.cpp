#include "trace_writer.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace liveprobe::tool {

bool TraceWriter::open(const std::string &path, std::string *why)
{
    fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) {
        *why = fmt::format("{}: {}", path, std::strerror(errno));
        return false;
    }
    thread_ = std::thread([this] { run(); });
    return true;
}

std::vector<char> TraceWriter::buffer()
{
    std::vector<char> b;
    {
        std::lock_guard lk(mu_);
        if (!free_.empty()) {
            b = std::move(free_.back());
            free_.pop_back();
        }
    }
    if (b.size() < kBuffer) b.resize(kBuffer);
    return b;
}

bool TraceWriter::submit(std::vector<char> b, size_t n)
{
    std::unique_lock lk(mu_);
    if (n == 0 || error_ != 0) return error_ == 0;
    room_.wait(lk, [&] { return queued_ < kMaxQueued || error_ != 0; });
    queued_ += n;
    queue_.emplace_back(std::move(b), n);
    ready_.notify_one();
    return error_ == 0;
}

bool TraceWriter::write(const void *data, size_t n)
{
    std::vector<char> b = buffer();
    if (b.size() < n) b.resize(n);
    std::memcpy(b.data(), data, n);
    return submit(std::move(b), n);
}

bool TraceWriter::failed()
{
    std::lock_guard lk(mu_);
    return error_ != 0;
}

void TraceWriter::run()
{
    // At the reader's priority. It was once niced to 19, when the write()s of 4 MiB chunks,
    // their copies into the page cache from memory no cache held, took most of the tool's
    // time. With buffers of kBuffer bytes, reused, the copies cost a tenth of that, and a niced
    // writer was the weak link: beside a busy process it got no CPU, the queue filled, the
    // reader waited for room and the target's rings dropped a quarter of jq's events
    // (bench/README, "The trace file's reader").
    std::unique_lock lk(mu_);
    for (;;) {
        ready_.wait(lk, [&] { return !queue_.empty() || closing_; });
        if (queue_.empty()) return;  // closing, and everything is written
        auto [c, n] = std::move(queue_.front());
        queue_.pop_front();
        queued_ -= n;
        room_.notify_one();
        if (error_ != 0) continue;  // the file is broken: the rest goes nowhere
        lk.unlock();
        int e = 0;
        for (size_t off = 0; off < n && e == 0;) {
            ssize_t w = ::write(fd_, c.data() + off, n - off);
            if (w < 0 && errno != EINTR) e = errno;
            else if (w > 0) off += static_cast<size_t>(w);
        }
        lk.lock();
        if (e != 0 && error_ == 0) error_ = e;
        if (e == 0) written_ += n;
        if (free_.size() < kKeepFree) free_.push_back(std::move(c));
    }
}

bool TraceWriter::close(size_t *bytes, std::string *why)
{
    if (fd_ < 0) return true;
    {
        std::lock_guard lk(mu_);
        closing_ = true;
        ready_.notify_one();
    }
    thread_.join();
    int e = error_;
    if (::close(fd_) != 0 && e == 0) e = errno;
    fd_ = -1;
    *bytes = written_;
    if (e != 0) *why = std::strerror(e);
    return e == 0;
}

TraceWriter::~TraceWriter()
{
    size_t bytes;
    std::string why;
    close(&bytes, &why);
}

}  // namespace liveprobe::tool
