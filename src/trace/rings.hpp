// The tracer's shared memory: one single-producer event ring per thread of the target, and the
// per-thread counters of --count and --hist, in a memfd that
// the `liveprobe` tool maps too (through /proc/PID/fd/N), so that events leave the target with
// no system call and no lock. A ring never blocks its thread: a full ring drops the event and
// counts it. A thread claims a ring on its first event; when every ring is taken, its events are
// dropped and counted in the header.
//
// Layout (all little-endian, fixed): Header, then kRings RingHead, then kRings rings of
// kRingRecords records of 32 bytes. The writer fills a record, then publishes `head` (release);
// the reader copies records below `head`, then publishes `tail` (release). The mapping is shared
// between two processes: every field is an atomic of lock-free size.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace liveprobe::trace {

constexpr uint64_t kRingsMagic = 0x38676e6972706c;  // "lpring8"
constexpr uint32_t kRings = 64;
constexpr uint32_t kRingRecords = 524288;  // 16 MiB a thread (the memfd is sparse: only what is written)

// One event: a call that returned (FUNC), or a hit (p:, FUNC+OFF) or return (r:) with the
// spec's fetched values, which fill the records after it (trace/spec.hpp's payload; the reader
// knows each probe's size from its spec, so records carry no length). 32 bytes, as uftrace's
// entry and exit records together.
struct Record {
    uint32_t probe;
    uint32_t tid;
    uint64_t entry_ns;  // liveprobe_ktime_ns at the entry
    uint64_t exit_ns;   // at the return (a p: hit: the same as entry_ns)
    uint64_t retval;    // rax (a p: hit: the instruction's address)
};
static_assert(sizeof(Record) == 32);
// --tree (Mode::tree) writes two more events, which no other mode does, with no values; exit_ns
// says which. An entry event: a call began at entry_ns; its return's event follows, or a left
// event: the call began at entry_ns left without returning (a longjmp, an exception).
constexpr uint64_t kEntryEvent = 0;
constexpr uint64_t kLeftEvent = 1;
inline bool is_tree_marker(const Record &r) { return r.exit_ns <= kLeftEvent; }

// The records an event with `payload` bytes of values takes.
inline uint32_t record_slots(size_t payload)
{
    return 1 + static_cast<uint32_t>((payload + sizeof(Record) - 1) / sizeof(Record));
}

// The writer's fields and the reader's `tail` on cache lines of their own: on one line, every
// event's store of head took the line from a reader polling tail, and back.
struct alignas(64) RingHead {
    std::atomic<uint64_t> head{0};     // records written (the writer's)
    std::atomic<uint64_t> dropped{0};  // records the full ring did not take
    std::atomic<int32_t> tid{0};       // the thread that claimed it, 0 while free
    // Its process, stored as it is claimed (before its first record): a forked child shares
    // the memory and claims rings of its own, and the tool files each ring's events under it
    // (0: an agent before this field, in what was the padding before hist_pending).
    std::atomic<int32_t> pid{0};
    // --hist: one call not in the ring's histogram rows yet, as the index of its bucket word in
    // them + 1 (0: none). The light return's body (hist_return.S lp_trace_hist_inline) counts
    // the call before in its bucket, whose address is long known by then, and leaves its own
    // here: a store whose address hangs on the rdtsc just made held up the loads after it, 8
    // TSC cycles a call. The tool adds the one left at the end (cmd_trace.cpp totals_of).
    std::atomic<uint64_t> hist_pending{0};
    alignas(64) std::atomic<uint64_t> tail{0};  // records read (the reader's)
};
static_assert(sizeof(RingHead) == 128 && offsetof(RingHead, hist_pending) == 24);

struct alignas(64) Header {
    uint64_t magic;
    uint32_t rings;
    uint32_t records;
    std::atomic<uint64_t> unringed{0};  // events of threads that found no free ring
    // How many probes the session has. It grows when a library that a spec names is loaded
    // after the start, up to `capacity` (the per-probe areas' stride); it is published after
    // the new probes' names and before they are registered, so that no event names a probe
    // the reader cannot know.
    std::atomic<uint32_t> probes{0};
    uint32_t capacity;
    uint32_t hist;                      // 1: the hist area is there
    std::atomic<uint32_t> final{0};     // 1: nmissed copied (the session stopped or the process exited)
    // "spec TEXT" for each resolved spec, "ADDRESS SPEC NAME" for each probe (SPEC: its index),
    // a line each, in order; appended when probes are added (up to names_room bytes), then
    // "slow INDEX REASON" for each of those on the breakpoint path (when there is room). A
    // session started from the environment (`trace -- CMD`) begins with "exe PATH", its
    // executable.
    uint64_t names_offset;
    std::atomic<uint64_t> names_bytes{0};
    uint64_t names_room;
    // 1: the session is set up (probes, names); 2: it never will be (the program the tool
    // started runs untraced: agent/trace_env.cpp), and the tool's "placing probes" line goes.
    std::atomic<uint32_t> ready{0};
    // 1: --count, whose count rows hold the calls; otherwise they hold the calls that left
    // without returning (an exception, a longjmp, the thread's exit: the unwind handler).
    uint32_t counts_calls;
    // --by, --hist-of, --stacks: the bytes each event carries after its spec's values
    // (session.hpp's ExtraLayout), and the most frames of a stack; 0 without them (and from an
    // agent before them).
    uint32_t extra_bytes;
    uint32_t stack_depth;
};

constexpr uint32_t kHistBuckets = 40;  // log2 of nanoseconds: bucket b holds [2^(b-1), 2^b)

// After the rings (each per-probe area has `capacity` entries), per probe: its nmissed (copied
// from the target's kretprobe when the session stops or the process exits), then per ring
// (thread) and probe: a count (--count: the calls; otherwise: the calls that left without
// returning, Header::counts_calls), and for --hist the buckets, 64-bit (a hot function
// fills 2^32 in minutes), whose sum is the count (--hist's return touches one line, not two).
// The file is sparse: rows no thread touched take no memory.
constexpr size_t kRingsBytes = sizeof(Header) + kRings * sizeof(RingHead) + size_t{kRings} * kRingRecords * sizeof(Record);
inline size_t missed_offset() { return kRingsBytes; }
inline size_t counts_offset(uint32_t capacity) { return kRingsBytes + size_t{capacity} * 8; }
inline size_t hist_offset(uint32_t capacity) { return counts_offset(capacity) + size_t{kRings} * capacity * 8; }
inline size_t names_offset(uint32_t capacity, bool hist)
{
    return hist_offset(capacity) + (hist ? size_t{kRings} * capacity * kHistBuckets * 8 : 0);
}
// A memfd the tool makes for a program it starts: sparse, large enough for any session.
constexpr size_t kToolMemfdBytes = size_t{1} << 32;

// The views of a mapping.
inline Header *header_of(void *base) { return static_cast<Header *>(base); }
inline RingHead *ring_head(void *base, uint32_t i)
{
    return reinterpret_cast<RingHead *>(static_cast<char *>(base) + sizeof(Header)) + i;
}
inline Record *ring_records(void *base, uint32_t i)
{
    return reinterpret_cast<Record *>(static_cast<char *>(base) + sizeof(Header) + kRings * sizeof(RingHead)) +
           size_t{i} * kRingRecords;
}
inline std::atomic<uint64_t> *missed_of(void *base, uint32_t probe)
{
    return reinterpret_cast<std::atomic<uint64_t> *>(static_cast<char *>(base) + missed_offset()) + probe;
}
inline std::atomic<uint64_t> *count_of(void *base, uint32_t capacity, uint32_t ring, uint32_t probe)
{
    return reinterpret_cast<std::atomic<uint64_t> *>(static_cast<char *>(base) + counts_offset(capacity)) +
           size_t{ring} * capacity + probe;
}
inline std::atomic<uint64_t> *hist_of(void *base, uint32_t capacity, uint32_t ring, uint32_t probe)
{
    return reinterpret_cast<std::atomic<uint64_t> *>(static_cast<char *>(base) + hist_offset(capacity)) +
           (size_t{ring} * capacity + probe) * kHistBuckets;
}

}  // namespace liveprobe::trace
