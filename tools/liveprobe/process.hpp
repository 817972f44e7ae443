// What the tool knows of a target process, from /proc/PID: whether it exists, whose it is, its
// threads, its objects, and where a symbol of one of its objects is.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "os/linux/maps.hpp"
#include "target_files.hpp"  // path_in: a mapped file, whatever the process's root

namespace liveprobe::tool {

struct ProcessInfo {
    pid_t pid = 0;
    uid_t uid = 0;          // real user
    std::string comm;       // its name (/proc/PID/comm)
    std::string exe;        // /proc/PID/exe, when readable
    char state = '?';       // R, S, D, T, Z, ...
};

// The process, or nullopt with *why ("no process 12345").
std::optional<ProcessInfo> process_info(pid_t pid, std::string *why);

// Its auxiliary vector (/proc/PID/auxv), raw: it changes when the process executes a program
// (AT_RANDOM, AT_PHDR... are new addresses), the same program again included. Empty when unreadable.
std::string process_auxv(pid_t pid);

// Its threads (task ids), sorted.
std::vector<pid_t> threads_of(pid_t pid);

// The fields of a /proc/PID/stat file (proc(5)) from the 3rd, the state, on: field n is
// out[n - 3]. The 2nd, the name in parentheses, may hold spaces and parentheses: the fields start
// after its last ')'. Empty when the file cannot be read.
std::vector<std::string> stat_fields(const std::string &stat_file);

// Whether pid is a kernel thread (PF_KTHREAD in /proc/PID/stat's flags): no program in it.
bool kernel_thread(pid_t pid);

// One loaded object: its path and load bias (file address + bias = address in the process).
struct LoadedObject {
    std::string path;
    uint64_t bias = 0;
    uint64_t start = 0, end = 0;  // the lowest and highest addresses of its mappings
    // The file through one of its mappings (/proc/PID/map_files/START-END): still there when
    // the path no longer is (a library replaced by an upgrade: "PATH (deleted)").
    std::string map_file;
};
std::vector<LoadedObject> loaded_objects(pid_t pid);

// The object whose base name (without version suffixes) is `name` ("libc", "libc.so.6").
std::optional<LoadedObject> find_object(const std::vector<LoadedObject> &objs, const std::string &name);

// The address in `pid` of `symbol` (a .dynsym or .symtab function) of `obj`: 0 with *why.
uint64_t remote_symbol(pid_t pid, const LoadedObject &obj, const std::string &symbol, std::string *why);
// The same for several symbols, reading the object once: false (with *why) if one is missing.
bool remote_symbols(pid_t pid, const LoadedObject &obj, const std::vector<std::string> &names,
                    std::vector<uint64_t> *out, std::string *why);

}  // namespace liveprobe::tool
