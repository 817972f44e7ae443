// liveprobe list -p PID [PATTERN]: the functions of a process that can be probed, as
// OBJECT:NAME (the form symbol_name takes), like `perf probe -F`. Read from the objects' files;
// the process is not touched.
#include <CLI/CLI.hpp>

#include <elf.h>
#include <fnmatch.h>

#include <cerrno>
#include <cstdio>
#include <set>

#include <fmt/format.h>

#include "commands.hpp"
#include "process.hpp"
#include "symbols/elf_object.hpp"
#include "symbols/names.hpp"

namespace liveprobe::tool {

namespace {

// Whether this process may read pid's memory map: the kernel makes ptrace's read check when the
// map is read, not when it is opened. An empty map (a kernel thread's) is a readable one.
bool map_readable(pid_t pid)
{
    FILE *f = std::fopen(fmt::format("/proc/{}/maps", pid).c_str(), "r");
    if (!f) return false;
    errno = 0;
    const bool ok = std::fgetc(f) != EOF || errno == 0;
    std::fclose(f);
    return ok;
}

}  // namespace

Runner add_list(CLI::App &app)
{
    auto *cmd = app.add_subcommand("list", "List the functions of a process that can be probed (OBJECT:NAME)");
    auto pid = std::make_shared<int>(0);
    auto pattern = std::make_shared<std::string>("*");
    auto demangle = std::make_shared<bool>(false);
    cmd->add_option("-p,--pid", *pid, "The process")->required();
    cmd->add_option("pattern", *pattern, "A glob on the function's name (or its demangled name), '*' by default");
    cmd->add_flag("-d,--demangle", *demangle, "Show C++ names demangled");
    return [pid, pattern, demangle] {
        std::string why;
        if (!process_info(*pid, &why)) {
            complain(why);
            return kExitFailure;
        }
        if (!map_readable(*pid)) {
            complain(fmt::format("the kernel does not let you read the memory map of process {} (another user's "
                                 "process, or one that made itself non-dumpable): its functions cannot be listed",
                                 *pid));
            return kExitFailure;
        }
        size_t shown = 0;
        for (const LoadedObject &o : loaded_objects(*pid)) {
            std::string err;
            auto elf = symbols::ElfObject::load(path_in(*pid, o.path), true, &err);
            if (!elf) continue;  // not ELF (a data file mapped in)
            std::string object(symbols::names::base_name(o.path));
            std::set<std::string> names;
            for (const symbols::Symbol &s : elf->symbols()) {
                if ((s.type != STT_FUNC && s.type != STT_GNU_IFUNC) || s.value == 0 || s.hidden_version) continue;
                std::string name = s.name.substr(0, s.name.find('@'));
                std::string shown_name = *demangle ? symbols::names::demangle(name.c_str()) : name;
                if (shown_name.empty()) shown_name = name;
                if (fnmatch(pattern->c_str(), name.c_str(), 0) != 0 &&
                    fnmatch(pattern->c_str(), shown_name.c_str(), 0) != 0)
                    continue;
                names.insert(shown_name);
            }
            for (const std::string &n : names) std::printf("%s:%s\n", object.c_str(), n.c_str());
            shown += names.size();
        }
        if (shown == 0) {
            complain(fmt::format("no function of process {} matches '{}'", *pid, *pattern));
            return kExitFailure;
        }
        return 0;
    };
}

}  // namespace liveprobe::tool
