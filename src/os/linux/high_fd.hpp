// Where liveprobe keeps the descriptors it holds in a program: 512 and up, out of the program's
// way. open() takes the lowest free number, and a program may count on which one that is: a
// shell's `exec 3>&1`, a test that closes a descriptor and dup2()s it back, a daemon that closes
// every descriptor above 2 (closefrom) and opens its own. A descriptor of liveprobe's left at 4
// took the number the program's next file was to get, and one the program closed under it could
// become the program's file: liveprobe's later writes to /proc/self/mem would land in it.
#pragma once

#include <sys/types.h>

namespace liveprobe::os {

constexpr int kFirstHighFd = 512;

// fd moved to the lowest free number >= kFirstHighFd (close-on-exec), the old one closed; under
// a descriptor limit of 512 or fewer, to one of the 8 highest numbers the limit allows; fd
// itself when neither can be had, or fd < 0.
int move_fd_high(int fd);

// A kept descriptor's file (device and inode): a program may close the descriptor and reuse
// its number for a file of its own, which liveprobe must then neither use, nor close.
struct FdIdentity {
    dev_t dev = 0;
    ino_t ino = 0;
};
// fd's file now ({} when fd is not open).
FdIdentity identity_of(int fd);
// Whether fd is open on the file `id` names.
bool is_same_file(int fd, const FdIdentity &id);

}  // namespace liveprobe::os
