// Requests being read, one a connection, without one client holding the others up (issue 32,
// item 2): the agent's thread polls every connection still sending beside its door, reads what
// each has sent so far, and takes a request once its line is whole. A connection whose line is
// not whole within kRequestMs of its arrival is answered with an error and closed: a client
// that sent a byte every 1.5 s held the agent for as long as it liked, and every other tool's
// request timed out meanwhile.
#pragma once

#include <poll.h>

#include <cstdint>
#include <string>
#include <vector>

namespace liveprobe::agent {

class RequestReader {
public:
    static constexpr int kRequestMs = 5000;
    static constexpr size_t kMaxRequest = 64u << 20;  // a tracer's request names thousands of functions

    struct Whole {
        int fd;
        std::string line;  // without its newline
    };

    // A new connection, made non-blocking.
    void add(int fd);
    // Its connections, appended to *fds.
    void pollfds(std::vector<struct pollfd> *fds) const;
    // Milliseconds until the nearest deadline, -1 when none.
    int timeout_ms() const;
    // After poll: reads each connection that has something (`fds` as poll left them, whatever
    // else they hold); the requests now whole leave the reader. Connections that are late, too
    // long, or closed before their line ended are answered (an error, when they can take one)
    // and closed.
    std::vector<Whole> take(const std::vector<struct pollfd> &fds);
    // Forgets every connection still being read, unanswered, closing them when `close_them`: a
    // forked child's copies of its parent's (the child's agent must not answer the parent's
    // clients). Not closed when the child's table is not the one they were opened in (a fork
    // from a thread of the program's, fd_table.hpp): their numbers are the program's there.
    void drop_all(bool close_them);

private:
    struct Reading {
        int fd;
        std::string line;
        uint64_t deadline_ns;
    };
    std::vector<Reading> reading_;
};

// Sends text on fd (non-blocking), waiting at most `ms` in all for room: false when it could not.
bool send_within(int fd, const std::string &text, int ms);

}  // namespace liveprobe::agent
