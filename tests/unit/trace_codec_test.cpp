// Trace files' event encoding (tools/liveprobe/trace_codec.hpp): what is encoded decodes the
// same, in a few bytes a call.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "trace_codec.hpp"

using liveprobe::tool::TraceDecoder;
using liveprobe::tool::TraceEncoder;
using liveprobe::trace::Record;

namespace {

struct Item {
    Record r;
    std::string values;  // empty: a call
    std::string header;  // non-empty: a header written again, not an event
    uint32_t pid = 0;    // its process (0: the header's, kPid)
};

constexpr uint32_t kPid = 0;  // the process the file's header names, in the tests below

std::string encode(const std::vector<Item> &items, uint32_t header_pid = kPid)
{
    TraceEncoder enc(header_pid);
    std::string out;
    for (const Item &it : items) {
        if (!it.header.empty())
            TraceEncoder::header(it.header, &out);
        else
            enc.event(it.r, it.pid ? it.pid : header_pid, it.values.data(), it.values.size(), &out);
    }
    return out;
}

// Decodes `bytes`, the values of event i having items[i]'s size; false at the first mismatch.
void expect_decodes(std::string bytes, const std::vector<Item> &items, uint32_t header_pid = kPid)
{
    FILE *f = fmemopen(bytes.data(), bytes.size(), "rb");
    ASSERT_NE(f, nullptr);
    TraceDecoder dec(header_pid);
    for (size_t i = 0; i < items.size(); ++i) {
        Record r{};
        std::string header;
        TraceDecoder::Step step = dec.next(f, &r, &header);
        if (!items[i].header.empty()) {
            ASSERT_EQ(step, TraceDecoder::kHeader) << "item " << i;
            EXPECT_EQ(header, items[i].header);
            continue;
        }
        ASSERT_EQ(step, TraceDecoder::kEvent) << "item " << i;
        EXPECT_EQ(r.probe, items[i].r.probe) << "item " << i;
        EXPECT_EQ(r.tid, items[i].r.tid) << "item " << i;
        EXPECT_EQ(r.entry_ns, items[i].r.entry_ns) << "item " << i;
        EXPECT_EQ(r.exit_ns, items[i].r.exit_ns) << "item " << i;
        EXPECT_EQ(r.retval, items[i].r.retval) << "item " << i;
        EXPECT_EQ(dec.pid(), items[i].pid ? items[i].pid : header_pid) << "item " << i;
        std::string values;
        ASSERT_TRUE(TraceDecoder::values(f, items[i].values.size(), &values));
        EXPECT_EQ(values, items[i].values) << "item " << i;
    }
    Record r{};
    std::string header;
    EXPECT_EQ(dec.next(f, &r, &header), TraceDecoder::kEnd);
    std::fclose(f);
}

TEST(TraceCodec, EventsDecodeAsTheyWere)
{
    const uint64_t t = 1'700'000'000'123'456'789ull;
    std::vector<Item> items = {
        {{3, 1000, t, t + 50, 7}, {}, {}},
        {{3, 1000, t + 60, t + 90, 0}, {}, {}},
        // Another thread, whose ring was drained later: its time is before the previous one's.
        {{521, 1001, t - 5'000, t - 4'000, ~uint64_t{0}}, {}, {}},
        // A pointer, a negative value, the largest values.
        {{0, 1001, t, t + 1, 0x7ffd'1234'5678ull}, {}, {}},
        {{1, 1001, t + 2, t + 2, static_cast<uint64_t>(-12345)}, {}, {}},
        {{0xfffffffeu, 0xffffffffu, 0, ~uint64_t{0}, uint64_t{1} << 63}, {}, {}},
        // A p: hit with 24 bytes of values, a header written again, then a call.
        {{7, 1000, t + 100, t + 100, 0x401000}, std::string("\x01\x02\x00\xffvalues of twenty-four", 24), {}},
        {{}, {}, std::string("LPTRACE2 a header, as trace_header writes it\0with a zero", 56)},
        {{3, 1000, t + 200, t + 230, 9}, {}, {}},
    };
    expect_decodes(encode(items), items);
}

TEST(TraceCodec, EachEventKeepsItsProcess)
{
    // A forked child's events, in its parent's file between the parent's: each with its pid,
    // the parent's (the header's) costing nothing.
    const uint64_t t = 1'000'000'000;
    const uint32_t parent = 4000, child = 4007;
    std::vector<Item> items = {
        {{1, 4000, t, t + 10, 1}, {}, {}, parent},
        {{2, 4007, t + 20, t + 30, 2}, {}, {}, child},
        {{2, 4008, t + 40, t + 50, 3}, {}, {}, child},
        {{}, {}, std::string("LPTRACE3 again", 14)},
        {{2, 4007, t + 60, t + 70, 4}, {}, {}, child},
        {{3, 4000, t + 80, t + 90, 5}, {}, {}, parent},
    };
    expect_decodes(encode(items, parent), items, parent);
    std::vector<Item> alone = {items[0], items[5]};
    std::string plain;  // the same events as format 2 wrote them, with no process
    TraceEncoder enc;
    for (const Item &it : alone) enc.event(it.r, 0, nullptr, 0, &plain);
    EXPECT_EQ(encode(alone, parent), plain) << "the header's process costs no byte";
}

TEST(TraceCodec, ACallOfTheSameThreadTakesAFewBytes)
{
    // jq's calls: hundreds of probes, about 100 ns apart, most shorter than a microsecond, small
    // return values (the 32-byte records were more than the disk took).
    TraceEncoder enc;
    std::string out;
    const uint64_t t = 1'700'000'000'000'000'000ull;
    enc.event({400, 4242, t, t + 900, 1}, 0, nullptr, 0, &out);
    const size_t first = out.size();
    for (uint64_t i = 1; i <= 1000; ++i) enc.event({static_cast<uint32_t>(i % 500), 4242, t + i * 100, t + i * 100 + 60, i % 3}, 0, nullptr, 0, &out);
    EXPECT_LE((out.size() - first) / 1000.0, 6.0) << "bytes a call";
}

TEST(TraceCodec, ACutShortFileIsReportedNotMisread)
{
    std::vector<Item> items = {{{3, 1000, 1'000'000, 1'000'500, 0x1234'5678'9abcull}, {}, {}}};
    std::string bytes = encode(items);
    for (size_t cut = 1; cut < bytes.size(); ++cut) {
        std::string part = bytes.substr(0, cut);
        FILE *f = fmemopen(part.data(), part.size(), "rb");
        ASSERT_NE(f, nullptr);
        TraceDecoder dec;
        Record r{};
        std::string header;
        EXPECT_EQ(dec.next(f, &r, &header), TraceDecoder::kBad) << "cut at " << cut;
        std::fclose(f);
    }
    std::string junk = "\x07garbage";  // tag 3 (a process) with a probe: none of this format
    FILE *f = fmemopen(junk.data(), junk.size(), "rb");
    TraceDecoder dec;
    Record r{};
    std::string header;
    EXPECT_EQ(dec.next(f, &r, &header), TraceDecoder::kBad);
    std::fclose(f);
}

}  // namespace

TEST(TraceCodec, AnEventTakesNoMoreThanTheRoomTheReaderLeavesForIt)
{
    // The reader encodes into its buffer with kMaxEventBytes + values of room left: the largest
    // event of all (another process and thread, every field at its widest) fits, and is what
    // it was.
    TraceEncoder enc;
    std::vector<char> room(TraceEncoder::kMaxEventBytes + 8 + 16, '\x5a');
    const Record wide{0xffffffffu, 0xffffffffu, 0, uint64_t{1} << 63, uint64_t{1} << 63};
    const char values[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    char *end = enc.event(wide, 0x7fffffff, values, sizeof values, room.data());
    ASSERT_LE(end - room.data(), static_cast<ptrdiff_t>(TraceEncoder::kMaxEventBytes + sizeof values));
    for (size_t i = static_cast<size_t>(end - room.data()); i < room.size(); ++i) ASSERT_EQ(room[i], '\x5a') << i;
    expect_decodes(std::string(room.data(), end), {{wide, std::string(values, 8), {}, 0x7fffffff}});
}
