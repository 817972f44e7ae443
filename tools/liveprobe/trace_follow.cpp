#include "trace_follow.hpp"

#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <sstream>

#include "agent/channel.hpp"
#include "agent/follow.hpp"

namespace liveprobe::tool {

void Follower::widen_fd_limit()
{
    struct rlimit rl {};
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

bool Follower::listen(std::string *why)
{
    if (agent::ensure_runtime_dir(why) < 0) return false;
    agent::sweep_stale_sockets(getuid());  // those of killed tools do not pile up
    path_ = agent::follow_path(getpid());
    lfd_ = agent::follow_listen(path_, why);
    return lfd_ >= 0;
}

void Follower::add_pollfds(std::vector<struct pollfd> *fds) const
{
    if (lfd_ >= 0) fds->push_back({lfd_, POLLIN, 0});
    for (int c : pending_) fds->push_back({c, POLLIN, 0});
}

std::vector<FollowReport> Follower::take_reports()
{
    for (int c; lfd_ >= 0 && (c = accept4(lfd_, nullptr, nullptr, SOCK_CLOEXEC)) >= 0;) {
        struct ucred cred {};
        socklen_t len = sizeof cred;
        // The socket's directory is the user's only; a peer of another user is not ours all
        // the same.
        if (getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || (cred.uid != getuid() && getuid() != 0)) {
            close(c);
            continue;
        }
        pending_.push_back(c);
    }
    std::vector<FollowReport> out;
    std::vector<int> still;
    for (int c : pending_) {
        struct pollfd p = {c, POLLIN, 0};
        if (poll(&p, 1, 0) <= 0) {
            still.push_back(c);
            continue;
        }
        FollowReport r;
        std::string text;
        if (!agent::follow_receive(c, &text, &r.memfd)) {
            close(c);
            continue;
        }
        std::istringstream in(text);
        std::string line;
        std::getline(in, line);  // "image PID EXE"
        const size_t sp = line.find(' ', 6);
        r.pid = std::atoi(line.c_str() + 6);
        r.exe = sp == std::string::npos ? std::string("?") : agent::escape_controls(line.substr(sp + 1));
        while (std::getline(in, line))
            if (!line.empty()) r.lines.push_back(agent::escape_controls(line));  // the image's to write
        r.conn = c;
        out.push_back(std::move(r));
    }
    pending_ = std::move(still);
    return out;
}

void Follower::close_socket()
{
    if (lfd_ >= 0) {
        close(lfd_);
        unlink(path_.c_str());
        lfd_ = -1;
    }
    for (int c : pending_) close(c);
    pending_.clear();
}

}  // namespace liveprobe::tool
