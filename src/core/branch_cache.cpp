#include "core/branch_cache.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <functional>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "arch/x86_64/branch_index.hpp"
#include "os/linux/runtime_dir.hpp"

namespace liveprobe::core {
namespace {

constexpr uint64_t kMagic = 0x3178646962706c;  // "lpbidx1"

struct FileHeader {
    uint64_t magic;
    uint64_t bytes;  // the mapping's length
    uint64_t hash;   // of its bytes
    uint64_t count;  // offsets that follow (uint32_t each)
};

bool read_all(int fd, void *out, size_t n)
{
    for (size_t done = 0; done < n;) {
        const ssize_t r = read(fd, static_cast<char *>(out) + done, n - done);
        if (r <= 0) return false;
        done += static_cast<size_t>(r);
    }
    return true;
}

bool write_all(int fd, const void *in, size_t n)
{
    for (size_t done = 0; done < n;) {
        const ssize_t r = write(fd, static_cast<const char *>(in) + done, n - done);
        if (r <= 0) return false;
        done += static_cast<size_t>(r);
    }
    return true;
}

// The offsets the file holds for this mapping, or false.
bool load(const std::string &path, const FileHeader &want, std::vector<uint32_t> *offs)
{
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return false;
    struct stat st {};
    FileHeader h {};
    bool ok = fstat(fd, &st) == 0 && st.st_uid == getuid() && read_all(fd, &h, sizeof h) && h.magic == want.magic &&
              h.bytes == want.bytes && h.hash == want.hash &&
              static_cast<uint64_t>(st.st_size) == sizeof h + h.count * sizeof(uint32_t);
    if (ok) {
        offs->resize(h.count);
        ok = read_all(fd, offs->data(), h.count * sizeof(uint32_t));
    }
    close(fd);
    // Sorted, unique and inside the mapping, or not ours.
    for (size_t i = 0; ok && i < offs->size(); ++i)
        ok = (*offs)[i] < want.bytes && (i == 0 || (*offs)[i - 1] < (*offs)[i]);
    return ok;
}

// Written whole under another name, then renamed: a reader sees the old file or the new one.
void store(const std::string &dir, const std::string &path, const FileHeader &h, const std::vector<uint32_t> &offs)
{
    std::string tmp = fmt::format("{}/.tmp-{}-XXXXXX", dir, getpid());
    const int fd = mkostemp(tmp.data(), O_CLOEXEC);
    if (fd < 0) return;
    const bool ok = write_all(fd, &h, sizeof h) && write_all(fd, offs.data(), offs.size() * sizeof(uint32_t));
    close(fd);
    if (!ok || rename(tmp.c_str(), path.c_str()) != 0) unlink(tmp.c_str());
}

}  // namespace

std::vector<uint64_t> cached_branch_targets(uint64_t start, const std::vector<uint8_t> &code)
{
    const std::string root = os::runtime_dir(getuid());
    const std::string dir = root + "/branch-index";
    const bool usable = os::is_private_dir(root) && (mkdir(dir.c_str(), 0700) == 0 || errno == EEXIST) &&
                        os::is_private_dir(dir);
    const std::string_view bytes(reinterpret_cast<const char *>(code.data()), code.size());
    const FileHeader want{kMagic, code.size(), std::hash<std::string_view>{}(bytes), 0};
    const std::string path = fmt::format("{}/{:016x}-{:x}", dir, want.hash, want.bytes);
    std::vector<uint32_t> offs;
    std::vector<uint64_t> out;
    if (usable && load(path, want, &offs)) {
        out.reserve(offs.size());
        for (uint32_t o : offs) out.push_back(start + o);
        return out;
    }
    out = arch::direct_branch_targets(start, code.data(), code.size());  // sorted, unique
    if (!usable || code.size() > UINT32_MAX) return out;
    for (uint64_t t : out)
        if (t >= start && t < start + code.size()) offs.push_back(static_cast<uint32_t>(t - start));
    FileHeader h = want;
    h.count = offs.size();
    store(dir, path, h, offs);
    return out;
}

}  // namespace liveprobe::core
