// What `liveprobe trace` reads: one program image or more, each with the shared memory of its
// session (src/trace/rings.hpp). The first is the process the tool attached to (-p) or started
// (-- CMD); following exec, each program a process of the started tree executes is another
// (src/agent/follow.hpp), whose memory the tool keeps until it has read it whole.
//
// The calls of every image are summed into Folded as each image ends: by function, the names of
// an executable's own functions under the executable's name ("app:main") once more than one
// executable was traced, a library's ("libz.so.1:inflate") across all of them.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "trace/rings.hpp"
#include "trace_codec.hpp"
#include "trace_output.hpp"
#include "trace_writer.hpp"

namespace liveprobe::tool {

// What the reader knows of a session's shared memory.
struct Shm {
    void *base = nullptr;
    size_t bytes = 0;
    uint32_t probes = 0;      // the probes whose names it has read
    uint32_t capacity = 0;    // the per-probe areas' stride
    uint64_t names_bytes = 0; // how much of the names it has read
    // Set when a field of the mapping is out of its bounds (the target wrote it: corrupt, or
    // hostile): what was wrong. Nothing more is read of it.
    std::string corrupt;
};

// The session's shared memory in fd, mapped for reading its rings and rows: its base, with
// *bytes its size, or nullptr with *why. Refused unless its size is sealed (F_SEAL_SHRINK: a
// target that shrank it would kill the tool with SIGBUS) and at least its fixed part.
void *map_session(int fd, size_t *bytes, std::string *why);

struct Image {
    int pid = 0;
    std::string exe;     // its executable's path (empty: not known yet)
    std::string prefix;  // "EXE:" before its own functions' names in events, or empty
    Shm shm;
    TraceProbes probes;      // names demangled, with `prefix` before the executable's own
    std::vector<uint8_t> own;  // probe i is a function of the executable itself (no "OBJECT:")
    std::map<uint32_t, std::string> slow;  // the probes on the breakpoint path, with why
    bool named = false;  // the session is set up and its names read
    bool corrupt_told = false;  // shm.corrupt was said
    int conn = -1;       // a followed image's connection: open while a process of it lives
    // -o FILE: its events, encoded into its own trace file.
    std::unique_ptr<TraceWriter> out;
    TraceEncoder encoder;
    std::vector<char> encoded;
    ~Image();
};

// The session's names and specs, once the target has set it up: false until then, or when a
// field is out of bounds (im.shm.corrupt says which, and nothing more is read).
bool load_names(Image &im);

// Takes the events out of the rings, then prints them (time order within the batch) or writes
// them to the image's trace file. Returns how many; call again until it returns 0 to take
// everything. Printed, at most kPrintBatch a ring a call: a ring of 524,288 calls took seconds
// to format, during which the tool saw no Ctrl-C and no end of --duration while the program
// filled the rings again (a trace of 0.3 s ended after 3 to 5 s).
constexpr uint64_t kPrintBatch = 16384;
uint64_t drain(Image &im, PrintOptions &print);

// --count and --hist: the calls of each probe of a session (summed over its threads' rows), the
// calls that left without returning, and --hist's buckets; live while the session runs (a
// counter never goes back: a ring a new thread takes keeps its rows).
TraceTotals totals_of(const Shm &shm);

// The sums of every image read so far.
struct Folded {
    std::vector<std::pair<std::string, std::string>> keys;  // (executable or "", name), first seen first
    std::map<std::pair<std::string, std::string>, uint32_t> index;
    std::vector<uint64_t> count;
    std::vector<std::array<uint64_t, trace::kHistBuckets>> hist;
    std::vector<uint64_t> left;  // calls that left without returning (--hist, per event)
    std::vector<uint64_t> missed_by;  // the misses of each
    std::map<uint32_t, std::string> slow;  // keys whose probe took the breakpoint path in some image, why
    std::set<std::string> exes;  // the executables whose images had a session
    uint64_t dropped = 0, unringed = 0, missed = 0;
    uint32_t images = 0, unknown_missed = 0;  // images folded; of which their misses were not published
    // Adds image im's calls (its counters; `events`, from a trace file: none), drops and misses.
    void add(const Image &im);
    // The names to print, and the totals by them.
    TraceProbes probes() const;
    TraceTotals totals() const;
};

// Its executable's own functions: a name with no "OBJECT:" before it.
bool is_own_function(const std::string &raw_name);
std::string base_name(const std::string &path);

}  // namespace liveprobe::tool
