// The printk ring (src/agent/log_ring.hpp): lines come back whole and in order, the oldest are
// overwritten when it is full and counted, long lines span records, and writers on several
// threads never produce a torn line.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <liveprobe/ktime.h>

#include "agent/log_ring.hpp"

using liveprobe::agent::LogRing;

namespace {
std::unique_ptr<LogRing> fresh() { return std::make_unique<LogRing>(); }
void put(LogRing &r, const std::string &s) { r.write(s.data(), s.size()); }
}  // namespace

TEST(LogRing, LinesComeBackInOrder)
{
    auto r = fresh();
    put(*r, "first");
    put(*r, "");
    put(*r, "third line");
    uint64_t next = 0;
    auto lines = r->read(0, &next);
    ASSERT_EQ(lines.size(), 3u);
    EXPECT_EQ(lines[0].text, "first");
    EXPECT_EQ(lines[1].text, "");
    EXPECT_EQ(lines[2].text, "third line");
    EXPECT_EQ(r->lines_written(), 3u);
    EXPECT_EQ(r->records_overwritten(), 0u);
    // Reading on from where it stopped gives only what came after.
    put(*r, "fourth");
    auto more = r->read(next, &next);
    ASSERT_EQ(more.size(), 1u);
    EXPECT_EQ(more[0].text, "fourth");
}

TEST(LogRing, LinesKeepTheirTimeLevelAndContinuation)
{
    auto r = fresh();
    uint64_t before = liveprobe_ktime_ns();
    r->write("info", 4, 6);
    r->write(" more", 5, 6, true);
    r->write("bad level", 9, 42);
    uint64_t after = liveprobe_ktime_ns();
    uint64_t next = 0;
    auto lines = r->read(0, &next);
    ASSERT_EQ(lines.size(), 3u);
    EXPECT_EQ(lines[0].level, 6);
    EXPECT_FALSE(lines[0].cont);
    EXPECT_TRUE(lines[1].cont);
    EXPECT_EQ(lines[2].level, LogRing::kDefaultLevel);
    for (const auto &l : lines) {
        EXPECT_GE(l.ns, before);
        EXPECT_LE(l.ns, after);
    }
}

TEST(LogRing, LongLinesSpanRecords)
{
    auto r = fresh();
    std::string big(LogRing::kPayload * 3 + 17, 'x');
    for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>('a' + i % 26);
    put(*r, big);
    put(*r, "after");
    uint64_t next = 0;
    auto lines = r->read(0, &next);
    ASSERT_EQ(lines.size(), 2u);
    EXPECT_EQ(lines[0].text, big);
    EXPECT_EQ(lines[1].text, "after");
}

TEST(LogRing, FullRingOverwritesTheOldestAndCountsThem)
{
    auto r = fresh();
    const size_t n = LogRing::kRecords + 100;
    for (size_t i = 0; i < n; ++i) put(*r, "line " + std::to_string(i));
    EXPECT_EQ(r->lines_written(), n);
    EXPECT_EQ(r->records_overwritten(), 100u);
    uint64_t next = 0;
    auto lines = r->read(0, &next);
    ASSERT_EQ(lines.size(), LogRing::kRecords);
    EXPECT_EQ(lines.front().text, "line 100");
    EXPECT_EQ(lines.back().text, "line " + std::to_string(n - 1));
}

TEST(LogRing, ConcurrentWritersNeverTearALine)
{
    auto r = fresh();
    constexpr int kThreads = 4, kLines = 20000;
    std::atomic<bool> stop{false};
    std::atomic<long> bad{0}, seen{0};
    // A reader running all along: every line it gets is one a writer wrote, whole. It reads once
    // more after the writers are done (on a loaded machine it may not have run before).
    std::thread reader([&] {
        uint64_t next = 0;
        for (bool last = false; !last;) {
            last = stop.load();
            for (auto &l : r->read(next, &next)) {
                ++seen;
                // "T<t> <i> " followed by 300 copies of the letter of t (spans two records).
                size_t sp = l.text.find(' ', 1);
                size_t sp2 = l.text.find(' ', sp + 1);
                if (l.text[0] != 'T' || sp == std::string::npos || sp2 == std::string::npos) {
                    ++bad;
                    continue;
                }
                char c = static_cast<char>('a' + (l.text[1] - '0'));
                std::string tail = l.text.substr(sp2 + 1);
                if (tail != std::string(300, c)) ++bad;
            }
        }
    });
    std::vector<std::thread> writers;
    for (int t = 0; t < kThreads; ++t)
        writers.emplace_back([&, t] {
            std::string pad(300, static_cast<char>('a' + t));
            for (int i = 0; i < kLines; ++i) put(*r, "T" + std::to_string(t) + " " + std::to_string(i) + " " + pad);
        });
    for (auto &w : writers) w.join();
    stop = true;
    reader.join();
    EXPECT_EQ(bad.load(), 0);
    EXPECT_GT(seen.load(), 0);
    EXPECT_EQ(r->lines_written(), static_cast<uint64_t>(kThreads * kLines));
    EXPECT_EQ(r->records_overwritten(), 2u * kThreads * kLines - LogRing::kRecords);
    // Records dropped because their writer was lapped: rare, and never more than were written.
    EXPECT_LT(r->records_dropped(), 2u * kThreads * kLines / 10);
}
