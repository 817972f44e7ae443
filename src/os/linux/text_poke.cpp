#include "os/linux/text_poke.hpp"

#include <fcntl.h>
#include <linux/membarrier.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>

#include "os/linux/fd_table.hpp"
#include "os/linux/high_fd.hpp"
#include "os/linux/raw_syscall.hpp"

namespace liveprobe::os {
namespace {

// The descriptor of /proc/self/mem and the pid that opened it: after fork() (or vfork, or a
// raw clone, which skip atfork handlers) an inherited descriptor still writes into the
// parent's memory, so a pid change reopens it. It is kept at 512 or above (high_fd.hpp), and
// its device and inode are checked before each use: a program that closed it (closefrom) may
// have a file of its own under that number now, which must never be written, nor closed.
// One for each kind of table (fd_table.hpp): the program's, whose threads patch when they load
// a library or call the API, and the agent's thread's own, where its number means nothing to
// the program's threads.
std::mutex g_mem_mu;
struct MemFd {
    int fd = -1;
    int pid = 0;
    FdIdentity file;
};
MemFd g_mem[2];  // [in_own_fd_table()], under g_mem_mu

MemFd &table_mem() { return g_mem[in_own_fd_table() ? 1 : 0]; }

// Whether m's descriptor is still the file liveprobe opened.
bool mem_fd_is_ours(const MemFd &m) { return is_same_file(m.fd, m.file); }
bool g_membarrier_ok = false;

int mem_fd()
{
    int pid = raw_getpid();
    MemFd &m = table_mem();
    const bool ours = m.fd >= 0 && mem_fd_is_ours(m);
    if (ours && m.pid == pid) return m.fd;
    if (ours) close(m.fd);  // the parent's, inherited
    m.fd = move_fd_high(open("/proc/self/mem", O_RDWR | O_CLOEXEC));
    m.pid = pid;
    m.file = identity_of(m.fd);
    if (m.fd >= 0 && !g_membarrier_ok) {
        g_membarrier_ok =
            syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE, 0, 0) == 0;
    }
    return m.fd;
}

Status write_locked(uint64_t addr, const void *bytes, size_t n)
{
    int fd = mem_fd();
    if (fd < 0)
        return Fail(-errno, "cannot open /proc/self/mem to write code: {}", strerror(errno));
    const char *p = static_cast<const char *>(bytes);
    while (n > 0) {
        ssize_t w = pwrite(fd, p, n, static_cast<off_t>(addr));
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            int e = w < 0 ? errno : EIO;
            return Fail(-EPERM,
                        "writing code at {:#x} through /proc/self/mem failed ({}); on Linux 6.12+ "
                        "the boot setting proc_mem.force_override=never forbids it",
                        addr, strerror(e));
        }
        p += w;
        n -= static_cast<size_t>(w);
        addr += static_cast<uint64_t>(w);
    }
    return Status::Ok();
}

}  // namespace

void close_text_fd()
{
    std::lock_guard lk(g_mem_mu);
    MemFd &m = table_mem();
    if (m.fd >= 0 && m.pid == raw_getpid() && mem_fd_is_ours(m)) close(m.fd);
    m.fd = -1;
}

Status text_write_check()
{
    static std::once_flag once;
    static Status result;
    std::call_once(once, [] {
        // A read+exec page of our own stands in for program text.
        void *page = mmap(nullptr, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (page == MAP_FAILED) {
            result = Fail(-ENOMEM, "cannot map a page for the code-writing check");
            return;
        }
        const unsigned char probe[2] = {0xcc, 0xc3};
        {
            std::lock_guard<std::mutex> lk(g_mem_mu);
            result = write_locked(reinterpret_cast<uint64_t>(page), probe, sizeof probe);
        }
        if (result.ok() && std::memcmp(page, probe, sizeof probe) != 0)
            result = Fail(-EPERM, "a write through /proc/self/mem did not reach the page");
        munmap(page, 4096);
    });
    return result;
}

Status poke_text(uint64_t addr, const void *bytes, size_t n)
{
    std::lock_guard<std::mutex> lk(g_mem_mu);
    return write_locked(addr, bytes, n);
}

void peek_text(uint64_t addr, void *out, size_t n)
{
    std::memcpy(out, reinterpret_cast<const void *>(addr), n);
}

bool peek_data(uint64_t addr, void *out, size_t n)
{
    struct iovec local{out, n};
    struct iovec remote{reinterpret_cast<void *>(addr), n};
    return process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == static_cast<ssize_t>(n);
}

namespace {
// Registered at load, before any probe exists: the hit path reads it without synchronization.
const bool g_expedited_ok =
    syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
}  // namespace

bool barrier_all_threads()
{
    if (!g_expedited_ok) return false;
    return syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0;
}

const bool g_hit_path_needs_fence = !g_expedited_ok;

void sync_cores()
{
    if (g_membarrier_ok) {
        syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE, 0, 0);
        return;
    }
    // Without membarrier: a write through /proc/self/mem already goes through the kernel,
    // and x86 keeps instruction fetch coherent with stores; a cross-modifying single byte
    // (int3) is safe without serialization (Intel SDM 8.1.3).
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
}

}  // namespace liveprobe::os
