// The events of a trace file (`liveprobe trace -o FILE`, format 3), a few bytes each instead
// of the ring's 32: at about 10 million calls a second, the 32-byte records were more than a
// disk takes (jq's test suite: 7.3 GiB written in 23 s, 17% of the events dropped while the
// writer waited on it).
//
// Each item starts with a varint (probe << 2 | tag), the tag being:
//   0  an event of a thread other than the previous event's: varint tid, then the times and
//      return value below;
//   1  an event of the same thread as the previous event: zigzag varint (exit_ns - the
//      previous event's exit_ns), varint (exit_ns - entry_ns), zigzag varint retval (as a
//      signed value), then the event's fetched values as they are (the probe's spec says how
//      many bytes: trace/spec.hpp payload_bytes); tag 0 has the same after its tid;
//   2  (probe 0) a header written again (probes placed later): u32 N, then the N bytes of
//      the header;
//   3  (probe 0) the process of the events after it: varint pid. A forked child's events are
//      in its parent's file (they come from the memory it shares with its parent), and the
//      header names the parent. Format 3 added it; format 2 is format 3 without it.
// A call of one of the first 32 probes, on the same thread, 100 ns after the previous event
// and shorter than 128 ns with a small return value, takes 5 bytes.
// "Previous" is the previous event of the file, whichever ring it came from; both sides start
// with tid 0 and exit_ns 0, and with the header's pid as the events' process.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "trace/rings.hpp"

namespace liveprobe::tool {

class TraceEncoder {
  public:
    // For a file whose header names process `pid`.
    explicit TraceEncoder(uint32_t pid = 0) : pid_(pid) {}
    // The most bytes event() writes before the values.
    static constexpr size_t kMaxEventBytes = 64;  // 5 varints of at most 10 bytes, a process change
    // Writes event r of process pid, followed by `bytes` bytes of fetched values, at out, which
    // has room for kMaxEventBytes + bytes; returns the end. The reader's loop calls it for
    // every event.
    char *event(const trace::Record &r, uint32_t pid, const char *values, size_t bytes, char *out);
    // The same, appended to *out.
    void event(const trace::Record &r, uint32_t pid, const char *values, size_t bytes, std::string *out);
    // Appends a header written again.
    static void header(const std::string &header, std::string *out);

  private:
    uint32_t pid_;
    uint32_t tid_ = 0;
    uint64_t exit_ = 0;
};

// n bytes from f appended to *out, read a chunk at a time: what it holds grows with what the
// file has, never to a length a (crafted) file only claims. False when the file ends first.
bool read_exactly(FILE *f, size_t n, std::string *out);

class TraceDecoder {
  public:
    // For a file whose header names process `pid`.
    explicit TraceDecoder(uint32_t pid = 0) : pid_(pid) {}
    enum Step { kEvent, kHeader, kEnd, kBad };
    // The next item: an event's record into *r (its values, if its probe has any, are read
    // next with values(); its process is pid()), or a header into *header. kEnd at the end of
    // the file; kBad when it is cut short or not this format.
    Step next(FILE *f, trace::Record *r, std::string *header);
    // The `bytes` bytes of values of the event just read.
    static bool values(FILE *f, size_t bytes, std::string *out);
    // The process of the event just read.
    uint32_t pid() const { return pid_; }

  private:
    uint32_t pid_;
    uint32_t tid_ = 0;
    uint64_t exit_ = 0;
};

}  // namespace liveprobe::tool
