#include "injector.hpp"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <libunwind-ptrace.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <fstream>
#include <sstream>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "agent/channel.hpp"
#include "agent_library.hpp"
#include "os/linux/high_fd.hpp"
#include "process.hpp"
#include "ptrace_thread.hpp"
#include "symbols/elf_object.hpp"
#include "target_files.hpp"

namespace liveprobe::tool {
namespace {

using Range = std::pair<uint64_t, uint64_t>;

// The functions of libc that hold a lock dlopen (or what it runs) may need.
const char *const kLockingFunctions[] = {
    "malloc", "free", "calloc", "realloc", "reallocarray", "memalign", "aligned_alloc", "posix_memalign",
    "valloc", "pvalloc", "malloc_trim", "malloc_info", "malloc_stats", "mallinfo", "mallinfo2", "dlopen",
    "dlclose", "dlsym", "dlvsym", "dladdr", "dladdr1", "dlinfo", "dlmopen", "dl_iterate_phdr", "pthread_create",
    "pthread_join", "fork", "_Fork", "exit", "_exit", "__cxa_atexit", "__cxa_finalize", "__cxa_thread_atexit_impl",
    "__libc_dlopen_mode", "__libc_dlsym", "__libc_dlclose"};

struct Target {
    std::string libc;  // its path
    uint64_t dlopen = 0, dlerror = 0, mmap = 0, munmap = 0;
    uint64_t memfd_create = 0, fcntl = 0, close = 0;  // to load the agent from a memfd (0: none)
    uint64_t sigreturn = 0;  // __restore_rt
    std::vector<Range> locking;
};

// `mov $15, %rax; syscall`: glibc's __restore_rt, the return path of every signal handler. It
// has no dynamic symbol; it sits next to sigaction's implementation, so the search starts
// there (a few KiB) before it reads the whole text.
uint64_t find_sigreturn(pid_t pid, const LoadedObject &libc, uint64_t near)
{
    static const uint8_t pattern[] = {0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05};
    PtraceThread reader(pid, pid);
    auto search = [&](uint64_t from, uint64_t to) -> uint64_t {
        std::vector<uint8_t> text(to - from);
        if (!reader.read(from, text.data(), text.size())) return 0;
        auto it = std::search(text.begin(), text.end(), std::begin(pattern), std::end(pattern));
        return it == text.end() ? 0 : from + static_cast<uint64_t>(it - text.begin());
    };
    for (const os::Mapping &m : os::read_maps(pid)) {
        if (!m.x || m.path != libc.path) continue;
        if (near >= m.start && near < m.end) {
            uint64_t from = std::max(m.start, near - std::min<uint64_t>(near, 8192));
            if (uint64_t a = search(from, std::min(m.end, near + 8192))) return a;
        }
    }
    for (const os::Mapping &m : os::read_maps(pid))
        if (m.x && m.path == libc.path)
            if (uint64_t a = search(m.start, m.end)) return a;
    return 0;
}

bool exited(pid_t pid);

// Why /proc/PID/maps reads as nothing: the error of reading it, or "empty".
std::string maps_error(pid_t pid)
{
    FILE *f = std::fopen(fmt::format("/proc/{}/maps", pid).c_str(), "re");
    if (!f) return std::strerror(errno);
    errno = 0;
    const int c = std::fgetc(f);
    const int err = errno;
    std::fclose(f);
    return c == EOF && err ? std::strerror(err) : "empty";
}

int inspect(pid_t pid, Target *t, bool *has_library, std::string *why)
{
    std::vector<LoadedObject> objs = loaded_objects(pid);
    *has_library = find_object(objs, "libliveprobe").has_value();
    auto libc = find_object(objs, "libc");
    if (!libc && objs.empty()) {
        // No mapping at all: a process in the middle of its exit, or a map the kernel would not
        // let this user read (it checks ptrace's rules when the map is read, not opened).
        if (exited(pid)) {
            *why = fmt::format("process {} exited during the attach", pid);
            return -ESRCH;
        }
        *why = fmt::format("the kernel does not let you read the memory map of process {} (/proc/{}/maps: {}): it "
                           "cannot be attached (another user's process, one that made itself non-dumpable, or one "
                           "the kernel protects)",
                           pid, pid, maps_error(pid));
        return -EPERM;
    }
    if (!libc) {
        *why = fmt::format("process {} has no libc.so.6 loaded (statically linked?): the agent cannot be loaded", pid);
        return -ENOEXEC;
    }
    t->libc = libc->path;
    std::string err;
    auto elf = symbols::ElfObject::load(path_in(pid, libc->path), false, &err);
    if (!elf) {
        *why = fmt::format("cannot read {}: {}", libc->path, err);
        return -EIO;
    }
    uint64_t bias = elf->elf_type() == ET_DYN ? libc->bias : 0;
    // The function `name` (its default version), or 0.
    auto function = [&](const char *name) -> const symbols::Symbol * {
        if (const std::vector<uint32_t> *idx = elf->by_name(name))
            for (uint32_t i : *idx) {
                const symbols::Symbol &s = elf->symbols()[i];
                if (s.type == STT_FUNC && s.value && !s.hidden_version) return &s;
            }
        return nullptr;
    };
    const char *needed[] = {"dlopen", "dlerror", "mmap", "munmap"};
    uint64_t *slots[] = {&t->dlopen, &t->dlerror, &t->mmap, &t->munmap};
    for (size_t i = 0; i < 4; ++i) {
        const symbols::Symbol *s = function(needed[i]);
        if (!s) {
            *why = fmt::format("{} has no function {}", libc->path, needed[i]);
            return -ENOENT;
        }
        *slots[i] = s->value + bias;
    }
    const char *optional[] = {"memfd_create", "fcntl", "close"};
    uint64_t *optional_slots[] = {&t->memfd_create, &t->fcntl, &t->close};
    for (size_t i = 0; i < 3; ++i)
        if (const symbols::Symbol *s = function(optional[i])) *optional_slots[i] = s->value + bias;
    const symbols::Symbol *sa = function("sigaction");
    t->sigreturn = find_sigreturn(pid, *libc, sa ? sa->value + bias : 0);
    if (!t->sigreturn) {
        // Searched in the process's memory: gone with the process when it exited meanwhile.
        if (exited(pid)) {
            *why = fmt::format("process {} exited during the attach", pid);
            return -ESRCH;
        }
        *why = fmt::format("no signal-return trampoline found in {}", libc->path);
        return -ENOENT;
    }
    for (const char *name : kLockingFunctions) {
        const std::vector<uint32_t> *idx = elf->by_name(name);
        if (!idx) continue;
        for (uint32_t i : *idx) {
            const symbols::Symbol &s = elf->symbols()[i];
            if (s.value && s.size) t->locking.emplace_back(s.value + bias, s.value + bias + s.size);
        }
    }
    for (const LoadedObject &o : objs)
        if (o.path.find("/ld-linux") != std::string::npos || o.path.find("/ld-") != std::string::npos)
            t->locking.emplace_back(o.start, o.end);  // all of the dynamic loader
    return 0;
}

bool in_ranges(const std::vector<Range> &rs, uint64_t a)
{
    for (const Range &r : rs)
        if (a >= r.first && a < r.second) return true;
    return false;
}

// Whether the stopped thread is inside code that holds the loader's or malloc's lock: its
// call chain, unwound through the objects' call frame information (libunwind over ptrace),
// has no frame there. A chain that cannot be unwound to its end is judged by a conservative
// scan of the rest of the stack (any word pointing into that code counts).
bool scan_says_clean(const PtraceThread &t, const Target &target, uint64_t from)
{
    uint64_t sp = from & ~uint64_t(7);
    std::vector<uint64_t> words(512);
    for (uint64_t off = 0; off < 256 * 1024; off += words.size() * 8) {
        if (!t.read(sp + off, words.data(), words.size() * 8)) {
            for (uint64_t a = sp + off;; a += 8) {  // the stack's last page, word by word
                uint64_t w;
                if (!t.read(a, &w, 8)) return true;
                if (in_ranges(target.locking, w)) return false;
            }
        }
        for (uint64_t w : words)
            if (in_ranges(target.locking, w)) return false;
    }
    return true;
}

bool holds_no_lock(const PtraceThread &t, const Target &target)
{
    if (in_ranges(target.locking, t.regs().rip)) return false;
    unw_addr_space_t as = unw_create_addr_space(&_UPT_accessors, 0);
    void *upt = as ? _UPT_create(t.tid()) : nullptr;
    if (!upt) {
        if (as) unw_destroy_addr_space(as);
        return scan_says_clean(t, target, t.regs().rsp);
    }
    bool clean = true, complete = false;
    unw_word_t sp = t.regs().rsp;
    unw_cursor_t c;
    if (unw_init_remote(&c, as, upt) == 0) {
        for (int depth = 0; depth < 256; ++depth) {
            unw_word_t ip = 0;
            unw_get_reg(&c, UNW_REG_IP, &ip);
            unw_get_reg(&c, UNW_REG_SP, &sp);
            if (in_ranges(target.locking, ip)) {
                clean = false;
                break;
            }
            int r = unw_step(&c);
            if (r == 0) {
                complete = true;
                break;
            }
            if (r < 0) break;
        }
    }
    _UPT_destroy(upt);
    unw_destroy_addr_space(as);
    if (clean && !complete) clean = scan_says_clean(t, target, sp);
    return clean;
}

// A free page-aligned address for the stub page: the top of the highest gap of the map that
// neither the heap (brk) nor the main stack grows into, with a free page above it, as the
// kernel places an mmap.
uint64_t free_address(pid_t pid)
{
    std::vector<os::Mapping> maps = os::read_maps(pid);
    std::sort(maps.begin(), maps.end(), [](const os::Mapping &a, const os::Mapping &b) { return a.start < b.start; });
    for (size_t i = maps.size(); i-- > 1;) {
        const os::Mapping &below = maps[i - 1], &above = maps[i];
        if (above.start > 0x7ffffffff000ull || above.path == "[stack]" || below.path == "[stack]" ||
            below.path == "[heap]" || below.end < 0x10000000)
            continue;  // beyond user space (vsyscall), or where the stack or the heap grows
        if (above.start - below.end >= 4 * 4096) return above.start - 2 * 4096;
    }
    return 0;
}

bool mapped_executable(pid_t pid, uint64_t addr)
{
    for (const os::Mapping &m : os::read_maps(pid))
        if (m.start == addr && m.x) return true;
    return false;
}

// Where the stub goes: the zero padding at the end of libc's executable mapping, written
// through ptrace (a private copy of that page, as a breakpoint would make) and zeroed again at
// the end; else a page of its own, mapped by a call of the process's mmap that returns through
// __restore_rt (followed with PTRACE_SYSCALL) and unmapped the same way.
class StubPage {
public:
    StubPage(PtraceThread &t, const Target &target) : t_(t), target_(target) {}
    ~StubPage()
    {
        if (!addr_) return;
        if (padding_) {
            std::string zeros(PtraceThread::kStubBytes, '\0');
            t_.write(addr_, zeros.data(), zeros.size());
            return;
        }
        uint64_t rv;
        std::string err;
        t_.call(target_.munmap, {addr_, 4096}, -1, "", PtraceThread::Return{0, target_.sigreturn}, &rv, &err);
    }
    int map(pid_t pid, std::string *why)
    {
        std::string code = PtraceThread::stub_code();
        // LIVEPROBE_TEST_NO_PADDING=1: the page of its own, as where libc's text has no padding.
        bool padding_allowed = !secure_getenv("LIVEPROBE_TEST_NO_PADDING");
        for (const os::Mapping &m : os::read_maps(pid)) {
            if (!padding_allowed || !m.x || m.path != target_.libc) continue;
            uint64_t at = m.end - PtraceThread::kStubBytes;
            std::string tail(PtraceThread::kStubBytes, '\1');
            if (t_.read(at, tail.data(), tail.size()) && tail.find_first_not_of('\0') == std::string::npos &&
                t_.write(at, code.data(), code.size())) {
                addr_ = at;
                padding_ = true;
                return 0;
            }
        }
        uint64_t want = free_address(pid);
        if (!want) {
            *why = fmt::format("no free address for a code page in process {}", pid);
            return -ENOMEM;
        }
        uint64_t rv = 0;
        // PROT_READ|WRITE|EXEC; MAP_PRIVATE|MAP_ANONYMOUS|MAP_FIXED_NOREPLACE
        int r = t_.call(target_.mmap, {want, 4096, 7, 0x100022, static_cast<uint64_t>(-1), 0}, -1, "",
                        PtraceThread::Return{0, target_.sigreturn}, &rv, why);
        if (r < 0) return r;
        if (!mapped_executable(pid, want)) {
            *why = fmt::format("process {} could not map a code page (is executable anonymous memory forbidden?)", pid);
            return -EPERM;
        }
        addr_ = want;
        if (!t_.write(addr_, code.data(), code.size())) {
            *why = fmt::format("cannot write the code page of process {}", pid);
            return -EFAULT;
        }
        return 0;
    }
    PtraceThread::Return via() const { return PtraceThread::Return{addr_, target_.sigreturn}; }
    bool in_padding() const { return padding_; }

private:
    PtraceThread &t_;
    const Target &target_;
    uint64_t addr_ = 0;
    bool padding_ = false;
};

// Whether the process has exited (gone, or a zombie).
bool exited(pid_t pid)
{
    std::string err;
    auto info = process_info(pid, &err);
    return !info || info->state == 'Z' || info->state == 'X';
}

int check_process(pid_t pid, std::string *why)
{
    auto info = process_info(pid, why);
    // Not a process id at all, or a thread's (which exists): the user's mistake, said as such.
    if (!info) return pid <= 0 || access(fmt::format("/proc/{}", pid).c_str(), F_OK) == 0 ? -EINVAL : -ESRCH;
    if (kernel_thread(pid)) {
        *why = fmt::format("process {} ({}) is a kernel thread: there is no program in it to attach to", pid, info->comm);
        return -EINVAL;
    }
    if (info->state == 'Z' || info->state == 'X') {
        *why = fmt::format("process {} ({}) has exited (state {})", pid, info->comm, info->state);
        return -ESRCH;
    }
    if (info->state == 'T' || info->state == 't') {
        *why = fmt::format("process {} ({}) is stopped (state {}): continue it first (kill -CONT {})", pid, info->comm,
                           info->state, pid);
        return -EAGAIN;
    }
    if (pid == getpid()) {
        *why = "liveprobe cannot attach to itself";
        return -EINVAL;
    }
    return 0;
}

// 0 when the agent of pid answers; -ENOENT when it has none; -EPERM (with *why) when the kernel
// does not let the caller ptrace it (door.hpp: nothing is tried then); -EPROTONOSUPPORT when an
// agent older than the door runs there (a second agent is never loaded beside it); another
// -errno otherwise.
int agent_answers(pid_t pid, std::string *why)
{
    agent::Reply reply;
    const int r = agent::request(pid, "hello", {}, &reply, why, 2000);
    return r < 0 ? r : reply.ok ? 0 : -EPROTO;
}

// The process's dlerror() after a dlopen that failed, or "dlopen failed".
std::string remote_dlerror(PtraceThread &t, const Target &target, const PtraceThread::Return &via)
{
    uint64_t m = 0;
    std::string err;
    if (target.dlerror && t.call(target.dlerror, {}, -1, "", via, &m, &err) == 0 && m) return t.read_string(m);
    return "dlopen failed";
}

// The agent's file is in the process's root, at the tool's path: dlopen(path).
int load_by_path(pid_t pid, PtraceThread &t, const Target &target, const PtraceThread::Return &via,
                 const std::string &library, std::string *why)
{
    uint64_t rv = 0;
    std::string err;
    if (int r = t.call(target.dlopen, {0, RTLD_NOW}, 0, library, via, &rv, &err); r < 0) {
        *why = fmt::format("loading {}: {}", library, err);
        return r;
    }
    if (rv) return 0;
    *why = fmt::format("process {} could not load {}: {}", pid, library, remote_dlerror(t, target, via));
    return -ENOEXEC;
}

// Whether load_from_memfd can work in process pid: 0, or -errno with *why.
int check_memfd_load(pid_t pid, const Target &target, std::string *why)
{
    if (!root_has_proc(pid)) {
        *why = fmt::format("process {} has a root of its own (a container or a chroot) without a /proc that shows it "
                           "(none, or one of another pid namespace): the agent, which is not in that root, is loaded "
                           "there through /proc/self/fd (mount its pid namespace's proc at /proc in it)",
                           pid);
        return -ENOENT;
    }
    if (!target.memfd_create || !target.fcntl || !target.close) {
        *why = fmt::format("process {} has a root of its own (a container or a chroot) and its {} has no memfd_create: "
                           "the agent, which is not in that root, cannot be loaded there",
                           pid, target.libc);
        return -ENOSYS;
    }
    return 0;
}

// Step 3 of load_from_memfd: the library's bytes copied into the memfd `fd` of process pid,
// opened through /proc/PID/fd (as the kernel lets whoever may ptrace it), then sealed.
int fill_memfd(pid_t pid, int fd, const std::string &library, const std::string &name, std::string *why)
{
    const std::string at = fmt::format("/proc/{}/fd/{}", pid, fd);
    char link[PATH_MAX] = {};
    const bool named = readlink(at.c_str(), link, sizeof link - 1) > 0 && link == "/memfd:" + name + " (deleted)";
    const int out = named ? open(at.c_str(), O_WRONLY | O_CLOEXEC) : -1;
    const int in = out >= 0 ? open(library.c_str(), O_RDONLY | O_CLOEXEC) : -1;
    struct stat src {}, dst {};
    int e = 0;
    if (!named) e = ESTALE;  // another thread of the program closed it and took the number
    else if (out < 0 || in < 0 || fstat(in, &src) != 0 || fstat(out, &dst) != 0) e = errno;
    else if (dst.st_size != 0 || dst.st_nlink != 0) e = ESTALE;
    for (off_t off = 0; e == 0 && off < src.st_size;)
        if (sendfile(out, in, &off, static_cast<size_t>(src.st_size - off)) <= 0) e = errno ? errno : EIO;
    // The agent's code is what the tool read: nobody writes, grows or shrinks it any more.
    if (e == 0 && fcntl(out, F_ADD_SEALS, F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE) != 0) e = errno;
    if (in >= 0) close(in);
    if (out >= 0) close(out);
    if (e) *why = fmt::format("cannot copy {} into a memfd of process {} ({}): {}", library, pid, at, std::strerror(e));
    return -e;
}

// Loads the agent into a process whose root does not have the agent's file (a container, a
// chroot): its libraries must be there, the agent itself need not.
//   1. (check_memfd_load, before a thread is stopped) The root has a /proc, and libc memfd_create.
//   2. The process makes a memfd (close-on-exec, sealable), named as the library: a file of its
//      own, in no directory of any root.
//   3. The tool copies the library into it through /proc/PID/fd/N and seals it (fill_memfd).
//   4. The process moves it to liveprobe's descriptors (512 and up, os/linux/high_fd.hpp) and
//      closes N: a program that counts on which number its next open() takes is not disturbed.
//   5. dlopen("/proc/self/fd/H"): the loader finds the agent's libraries in the process's own
//      root. H stays open: it is the agent's name in the loader's list, which the agent's symbol
//      reader opens, and how the tool reads the agent's symbols (target_files.hpp, path_in).
//   6. When dlopen fails, H is closed and the message names every library of the agent's that
//      the root lacks (missing_in_root), with dlerror's text.
int load_from_memfd(pid_t pid, PtraceThread &t, const Target &target, const PtraceThread::Return &via,
                    const std::string &library, std::string *why)
{
    const std::string name = library.substr(library.rfind('/') + 1);
    uint64_t rv = 0;
    std::string err;
    auto remote_close = [&](int n) {
        uint64_t ignored = 0;
        t.call(target.close, {static_cast<uint64_t>(n)}, -1, "", via, &ignored, &err);
    };
    if (int r = t.call(target.memfd_create, {0, MFD_CLOEXEC | MFD_ALLOW_SEALING}, 0, name, via, &rv, &err); r < 0) {
        *why = fmt::format("making a memfd in process {}: {}", pid, err);
        return r;
    }
    const int fd = static_cast<int>(rv);
    if (fd < 0) {
        *why = fmt::format("process {} could not make a memfd for the agent", pid);
        return -EMFILE;
    }
    if (int r = fill_memfd(pid, fd, library, name, why); r < 0) {
        remote_close(fd);
        return r;
    }
    int high = fd;
    if (t.call(target.fcntl, {static_cast<uint64_t>(fd), F_DUPFD_CLOEXEC, os::kFirstHighFd}, -1, "", via, &rv, &err) == 0 &&
        static_cast<int>(rv) >= 0) {
        high = static_cast<int>(rv);
        remote_close(fd);
    }
    const std::string path = fmt::format("/proc/self/fd/{}", high);
    const int r = t.call(target.dlopen, {0, RTLD_NOW}, 0, path, via, &rv, &err);
    if (r == 0 && rv) return 0;
    const std::string msg = r < 0 ? err : remote_dlerror(t, target, via);
    remote_close(high);
    const std::vector<std::string> missing = missing_in_root(pid, library);
    if (missing.empty())
        *why = fmt::format("process {} could not load {} (from a memfd: its root, a container's or a chroot's, does not "
                           "have it): {}",
                           pid, library, msg);
    else
        *why = fmt::format("process {} cannot load the agent: its root (a container's or a chroot's) lacks {}, which {} "
                           "needs; install them there (dlopen: {})",
                           pid, fmt::join(missing, ", "), name, msg);
    return r < 0 ? r : -ENOEXEC;
}

}  // namespace

static int attach(pid_t pid, AttachReport *out, std::string *why)
{
    auto t0 = std::chrono::steady_clock::now();
    // LIVEPROBE_TRACE_ATTACH=1: the time of each step, on stderr.
    static const bool trace = secure_getenv("LIVEPROBE_TRACE_ATTACH") != nullptr;
    auto last = t0;
    auto phase = [&](const char *what) {
        if (!trace) return;
        auto now = std::chrono::steady_clock::now();
        std::fprintf(stderr, "liveprobe: attach: %-28s %7.2f ms\n", what,
                     std::chrono::duration<double, std::milli>(now - last).count());
        last = now;
    };
    *out = AttachReport{};
    if (int r = check_process(pid, why); r < 0) return r;
    auto finish = [&] {
        out->ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    };
    if (int r = agent_answers(pid, why); r == 0) {
        out->already_running = true;
        finish();
        return 0;
    } else if (r == -EPERM || r == -EPROTONOSUPPORT) {
        return r;  // what ptrace would answer, or an agent older than the door: nothing to try
    }
    why->clear();
    phase("checks");
    std::string library = agent_library(why);
    if (library.empty()) return -ENOENT;
    Target target;
    bool has_library = false;
    if (int r = inspect(pid, &target, &has_library, why); r < 0) {
        if (exited(pid)) *why = fmt::format("process {} exited during the attach", pid);
        return r;
    }
    // A root without the agent's file (a container, a chroot): loaded from a memfd, through
    // the root's /proc (load_from_memfd); refused before a thread is stopped when it cannot be.
    const bool in_root = same_file_in_root(pid, library);
    if (!has_library && !in_root) {
        if (int r = check_memfd_load(pid, target, why); r < 0) return r;
    }

    // A thread that holds no lock dlopen needs; the others keep running.
    phase("addresses in the process");
    std::unique_ptr<PtraceThread> thread;
    for (int round = 0; round < 100 && !thread; ++round) {
        std::vector<pid_t> tids = threads_of(pid);
        if (tids.empty()) {
            *why = fmt::format("process {} exited", pid);
            return -ESRCH;
        }
        std::stable_partition(tids.begin(), tids.end(), [pid](pid_t t) { return t == pid; });  // main thread first
        for (pid_t tid : tids) {
            auto t = std::make_unique<PtraceThread>(pid, tid);
            std::string err;
            int r = t->seize_and_stop(&err);
            if (r == -ESRCH) continue;  // that thread exited
            if (r < 0) {
                *why = exited(pid) ? fmt::format("process {} exited during the attach", pid) : err;
                return r;
            }
            if (holds_no_lock(*t, target)) {
                thread = std::move(t);
                break;
            }
            t->detach();
        }
        if (!thread) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (!thread) {
        *why = fmt::format("every thread of process {} was inside the dynamic loader or malloc for a second: try again",
                           pid);
        return -EAGAIN;
    }
    out->thread = thread->tid();
    phase("a thread stopped");
    {
    StubPage stub(*thread, target);
    if (int r = stub.map(pid, why); r < 0) return r;
    phase("code page mapped");
    uint64_t rv = 0;
    if (!has_library) {
        const int r = in_root ? load_by_path(pid, *thread, target, stub.via(), library, why)
                              : load_from_memfd(pid, *thread, target, stub.via(), library, why);
        if (r < 0) return r;
        out->loaded_library = true;
        phase("dlopen");
        test_kill_point("loaded");
    }
    auto lib = find_object(loaded_objects(pid), "libliveprobe");
    uint64_t start = lib ? remote_symbol(pid, *lib, "liveprobe_agent_start_attached", why) : 0;
    if (!start) {
        if (!lib) *why = fmt::format("libliveprobe is not in process {} after loading it", pid);
        return -ENOENT;
    }
    std::string err;
    if (int r = thread->call(start, {}, -1, "", stub.via(), &rv, &err); r < 0) {
        *why = fmt::format("starting the agent: {}", err);
        return r;
    }
    if (static_cast<int>(rv) < 0) {
        uint64_t strerror_fn = remote_symbol(pid, *lib, "liveprobe_strerror", &err), m = 0;
        std::string msg = std::strerror(-static_cast<int>(rv));
        if (strerror_fn && thread->call(strerror_fn, {rv}, -1, "", stub.via(), &m, &err) == 0 && m)
            msg = thread->read_string(m);
        *why = fmt::format("the agent did not start in process {}: {}", pid, msg);
        return static_cast<int>(rv);
    }
    phase("agent started");
    }  // the stub page goes
    phase("code page unmapped");
    thread->detach();
    phase("thread let go");
    test_kill_point("detached");
    std::string unanswered;
    for (int i = 0; i < 100; ++i) {
        if (agent_answers(pid, &unanswered) == 0) {
            phase("the agent answers");
            finish();
            return 0;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (exited(pid)) {
        *why = fmt::format("process {} exited right after the agent was started in it", pid);
        return -ESRCH;
    }
    *why = fmt::format("the agent of process {} was started but does not answer through its door ({})", pid, unanswered);
    return -ETIMEDOUT;
}

// The process that ptraces a thread of pid (TracerPid), other than this one: 0 when none.
static pid_t tracer_of(pid_t pid)
{
    for (pid_t tid : threads_of(pid)) {
        std::ifstream in(fmt::format("/proc/{}/task/{}/status", pid, tid));
        for (std::string line; std::getline(in, line);) {
            if (line.rfind("TracerPid:", 0) != 0) continue;
            const pid_t t = static_cast<pid_t>(std::atol(line.c_str() + 10));
            if (t != 0 && t != getpid()) return t;
            break;
        }
    }
    return 0;
}

int attach_agent(pid_t pid, AttachReport *out, std::string *why)
{
    // Another liveprobe attaching at the same moment (two traces started together) holds a
    // thread of the process stopped for some milliseconds, and its agent will serve us too:
    // wait for it, up to 10 s. Any other tracer (gdb, strace) is an error that names it. Once
    // without a tracer: the other one may have let go between the failure and the look.
    int r = 0;
    bool again = true;
    for (auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);;) {
        r = attach(pid, out, why);
        if (r != -EAGAIN && r != -EPERM) break;
        const pid_t tracer = tracer_of(pid);
        std::string ignored;
        const auto info = tracer ? process_info(tracer, &ignored) : std::nullopt;
        if (tracer && info && info->comm != "liveprobe") {
            *why += fmt::format(" (it is traced by process {}, {})", tracer, info->comm);
            break;
        }
        if (std::chrono::steady_clock::now() > until || (!tracer && !std::exchange(again, false))) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    // Whatever step it failed at, a process that exited meanwhile is the reason.
    if (r < 0 && r != -EPERM && r != -EINVAL && exited(pid) && why->find("exited") == std::string::npos &&
        why->find("no process") == std::string::npos)
        *why = fmt::format("process {} exited during the attach ({})", pid, *why);
    return r;
}

}  // namespace liveprobe::tool
