#include "trace_writer.hpp"

#include <fcntl.h>
#include <sys/resource.h>
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
    chunk_.reserve(kChunk);
    thread_ = std::thread([this] { run(); });
    return true;
}

void TraceWriter::flush_chunk()
{
    if (chunk_.empty()) return;
    queue_.push_back(std::move(chunk_));
    chunk_ = {};
    chunk_.reserve(kChunk);
    ready_.notify_one();
}

bool TraceWriter::write(const void *data, size_t n)
{
    const char *p = static_cast<const char *>(data);
    std::unique_lock lk(mu_);
    while (n > 0 && error_ == 0) {
        size_t take = std::min(n, kChunk - chunk_.size());
        chunk_.insert(chunk_.end(), p, p + take);
        p += take;
        n -= take;
        if (chunk_.size() == kChunk) {
            room_.wait(lk, [&] { return queue_.size() < kMaxQueued || error_ != 0; });
            flush_chunk();
        }
    }
    return error_ == 0;
}

bool TraceWriter::failed()
{
    std::lock_guard lk(mu_);
    return error_ != 0;
}

void TraceWriter::run()
{
    // Behind the reader, which must empty the target's rings before they fill: where both
    // share a core (this machine has two, the traced program takes one), the write()s, whose
    // copies into the page cache are most of the tool's time, gave the reader too little of it.
    setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), 19);
    std::unique_lock lk(mu_);
    for (;;) {
        ready_.wait(lk, [&] { return !queue_.empty() || closing_; });
        if (queue_.empty()) return;  // closing, and everything is written
        std::vector<char> c = std::move(queue_.front());
        queue_.pop_front();
        room_.notify_one();
        if (error_ != 0) continue;  // the file is broken: the rest goes nowhere
        lk.unlock();
        int e = 0;
        for (size_t off = 0; off < c.size() && e == 0;) {
            ssize_t w = ::write(fd_, c.data() + off, c.size() - off);
            if (w < 0 && errno != EINTR) e = errno;
            else if (w > 0) off += static_cast<size_t>(w);
        }
        lk.lock();
        if (e != 0 && error_ == 0) error_ = e;
        if (e == 0) written_ += c.size();
    }
}

bool TraceWriter::close(size_t *bytes, std::string *why)
{
    if (fd_ < 0) return true;
    {
        std::lock_guard lk(mu_);
        flush_chunk();
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
