// The writing side of `liveprobe trace -o FILE`: the reader hands it bytes, a thread of its own
// writes them. The reader must empty the target's rings as fast as the target fills them, and a
// write() can stall for hundreds of milliseconds while the kernel flushes dirty pages to a slow
// disk; in the meantime the bytes wait in memory (up to 1 GiB, then the reader waits, and the
// target's full rings drop events and count them).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace liveprobe::tool {

class TraceWriter {
  public:
    // Opens (creates, truncates) the file: false with *why.
    bool open(const std::string &path, std::string *why);
    // Queues n bytes. false once a write failed (the error is kept for close()).
    bool write(const void *data, size_t n);
    // A write failed.
    bool failed();
    // Writes what is queued, closes the file: false with *why on any error. Returns the bytes
    // written in *bytes.
    bool close(size_t *bytes, std::string *why);
    ~TraceWriter();

  private:
    void run();
    void flush_chunk();  // the current chunk to the queue (mu_ held)

    static constexpr size_t kChunk = size_t{4} << 20;
    static constexpr size_t kMaxQueued = 256;  // chunks: 1 GiB
    int fd_ = -1;
    std::mutex mu_;
    std::condition_variable ready_, room_;
    std::deque<std::vector<char>> queue_;
    std::vector<char> chunk_;
    bool closing_ = false;
    int error_ = 0;
    size_t written_ = 0;
    std::thread thread_;
};

}  // namespace liveprobe::tool
