// The writing side of `liveprobe trace -o FILE` (tools/liveprobe/trace_writer.hpp): the file
// holds every byte handed over, in order, whether copied (write) or handed over in one of its
// buffers (submit), and a failing disk is reported, not ignored.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "trace_writer.hpp"

using liveprobe::tool::TraceWriter;

namespace {

std::string read_all(const std::string &path)
{
    std::ifstream in(path, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

TEST(TraceWriter, TheFileHoldsEveryByteHandedOverInOrder)
{
    char path[] = "/tmp/lp-trace-writer-XXXXXX";
    int fd = mkstemp(path);
    ASSERT_GE(fd, 0);
    close(fd);
    std::string expected;
    {
        TraceWriter w;
        std::string why;
        ASSERT_TRUE(w.open(path, &why)) << why;
        ASSERT_TRUE(w.write("header\n", 7));
        expected += "header\n";
        // Buffers of every size up to a full one, many more than the writer keeps for reuse,
        // each filled only in part: what lies past the count must not reach the file.
        for (unsigned i = 0; i < 200; ++i) {
            std::vector<char> b = w.buffer();
            ASSERT_GE(b.size(), TraceWriter::kBuffer);
            const size_t n = (i * 7919u) % TraceWriter::kBuffer + 1;
            for (size_t k = 0; k < n; ++k) b[k] = static_cast<char>('a' + (i + k) % 26);
            for (size_t k = n; k < b.size(); ++k) b[k] = '#';
            expected.append(b.data(), n);
            ASSERT_TRUE(w.submit(std::move(b), n));
            if (i % 50 == 0) {
                ASSERT_TRUE(w.write("again\n", 6));
                expected += "again\n";
            }
        }
        // One larger than a buffer (an event with many values grows the reader's).
        std::vector<char> big = w.buffer();
        big.resize(3 * TraceWriter::kBuffer, 'Z');
        expected.append(big.data(), big.size());
        ASSERT_TRUE(w.submit(std::move(big), 3 * TraceWriter::kBuffer));
        ASSERT_TRUE(w.submit(w.buffer(), 0));  // nothing: writes nothing
        size_t bytes = 0;
        ASSERT_TRUE(w.close(&bytes, &why)) << why;
        EXPECT_EQ(bytes, expected.size());
    }
    const std::string got = read_all(path);
    unlink(path);
    ASSERT_EQ(got.size(), expected.size());
    EXPECT_TRUE(got == expected) << "the file differs from what was handed over";
}

TEST(TraceWriter, AFullDiskIsReported)
{
    TraceWriter w;
    std::string why;
    ASSERT_TRUE(w.open("/dev/full", &why)) << why;
    std::vector<char> b = w.buffer();
    w.submit(std::move(b), 4096);
    size_t bytes = 1;
    EXPECT_FALSE(w.close(&bytes, &why));
    EXPECT_EQ(bytes, 0u);
    EXPECT_NE(why.find("No space left"), std::string::npos) << why;
    EXPECT_TRUE(w.failed());
    EXPECT_FALSE(w.write("more", 4));  // and nothing more is taken
}

}  // namespace
