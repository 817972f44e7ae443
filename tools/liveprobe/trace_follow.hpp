// The tool's side of following exec (`liveprobe trace -- CMD`, src/agent/follow.hpp): the
// socket the images of the started tree connect to, and their reports as they come.
#pragma once

#include <poll.h>
#include <sys/types.h>

#include <set>
#include <string>
#include <vector>

namespace liveprobe::tool {

// An image's report (follow.hpp): its process, executable, what it says, its memfd (-1: none,
// it runs untraced), the connection (open while a process of the image lives).
struct FollowReport {
    pid_t pid = 0;
    std::string exe;
    std::vector<std::string> lines;  // "placed ...", "slow ...", "skipped ...", "untraced ..."
    int memfd = -1;
    int conn = -1;
};

class Follower {
  public:
    // Listens on the socket whose path LIVEPROBE_TRACE_FOLLOW gives the program: false with *why.
    bool listen(std::string *why);
    const std::string &path() const { return path_; }
    // A connection for each live image (a parallel make runs hundreds): the tool's soft limit
    // of descriptors (1024, often) raised to the hard one. After the program is started: its
    // own limits stay as they were.
    static void widen_fd_limit();
    // Its descriptors, for the reading loop's poll.
    void add_pollfds(std::vector<struct pollfd> *fds) const;
    // Accepts the connections waiting, and returns the reports that came on them (each
    // connection's only message). A connection that closes without one (a process killed while
    // its probes were placed) is dropped.
    std::vector<FollowReport> take_reports();
    // Whether the executable was said before (the first of each is said, the others are not).
    bool first_of(const std::string &exe) { return told_.insert(exe).second; }
    // No more: the socket goes (the images not yet connected run untraced); the connections
    // of those that connected but did not report are closed (their sessions stop).
    void close_socket();
    ~Follower() { close_socket(); }

  private:
    int lfd_ = -1;
    std::string path_;
    std::vector<int> pending_;  // connected, no report yet
    std::set<std::string> told_;
};

}  // namespace liveprobe::tool
