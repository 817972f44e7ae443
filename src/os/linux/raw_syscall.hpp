// System calls made directly, without libc: the hit path must never enter a function a user
// may have probed (a probe on libc's syscall() or mmap() would recurse into liveprobe).
#pragma once

#include <sys/prctl.h>
#include <sys/syscall.h>

#include <cstdint>

namespace liveprobe::os {

inline long raw_syscall(long nr, long a = 0, long b = 0, long c = 0, long d = 0, long e = 0,
                        long f = 0) noexcept
{
    long ret;
    register long r10 asm("r10") = d;
    register long r8 asm("r8") = e;
    register long r9 asm("r9") = f;
    asm volatile("syscall"
                 : "=a"(ret)
                 : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
                 : "rcx", "r11", "memory");
    return ret;
}

inline int raw_gettid() noexcept { return static_cast<int>(raw_syscall(SYS_gettid)); }
inline int raw_getpid() noexcept { return static_cast<int>(raw_syscall(SYS_getpid)); }
// The calling thread's name (comm: 15 bytes and a NUL) into name[16..17], zeroed first.
inline void raw_thread_name(char (&name)[17]) noexcept
{
    for (char &c : name) c = 0;
    raw_syscall(SYS_prctl, PR_GET_NAME, reinterpret_cast<long>(name));
}

// Kernel sigset for rt_sigprocmask: 8 bytes.
inline long raw_sigprocmask(int how, const uint64_t *set, uint64_t *old) noexcept
{
    return raw_syscall(SYS_rt_sigprocmask, how, reinterpret_cast<long>(set),
                       reinterpret_cast<long>(old), 8);
}

inline void *raw_mmap(void *addr, unsigned long len, int prot, int flags) noexcept
{
    long r = raw_syscall(SYS_mmap, reinterpret_cast<long>(addr), static_cast<long>(len), prot,
                         flags, -1, 0);
    if (r < 0 && r > -4096) return nullptr;
    return reinterpret_cast<void *>(r);
}

inline void raw_munmap(void *addr, unsigned long len) noexcept
{
    raw_syscall(SYS_munmap, reinterpret_cast<long>(addr), static_cast<long>(len));
}

inline long raw_write(int fd, const void *buf, unsigned long n) noexcept
{
    return raw_syscall(SYS_write, fd, reinterpret_cast<long>(buf), static_cast<long>(n));
}

inline long raw_tgkill(int pid, int tid, int sig) noexcept
{
    return raw_syscall(SYS_tgkill, pid, tid, sig);
}

inline void raw_sched_yield() noexcept { raw_syscall(SYS_sched_yield); }

}  // namespace liveprobe::os
