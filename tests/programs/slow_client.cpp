// A client that never finishes its request (issue 32, item 2): it reaches the agent of PID
// through its door, as the tool does, then sends one byte every 1.5 s without the line's end, for
// SECONDS, and prints what the agent answered, if anything (tests/scripts/trust_test.sh).
//   slow_client PID SECONDS
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "agent/door.hpp"

int main(int argc, char **argv)
{
    if (argc != 3) return 2;
    std::string why;
    const int fd = liveprobe::agent::connect_through_door(std::atoi(argv[1]), &why);
    if (fd < 0) {
        std::fprintf(stderr, "slow_client: %s\n", why.c_str());
        return 1;
    }
    std::printf("connected\n");
    std::fflush(stdout);
    const std::string start = "liveprobe/2 sta";
    send(fd, start.data(), start.size(), MSG_NOSIGNAL);
    std::string got;
    for (int ms = 0; ms < std::atoi(argv[2]) * 1000; ms += 1500) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 1500) > 0) {
            char buf[512];
            const ssize_t n = recv(fd, buf, sizeof buf, 0);
            if (n <= 0) break;
            got.append(buf, static_cast<size_t>(n));
            continue;
        }
        send(fd, "t", 1, MSG_NOSIGNAL);
    }
    std::printf("answer: %s", got.empty() ? "none\n" : got.c_str());
    return 0;
}
