// The agent's thread's own descriptor table (the kernel's files_struct, unshared).
//
// Every descriptor a process opens takes the lowest free number of its table, and a program
// counts on which one that is: fmtlib's tests dup2() a pipe onto their lowest free number, a
// shell's `exec 3>&1`, a daemon that closes what it did not open. A descriptor of liveprobe's
// opened in the program's table, even for the microseconds before it moves to 512 and up
// (high_fd.hpp), took that number: the program's dup2 failed with EBUSY (the number taken, not
// yet filled), or replaced liveprobe's file, which liveprobe then closed under the program or
// wrote code into (a /proc/self/mem write that landed in the program's pipe). So the agent's
// thread, which opens connections, object files, memfds and /proc files all its life, works in
// a table of its own (unshare(CLONE_FILES)): nothing it opens is ever a number of the program's.
//
// Rules that follow (docs/DESIGN-NOTES.md, "Two descriptor tables"):
//   - A descriptor number means a file only in the table it was opened in: what one thread
//     keeps, another thread must not use or close. Kept descriptors are per table
//     (text_poke.cpp) or not kept at all (symbols read their files through mappings).
//   - The program's table gets only what a tool must find in it (the agent's door) or what a
//     forked child must inherit; the agent's keeper thread (agent/keeper.hpp) opens and closes
//     those.
#pragma once

#include <vector>

namespace liveprobe::os {

// Gives the calling thread a table of its own, holding only `keep` of the table it had (each
// must be open) and /dev/null at 0, 1 and 2 (nothing of the thread's lands there, and a stray
// write to stderr goes nowhere: holding the program's own stdio would keep a pipe open after
// the program closed it, and whoever waits for its end would wait). 0, or -errno.
int enter_own_fd_table(const std::vector<int> &keep);

// Whether the calling thread works in a table of its own (enter_own_fd_table).
bool in_own_fd_table();

// After fork() in the child: its one thread's table is the process's table.
void forget_own_fd_table();

// A copy, in the calling thread's table, of descriptor fd of the process's table (the thread
// group leader's, through pidfd_getfd): the descriptor, or -errno (-EBADF once the leader
// thread has exited: its table is gone).
int fd_from_process_table(int fd);

}  // namespace liveprobe::os
