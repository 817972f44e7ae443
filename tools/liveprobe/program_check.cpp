#include "program_check.hpp"

#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include <fmt/format.h>

namespace liveprobe::tool {
std::string resolve_command(const std::string &command)
{
    if (command.find('/') != std::string::npos) return command;
    const char *env = std::getenv("PATH");
    std::istringstream path(env && *env ? env : "/usr/local/bin:/usr/bin:/bin");
    for (std::string dir; std::getline(path, dir, ':');) {
        const std::string p = (dir.empty() ? std::string(".") : dir) + "/" + command;
        struct stat st {};
        if (stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(p.c_str(), X_OK) == 0) return p;
    }
    return {};
}

namespace {

bool read_at(int fd, void *buf, size_t n, off_t at) { return pread(fd, buf, n, at) == static_cast<ssize_t>(n); }

}  // namespace

int check_loadable(const std::string &command, std::string *why)
{
    const std::string path = resolve_command(command);
    if (path.empty()) return 0;
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    struct Closer {
        int fd;
        ~Closer() { close(fd); }
    } closer{fd};
    unsigned char ident[EI_NIDENT] = {};
    if (!read_at(fd, ident, sizeof ident, 0) || std::memcmp(ident, ELFMAG, SELFMAG) != 0) return 0;  // a script
    if (ident[EI_CLASS] != ELFCLASS64) {
        *why = fmt::format("{} is a 32-bit program: liveprobe's agent is built for x86-64", path);
        return -ENOEXEC;
    }
    Elf64_Ehdr eh {};
    if (!read_at(fd, &eh, sizeof eh, 0) || eh.e_phentsize != sizeof(Elf64_Phdr)) return 0;
    if (eh.e_machine != EM_X86_64) {
        *why = fmt::format("{} is not an x86-64 program (ELF machine {}): liveprobe's agent is built for x86-64", path,
                           eh.e_machine);
        return -ENOEXEC;
    }
    for (unsigned i = 0; i < eh.e_phnum && i < 256; ++i) {
        Elf64_Phdr ph {};
        if (!read_at(fd, &ph, sizeof ph, static_cast<off_t>(eh.e_phoff + i * sizeof ph))) return 0;
        if (ph.p_type != PT_INTERP) continue;
        char interp[256] = {};
        if (!read_at(fd, interp, std::min<size_t>(ph.p_filesz, sizeof interp - 1), static_cast<off_t>(ph.p_offset)))
            return 0;
        if (std::strstr(interp, "ld-musl")) {
            *why = fmt::format("{} runs on musl's loader ({}): liveprobe's agent is built for glibc and cannot be "
                               "loaded into it",
                               path, interp);
            return -ENOEXEC;
        }
        return 0;
    }
    *why = fmt::format("{} is statically linked: liveprobe's agent is a shared library, which only a dynamically "
                       "linked program loads",
                       path);
    return -ENOEXEC;
}

}  // namespace liveprobe::tool
