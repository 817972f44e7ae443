// Where liveprobe keeps the descriptors it holds in a program: 512 and up, out of the program's
// way. open() takes the lowest free number, and a program may count on which one that is: a
// shell's `exec 3>&1`, a test that closes a descriptor and dup2()s it back, a daemon that closes
// every descriptor above 2 (closefrom) and opens its own. A descriptor of liveprobe's left at 4
// took the number the program's next file was to get, and one the program closed under it could
// become the program's file: liveprobe's later writes to /proc/self/mem would land in it.
#pragma once

namespace liveprobe::os {

constexpr int kFirstHighFd = 512;

// fd moved to the lowest free number >= kFirstHighFd (close-on-exec), the old one closed; fd
// itself when that fails (RLIMIT_NOFILE below 513) or fd < 0.
int move_fd_high(int fd);

}  // namespace liveprobe::os
