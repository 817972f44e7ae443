// The branch index cache (src/core/branch_cache.cpp): a second process reads what the first
// decoded, only for the same bytes; a file that is not a whole index of them is ignored and
// written again; without a private runtime directory nothing is cached.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "arch/x86_64/branch_index.hpp"
#include "core/branch_cache.hpp"

namespace liveprobe::core {
namespace {

namespace fs = std::filesystem;
constexpr uint64_t kStart = 0x7f0000001000;

// Some code: jmp +2 (to 4), nop; nop; jmp back to 0; a call out of the mapping; ret.
std::vector<uint8_t> code()
{
    return {0xeb, 0x02, 0x90, 0x90, 0xeb, 0xfa, 0xe8, 0x00, 0x10, 0x00, 0x00, 0xc3};
}

// The in-mapping targets, as the cache keeps them.
std::vector<uint64_t> inside(const std::vector<uint64_t> &all, size_t len)
{
    std::vector<uint64_t> out;
    for (uint64_t t : all)
        if (t >= kStart && t < kStart + len) out.push_back(t);
    return out;
}

class BranchCache : public ::testing::Test {
  protected:
    void SetUp() override
    {
        char tmpl[] = "/tmp/lp-branch-cache-XXXXXX";
        dir_ = mkdtemp(tmpl);
        setenv("LIVEPROBE_RUNTIME_DIR", dir_.c_str(), 1);
    }
    void TearDown() override
    {
        fs::remove_all(dir_);
        unsetenv("LIVEPROBE_RUNTIME_DIR");
    }
    std::vector<fs::path> files() const
    {
        std::vector<fs::path> out;
        if (fs::exists(dir_ + "/branch-index"))
            for (const auto &e : fs::directory_iterator(dir_ + "/branch-index")) out.push_back(e.path());
        return out;
    }
    std::string dir_;
};

TEST_F(BranchCache, TheSecondLookupReadsTheFirstsFile)
{
    const std::vector<uint8_t> c = code();
    const std::vector<uint64_t> decoded = arch::direct_branch_targets(kStart, c.data(), c.size());
    EXPECT_EQ(cached_branch_targets(kStart, c), decoded);
    ASSERT_EQ(files().size(), 1u);
    // Read back, at another address (another process's): the same offsets.
    const uint64_t other = kStart + 0x100000;
    std::vector<uint64_t> want;
    for (uint64_t t : inside(decoded, c.size())) want.push_back(t - kStart + other);
    EXPECT_EQ(cached_branch_targets(other, c), want);
    EXPECT_EQ(want.size(), 2u);  // 0 and 4
}

TEST_F(BranchCache, OtherBytesOrABrokenFileAreNotTaken)
{
    std::vector<uint8_t> c = code();
    cached_branch_targets(kStart, c);
    ASSERT_EQ(files().size(), 1u);
    // The file cut short: ignored, the bytes decoded again, the file written whole again.
    const fs::path f = files()[0];
    fs::resize_file(f, fs::file_size(f) - 2);
    EXPECT_EQ(inside(cached_branch_targets(kStart, c), c.size()), inside(arch::direct_branch_targets(kStart, c.data(), c.size()), c.size()));
    EXPECT_EQ(fs::file_size(f) % 4, 0u);
    // Other bytes (the second jmp now to 2): their own index, not the first's.
    c[5] = 0xfc;
    const std::vector<uint64_t> now = cached_branch_targets(kStart, c);
    EXPECT_NE(std::find(now.begin(), now.end(), kStart + 2), now.end());
    EXPECT_EQ(files().size(), 2u);
}

TEST_F(BranchCache, NothingIsCachedInADirectoryOthersMayEnter)
{
    chmod(dir_.c_str(), 0755);
    const std::vector<uint8_t> c = code();
    EXPECT_EQ(cached_branch_targets(kStart, c), arch::direct_branch_targets(kStart, c.data(), c.size()));
    EXPECT_TRUE(files().empty());
}

}  // namespace
}  // namespace liveprobe::core
