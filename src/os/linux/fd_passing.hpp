// A message that carries one descriptor (SCM_RIGHTS): the agent's door (agent/door.cpp), a
// followed image's report (agent/follow.cpp) and the agent's reply to trace-start (the
// session's memory) send one each.
#pragma once

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace liveprobe::os {

// Control space for one descriptor, aligned as a cmsghdr must be.
struct OneFdControl {
    alignas(struct cmsghdr) char bytes[CMSG_SPACE(sizeof(int))] = {};
};

// Points msg's control at `space` and puts fd in it.
inline void carry_fd(struct msghdr *msg, OneFdControl *space, int fd)
{
    msg->msg_control = space->bytes;
    msg->msg_controllen = sizeof space->bytes;
    struct cmsghdr *c = CMSG_FIRSTHDR(msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &fd, sizeof fd);
}

// Sends len bytes of buf through sock as one message, with fd (SCM_RIGHTS) when fd >= 0. With
// wait_ms >= 0, never blocks: waits for room at most wait_ms, in 10 ms polls, then -EAGAIN;
// with wait_ms < 0, as the socket blocks. The bytes sent, or -errno (EINTR retried).
inline long send_with_fd(int sock, const void *buf, size_t len, int fd, int wait_ms)
{
    OneFdControl control;
    struct iovec iov = {const_cast<void *>(buf), len};
    struct msghdr msg {};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    if (fd >= 0) carry_fd(&msg, &control, fd);
    for (int waited = 0;;) {
        const long n = sendmsg(sock, &msg, MSG_NOSIGNAL | (wait_ms >= 0 ? MSG_DONTWAIT : 0));
        if (n >= 0) return n;
        if (errno == EINTR) continue;
        if ((errno != EAGAIN && errno != EWOULDBLOCK) || wait_ms < 0 || waited >= wait_ms) return -errno;
        struct pollfd p = {sock, POLLOUT, 0};
        poll(&p, 1, 10);
        waited += 10;
    }
}

// Receives one message into buf (recvmsg, MSG_CMSG_CLOEXEC added to flags, EINTR retried) and
// every descriptor it carried (up to 8; the kernel closes any beyond) into *fds, for the caller
// to keep or close: the byte count, or -errno.
inline long receive_with_fds(int sock, void *buf, size_t len, int flags, std::vector<int> *fds)
{
    constexpr size_t kMax = 8;
    alignas(struct cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMax)];
    struct iovec iov = {buf, len};
    struct msghdr msg {};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    long n;
    do n = recvmsg(sock, &msg, flags | MSG_CMSG_CLOEXEC);
    while (n < 0 && errno == EINTR);
    if (n < 0) return -errno;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < count; ++i) {
            int fd;
            std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
            fds->push_back(fd);
        }
    }
    return n;
}

}  // namespace liveprobe::os
