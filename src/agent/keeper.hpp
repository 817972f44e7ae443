// The keeper: the agent's second thread, which stays in the program's descriptor table.
//
// The agent's thread works in a table of its own (os/linux/fd_table.hpp), so that nothing it
// opens takes a number of the program's. A few of liveprobe's descriptors must be in the
// program's table all the same, and only a thread of that table can open or close them there:
// the door's ends (a tool finds the door among the process's descriptors, door.hpp), and the
// pipe or connection that owns a session of `trace -- CMD` (its forked children inherit it).
// The keeper waits for such a job, runs it, and says it is done; it takes no lock of the
// agent's, opens nothing of its own, and ends with the agent.
#pragma once

#include <functional>

namespace liveprobe::agent {

// Starts the keeper on the caller's table (the program's): 0, or -errno.
int keeper_start();

// Runs fn on the keeper and waits for it to return: false when no keeper runs.
bool keeper_run(const std::function<void()> &fn);

// Ends the keeper (after the job it runs, if any) and waits until it took no more jobs.
void keeper_stop();

// After fork() in the child: the keeper is the parent's thread; its state made anew.
void keeper_forget();

}  // namespace liveprobe::agent
