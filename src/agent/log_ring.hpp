// The process's log: what printk writes (probe modules), read by `liveprobe dmesg`.
//
// A ring of fixed-size records (kRecords x kRecordBytes = 1 MiB) that, like the kernel's log
// buffer, overwrites its oldest lines when full, never blocks a writer, and counts what it
// overwrote. A line longer than one record takes several consecutive ones.
//
// Concurrency: any number of writers (handlers on any thread, signal handlers included: no
// lock, no allocation, no libc call) and readers. A writer reserves consecutive sequence
// numbers with one fetch_add on `next_`; record seq lives at slot seq % kRecords, guarded by
// its own sequence word (odd while being written, 2 * seq + 2 once complete). A reader copies
// a record and keeps it only if the word says `complete, seq` before and after the copy: a
// record overwritten meanwhile is counted as overwritten, never returned torn.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace liveprobe::agent {

class LogRing {
public:
    static constexpr size_t kRecordBytes = 256;  // one record, header included
    static constexpr size_t kRecords = 4096;     // 1 MiB
    static constexpr size_t kPayload = kRecordBytes - 24;  // a multiple of 8
    static constexpr int kDefaultLevel = 4;                // KERN_WARNING, printk's default

    // Appends one line (without its newline; longer than kPayload * kRecords is cut), stamped
    // with liveprobe_ktime_ns() and a printk level (0..7). Async-signal-safe.
    // `cont`: a KERN_CONT line, which readers append to the line before it.
    void write(const char *text, size_t len, int level = kDefaultLevel, bool cont = false) noexcept;

    struct Line {
        uint64_t seq;  // of its first record
        uint64_t ns;   // when it was written (liveprobe_ktime_ns)
        int level;     // printk level, 0..7
        bool cont;     // KERN_CONT: the rest of the line before it
        std::string text;
    };
    // The lines with a first record >= `from`, oldest first, and where to continue. A line that
    // was overwritten before it could be read is left out.
    std::vector<Line> read(uint64_t from, uint64_t *next) const;

    uint64_t lines_written() const noexcept { return lines_.load(std::memory_order_relaxed); }
    // Records overwritten since the start (lines' records; a line of k records counts k).
    uint64_t records_overwritten() const noexcept
    {
        uint64_t n = next_.load(std::memory_order_relaxed);
        return n > kRecords ? n - kRecords : 0;
    }
    uint64_t next_seq() const noexcept { return next_.load(std::memory_order_acquire); }
    // Records not written because their slot was still being written by a writer lapped by the
    // whole ring (the line they belong to is lost; rare: a writer preempted mid-line).
    uint64_t records_dropped() const noexcept { return dropped_.load(std::memory_order_relaxed); }

private:
    // Every field is atomic (relaxed, ordered by `word`): a reader may copy a record while a
    // writer overwrites it, and then throws the copy away; that is a seqlock, and its racing
    // accesses must be atomic to be defined (and for TSan).
    struct alignas(64) Record {
        std::atomic<uint64_t> word{0};        // 2 * seq + 1 while written, 2 * seq + 2 when complete
        std::atomic<uint32_t> len{0};         // payload bytes in this record
        std::atomic<uint32_t> flags{0};       // kFirst, kLast, kCont, level << 8
        std::atomic<uint64_t> ns{0};          // the line's time stamp
        std::atomic<uint64_t> payload[kPayload / 8] = {};
    };
    struct Copy {
        uint32_t len = 0;
        uint32_t flags = 0;
        uint64_t ns = 0;
        char payload[kPayload];
    };
    static_assert(sizeof(Record) == kRecordBytes);
    static constexpr uint32_t kFirst = 1, kLast = 2, kCont = 4;

    // Copies record seq if it is complete and still seq's: false otherwise.
    bool copy(uint64_t seq, Copy *out) const noexcept;

    std::atomic<uint64_t> next_{0};
    std::atomic<uint64_t> lines_{0};
    std::atomic<uint64_t> dropped_{0};
    Record records_[kRecords];
};

// The process's ring (lives as long as the library).
LogRing &log_ring() noexcept;

}  // namespace liveprobe::agent
