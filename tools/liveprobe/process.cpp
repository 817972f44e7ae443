#include "process.hpp"

#include <dirent.h>
#include <elf.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include <fmt/format.h>

#include "symbols/elf_object.hpp"

namespace liveprobe::tool {

std::optional<ProcessInfo> process_info(pid_t pid, std::string *why)
{
    if (pid <= 0) {
        *why = fmt::format("{} is not a process id", pid);
        return std::nullopt;
    }
    std::ifstream status(fmt::format("/proc/{}/status", pid));
    if (!status) {
        *why = fmt::format("no process {}", pid);
        return std::nullopt;
    }
    ProcessInfo info;
    info.pid = pid;
    bool have_uid = false;
    for (std::string line; std::getline(status, line);) {
        if (line.rfind("Name:", 0) == 0) {
            info.comm = line.substr(5);
            info.comm.erase(0, info.comm.find_first_not_of(" \t"));
        } else if (line.rfind("Uid:", 0) == 0) {
            std::istringstream in(line.substr(4));
            in >> info.uid;
            have_uid = true;
        } else if (line.rfind("State:", 0) == 0) {
            std::string rest = line.substr(6);
            rest.erase(0, rest.find_first_not_of(" \t"));
            if (!rest.empty()) info.state = rest[0];
        } else if (line.rfind("Tgid:", 0) == 0) {
            if (std::stoi(line.substr(5)) != pid) {
                *why = fmt::format("{} is a thread of process {}, not a process", pid, std::stoi(line.substr(5)));
                return std::nullopt;
            }
        }
    }
    if (!have_uid) {
        *why = fmt::format("cannot read /proc/{}/status", pid);
        return std::nullopt;
    }
    char buf[4096];
    ssize_t n = readlink(fmt::format("/proc/{}/exe", pid).c_str(), buf, sizeof buf - 1);
    if (n > 0) info.exe.assign(buf, static_cast<size_t>(n));
    return info;
}

std::string process_auxv(pid_t pid)
{
    std::ifstream in(fmt::format("/proc/{}/auxv", pid), std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::vector<pid_t> threads_of(pid_t pid)
{
    std::vector<pid_t> out;
    DIR *d = opendir(fmt::format("/proc/{}/task", pid).c_str());
    if (!d) return out;
    while (struct dirent *e = readdir(d)) {
        char *end = nullptr;
        long t = std::strtol(e->d_name, &end, 10);
        if (*e->d_name && !*end && t > 0) out.push_back(static_cast<pid_t>(t));
    }
    closedir(d);
    std::sort(out.begin(), out.end());
    return out;
}

std::vector<LoadedObject> loaded_objects(pid_t pid)
{
    std::map<std::string, LoadedObject> by_path;
    std::vector<std::string> order;
    for (const os::Mapping &m : os::read_maps(pid)) {
        if (m.path.empty() || m.path[0] != '/') continue;
        auto [it, fresh] = by_path.try_emplace(m.path);
        LoadedObject &o = it->second;
        if (fresh) {
            o.path = m.path;
            o.start = m.start;
            o.end = m.end;
            o.map_file = fmt::format("/proc/{}/map_files/{:x}-{:x}", pid, m.start, m.end);
            order.push_back(m.path);
        }
        o.start = std::min(o.start, m.start);
        o.end = std::max(o.end, m.end);
        // The mapping of file offset 0 holds the ELF header at the object's base; shared
        // objects and PIE executables are linked at 0, so that base is the bias.
        if (m.offset == 0) o.bias = m.start;
    }
    std::vector<LoadedObject> out;
    for (const std::string &p : order) out.push_back(by_path[p]);
    return out;
}

namespace {
// "libc.so.6" -> "libc"; "/usr/lib/x86_64-linux-gnu/libz.so.1.2.13" -> "libz".
std::string stem(const std::string &path)
{
    std::string base = path.substr(path.rfind('/') + 1);
    // A memfd's file: "/memfd:libliveprobe.so.0 (deleted)" (the agent loaded into a container).
    if (base.starts_with("memfd:")) base.erase(0, 6);
    size_t so = base.find(".so");
    return so == std::string::npos ? base : base.substr(0, so);
}
}  // namespace

std::optional<LoadedObject> find_object(const std::vector<LoadedObject> &objs, const std::string &name)
{
    for (const LoadedObject &o : objs) {
        std::string base = o.path.substr(o.path.rfind('/') + 1);
        if (base == name || stem(o.path) == name || stem(o.path) == stem(name)) return o;
    }
    return std::nullopt;
}

bool remote_symbols(pid_t pid, const LoadedObject &obj, const std::vector<std::string> &names,
                    std::vector<uint64_t> *out, std::string *why)
{
    std::string err;
    auto elf = symbols::ElfObject::load(path_in(pid, obj.path), false, &err);
    if (!elf) {
        *why = fmt::format("cannot read {}: {}", obj.path, err);
        return false;
    }
    uint64_t bias = elf->elf_type() == ET_DYN ? obj.bias : 0;
    out->assign(names.size(), 0);
    for (size_t n = 0; n < names.size(); ++n) {
        if (const std::vector<uint32_t> *idx = elf->by_name(names[n])) {
            for (uint32_t i : *idx) {
                const symbols::Symbol &s = elf->symbols()[i];
                if (s.type == STT_FUNC && s.value && !s.hidden_version) {
                    (*out)[n] = s.value + bias;
                    break;
                }
            }
        }
        if (!(*out)[n]) {
            *why = fmt::format("{} has no function {}", obj.path, names[n]);
            return false;
        }
    }
    return true;
}

uint64_t remote_symbol(pid_t pid, const LoadedObject &obj, const std::string &symbol, std::string *why)
{
    std::vector<uint64_t> out;
    return remote_symbols(pid, obj, {symbol}, &out, why) ? out[0] : 0;
}

std::vector<std::string> stat_fields(const std::string &stat_file)
{
    std::ifstream f(stat_file);
    std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    const size_t paren = stat.rfind(')');
    std::vector<std::string> out;
    if (paren == std::string::npos) return out;
    std::istringstream in(stat.substr(paren + 1));
    for (std::string field; in >> field;) out.push_back(field);
    return out;
}

bool kernel_thread(pid_t pid)
{
    const std::vector<std::string> f = stat_fields(fmt::format("/proc/{}/stat", pid));
    const unsigned long flags = f.size() > 9 - 3 ? std::strtoul(f[9 - 3].c_str(), nullptr, 10) : 0;
    return flags & 0x00200000;  // PF_KTHREAD
}

}  // namespace liveprobe::tool
