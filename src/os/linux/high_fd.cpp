#include "os/linux/high_fd.hpp"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

namespace liveprobe::os {

int move_fd_high(int fd)
{
    if (fd < 0 || fd >= kFirstHighFd) return fd;
    int high = fcntl(fd, F_DUPFD_CLOEXEC, kFirstHighFd);
    // A limit of 512 descriptors or fewer (`ulimit -n 64`): the top 8 numbers under it, as far
    // from the lowest free ones as the program lets liveprobe go.
    struct rlimit rl {};
    if (high < 0 && getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur > 16)
        high = fcntl(fd, F_DUPFD_CLOEXEC, static_cast<int>(rl.rlim_cur - 8));
    if (high < 0) return fd;
    close(fd);
    return high;
}

FdIdentity identity_of(int fd)
{
    struct stat st {};
    if (fd < 0 || fstat(fd, &st) != 0) return {};
    return {st.st_dev, st.st_ino};
}

bool is_same_file(int fd, const FdIdentity &id)
{
    const FdIdentity now = identity_of(fd);
    return fd >= 0 && now.dev == id.dev && now.ino == id.ino && (id.dev != 0 || id.ino != 0);
}

}  // namespace liveprobe::os
