#include "os/linux/high_fd.hpp"

#include <fcntl.h>
#include <unistd.h>

namespace liveprobe::os {

int move_fd_high(int fd)
{
    if (fd < 0 || fd >= kFirstHighFd) return fd;
    const int high = fcntl(fd, F_DUPFD_CLOEXEC, kFirstHighFd);
    if (high < 0) return fd;
    close(fd);
    return high;
}

}  // namespace liveprobe::os
