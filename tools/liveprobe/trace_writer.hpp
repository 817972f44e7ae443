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
#include <utility>
#include <vector>

namespace liveprobe::tool {

class TraceWriter {
  public:
    // Opens (creates, truncates) the file: false with *why.
    bool open(const std::string &path, std::string *why);
    // Queues n bytes (a copy). false once a write failed (the error is kept for close()).
    bool write(const void *data, size_t n);
    // A buffer of kBuffer bytes or more to fill, for submit(): one already written out when
    // there is one (its pages are in memory: a new one would fault every page in again, and
    // its bytes are not cleared again).
    std::vector<char> buffer();
    // Queues the first n bytes of b after what is queued, without a copy. false once a write
    // failed.
    bool submit(std::vector<char> b, size_t n);
    static constexpr size_t kBuffer = size_t{256} << 10;  // small enough to be in the cache still
    // A write failed.
    bool failed();
    // Writes what is queued, closes the file: false with *why on any error. Returns the bytes
    // written in *bytes.
    bool close(size_t *bytes, std::string *why);
    ~TraceWriter();

  private:
    void run();

    static constexpr size_t kMaxQueued = size_t{1} << 30;  // bytes
    static constexpr size_t kKeepFree = 16;                // buffers
    int fd_ = -1;
    std::mutex mu_;
    std::condition_variable ready_, room_;
    std::deque<std::pair<std::vector<char>, size_t>> queue_;  // a buffer, its bytes to write
    std::vector<std::vector<char>> free_;  // written out, for buffer()
    size_t queued_ = 0;                    // bytes in queue_
    bool closing_ = false;
    int error_ = 0;
    size_t written_ = 0;
    std::thread thread_;
};

}  // namespace liveprobe::tool
