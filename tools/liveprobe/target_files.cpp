#include "target_files.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "os/linux/maps.hpp"
#include "process.hpp"

namespace liveprobe::tool {
namespace {

std::string root_of(pid_t pid) { return fmt::format("/proc/{}/root", pid); }

// Whether `path` (followed) is the file of device `dev`, inode `ino`.
bool is_file(const std::string &path, uint64_t dev, uint64_t ino)
{
    struct stat st {};
    return stat(path.c_str(), &st) == 0 && st.st_ino == ino && st.st_dev == dev;
}

// A descriptor of pid open on the file (dev, ino): /proc/PID/fd/N, or "".
std::string descriptor_of(pid_t pid, uint64_t dev, uint64_t ino)
{
    const std::string dir = fmt::format("/proc/{}/fd", pid);
    DIR *d = opendir(dir.c_str());
    if (!d) return {};
    std::string found;
    while (struct dirent *e = readdir(d)) {
        if (e->d_name[0] == '.') continue;
        if (std::string p = dir + "/" + e->d_name; is_file(p, dev, ino)) {
            found = p;
            break;
        }
    }
    closedir(d);
    return found;
}

// The DT_NEEDED names of the ELF file at `path`; false when it is no readable ELF file.
bool needed_of(const std::string &path, std::vector<std::string> *out)
{
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    elf_version(EV_CURRENT);
    Elf *elf = elf_begin(fd, ELF_C_READ, nullptr);
    bool ok = elf && elf_kind(elf) == ELF_K_ELF;
    for (Elf_Scn *scn = nullptr; ok && (scn = elf_nextscn(elf, scn));) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNAMIC) continue;
        Elf_Data *data = elf_getdata(scn, nullptr);
        for (size_t i = 0; data && sh.sh_entsize && i < sh.sh_size / sh.sh_entsize; ++i) {
            GElf_Dyn dyn;
            if (!gelf_getdyn(data, static_cast<int>(i), &dyn) || dyn.d_tag != DT_NEEDED) continue;
            if (const char *name = elf_strptr(elf, sh.sh_link, dyn.d_un.d_val)) out->emplace_back(name);
        }
    }
    if (elf) elf_end(elf);
    close(fd);
    return ok;
}

// The loader's directories under `root` ("" for the tool's own): the standard ones, then those
// named in ROOT/etc/ld.so.conf.d/*.conf (one a line; comments and includes skipped).
std::vector<std::string> library_dirs(const std::string &root)
{
    std::vector<std::string> dirs = {"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64",
                                     "/lib", "/usr/lib", "/usr/local/lib"};
    const std::string conf = root + "/etc/ld.so.conf.d";
    if (DIR *d = opendir(conf.c_str())) {
        while (struct dirent *e = readdir(d)) {
            std::string name = e->d_name;
            if (name.size() < 5 || name.compare(name.size() - 5, 5, ".conf") != 0) continue;
            std::ifstream in(conf + "/" + name);
            for (std::string line; std::getline(in, line);)
                if (!line.empty() && line[0] == '/') dirs.push_back(line.substr(0, line.find_first_of(" \t#")));
        }
        closedir(d);
    }
    return dirs;
}

// Where `soname` is under `root`: ROOT/DIR/SONAME for the first of `dirs` that has it, or "".
std::string find_library(const std::string &root, const std::vector<std::string> &dirs, const std::string &soname)
{
    for (const std::string &dir : dirs)
        if (std::string p = root + dir + "/" + soname; access(p.c_str(), R_OK) == 0) return p;
    return {};
}

}  // namespace

std::string path_in(pid_t pid, const std::string &path)
{
    const std::string root = root_of(pid);
    const os::Mapping *m = nullptr;
    const std::vector<os::Mapping> maps = os::read_maps(pid);
    for (const os::Mapping &x : maps)
        if (x.path == path && x.inode) {
            m = &x;
            break;
        }
    if (!m) return root + path;
    const std::string deleted = " (deleted)";
    if (!path.ends_with(deleted)) {
        for (size_t at = 0; at != std::string::npos; at = path.find('/', at + 1))  // 1. every tail
            if (std::string p = root + path.substr(at); is_file(p, m->dev, m->inode)) return p;
        if (is_file(path, m->dev, m->inode)) return path;  // 2.
    }
    if (std::string p = fmt::format("/proc/{}/map_files/{:x}-{:x}", pid, m->start, m->end);
        is_file(p, m->dev, m->inode))
        return p;  // 3.
    if (std::string p = descriptor_of(pid, m->dev, m->inode); !p.empty()) return p;  // 4.
    return root + path;
}

bool same_file_in_root(pid_t pid, const std::string &host_path)
{
    struct stat here {}, there {};
    return stat(host_path.c_str(), &here) == 0 && stat((root_of(pid) + host_path).c_str(), &there) == 0 &&
           here.st_dev == there.st_dev && here.st_ino == there.st_ino;
}

bool root_has_proc(pid_t pid)
{
    const std::string proc = root_of(pid) + "/proc";
    struct statfs fs {};
    if (statfs(proc.c_str(), &fs) != 0 || fs.f_type != PROC_SUPER_MAGIC) return false;
    // Its pid in each namespace it is in (NSpid): that proc shows it when one of them is the
    // same process there (the same start time, field 22 of stat, after the name's ')').
    auto start_time = [](const std::string &stat_file) {
        const std::vector<std::string> f = stat_fields(stat_file);
        return f.size() > 22 - 3 ? f[22 - 3] : std::string();
    };
    const std::string mine = start_time(fmt::format("/proc/{}/stat", pid));
    std::ifstream status(fmt::format("/proc/{}/status", pid));
    for (std::string line; std::getline(status, line);) {
        if (!line.starts_with("NSpid:")) continue;
        std::istringstream ids(line.substr(6));
        for (std::string id; ids >> id;)
            if (!mine.empty() && start_time(proc + "/" + id + "/stat") == mine) return true;
    }
    return false;
}

std::vector<std::string> missing_in_root(pid_t pid, const std::string &library)
{
    const std::string root = root_of(pid);
    const std::vector<std::string> there = library_dirs(root), here = library_dirs("");
    std::vector<std::string> todo, missing;
    needed_of(library, &todo);
    std::set<std::string> seen;
    // Breadth first, so that the agent's own needs come first in the message.
    for (size_t i = 0; i < todo.size(); ++i) {
        const std::string soname = todo[i];
        if (!seen.insert(soname).second || soname.starts_with("ld-linux")) continue;
        std::string file = find_library(root, there, soname);
        if (file.empty()) {
            missing.push_back(soname);
            file = find_library("", here, soname);
        }
        if (!file.empty()) needed_of(file, &todo);
    }
    return missing;
}

}  // namespace liveprobe::tool
