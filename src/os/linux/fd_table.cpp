#include "os/linux/fd_table.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>

namespace liveprobe::os {
namespace {

thread_local bool t_own_table = false;

// Closes every descriptor of the calling thread's table but `keep` (sorted): close_range on
// each gap (Linux 5.9), else one by one from /proc/self/fd.
void close_all_but(const std::vector<int> &keep)
{
    unsigned lo = 0;
    bool ranged = true;
    for (int k : keep) {
        if (static_cast<unsigned>(k) > lo && syscall(SYS_close_range, lo, static_cast<unsigned>(k) - 1, 0) != 0)
            ranged = false;
        lo = static_cast<unsigned>(k) + 1;
    }
    if (ranged && syscall(SYS_close_range, lo, ~0u, 0) == 0) return;
    DIR *d = opendir("/proc/self/fd");
    if (!d) return;
    std::vector<int> open;
    while (struct dirent *e = readdir(d))
        if (e->d_name[0] >= '0' && e->d_name[0] <= '9') open.push_back(std::atoi(e->d_name));
    const int own = dirfd(d);
    for (int fd : open)
        if (fd != own && !std::binary_search(keep.begin(), keep.end(), fd)) close(fd);
    closedir(d);
}

}  // namespace

int enter_own_fd_table(const std::vector<int> &keep)
{
    std::vector<int> sorted = keep;
    sorted.erase(std::remove_if(sorted.begin(), sorted.end(), [](int fd) { return fd <= 2; }), sorted.end());
    std::sort(sorted.begin(), sorted.end());
    if (unshare(CLONE_FILES) != 0) return -errno;
    t_own_table = true;
    close_all_but(sorted);
    for (int fd = 0; fd <= 2; ++fd) {
        const int null = open("/dev/null", O_RDWR);
        if (null >= 0 && null != fd) {  // 0, 1 and 2 in order: all three were closed
            dup2(null, fd);
            close(null);
        }
    }
    return 0;
}

bool in_own_fd_table() { return t_own_table; }

void forget_own_fd_table() { t_own_table = false; }

int fd_from_process_table(int fd)
{
    const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, getpid(), 0));
    if (pidfd < 0) return -errno;
    const int copy = static_cast<int>(syscall(SYS_pidfd_getfd, pidfd, fd, 0));
    const int e = errno;
    close(pidfd);
    return copy < 0 ? -e : copy;
}

}  // namespace liveprobe::os
