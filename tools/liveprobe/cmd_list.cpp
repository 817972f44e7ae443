// liveprobe list -p PID [PATTERN] | -x FILE [PATTERN]: the functions of a process, or of an
// executable or library on disk, that can be probed, as OBJECT:NAME (the form symbol_name
// takes), like `perf probe -F` and `bpftrace -l`; with --params, each one's parameters and
// return type from DWARF; --lines FUNC: the source lines of FUNC that can be probed, with the
// variables readable at each (`perf probe -L` and `-V`). Read from the objects' files; the
// process is not touched.
#include <CLI/CLI.hpp>

#include <elf.h>
#include <fnmatch.h>

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <cstdio>
#include <map>
#include <memory>

#include <fmt/format.h>

#include "commands.hpp"
#include "process.hpp"
#include "source_specs.hpp"
#include "symbols/dwarf_lines.hpp"
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

// What list shows: each object's functions that match, as OBJECT:NAME. `pattern` is a glob on the
// name, mangled or demangled, or OBJECT:GLOB as `trace` takes it (OBJECT by its base name, with
// or without its version suffix). `path` is where to read the object (through /proc/PID/root
// for a process). The number shown.
// " (TYPE NAME, ...) -> TYPE" from the function's DWARF at file address `entry`, or "" when
// there is none.
std::string params_text(symbols::DwarfReader *dwarf, uint64_t entry)
{
    symbols::SourceFunction f;
    if (!dwarf || !dwarf->function_at(entry, &f) || f.entry != entry) return {};
    std::string out;
    for (const symbols::Param &p : f.params) {
        const bool suffix = !p.type.empty() && (p.type.back() == '*' || p.type.back() == '&');
        out += fmt::format("{}{}{}{}", out.empty() ? "" : ", ", p.type, suffix || p.name.empty() ? "" : " ", p.name);
    }
    return fmt::format("  ({}) -> {}", out, f.ret_type);
}

size_t list_object(const std::string &object_path, const std::string &path, const std::string &pattern, bool demangle,
                   bool params)
{
    std::string glob = pattern;
    if (const size_t colon = pattern.find(':'); colon != std::string::npos && pattern.find("::") != colon) {
        if (!symbols::names::object_matches(pattern.substr(0, colon), object_path)) return 0;
        glob = pattern.substr(colon + 1);
    }
    std::string err;
    auto elf = symbols::ElfObject::load(path, true, &err);
    if (!elf) return 0;  // not ELF (a data file mapped in)
    // Named as trace names it: a library by its soname (the loader's name for it), a program
    // by its file's base name.
    const std::string soname = elf->soname();
    const std::string object = soname.empty() ? std::string(symbols::names::base_name(object_path)) : soname;
    std::unique_ptr<symbols::DwarfReader> dwarf;
    if (params) dwarf = symbols::DwarfReader::open(path, &err);
    std::map<std::string, std::string> names;  // shown name, and its parameters
    for (const symbols::Symbol &s : elf->symbols()) {
        if ((s.type != STT_FUNC && s.type != STT_GNU_IFUNC) || s.value == 0 || s.hidden_version) continue;
        const std::string name = s.name.substr(0, s.name.find('@'));
        std::string demangled = symbols::names::demangle(name.c_str());
        if (demangled.empty()) demangled = name;
        if (fnmatch(glob.c_str(), name.c_str(), 0) != 0 && fnmatch(glob.c_str(), demangled.c_str(), 0) != 0) continue;
        auto [it, added] = names.emplace(demangle ? demangled : name, std::string());
        if (added && params) it->second = params_text(dwarf.get(), s.value);
    }
    for (const auto &[n, p] : names) std::printf("%s:%s%s\n", object.c_str(), n.c_str(), p.c_str());
    return names.size();
}

int show_lines(const std::string &func, const std::vector<SourceObject> &objects)
{
    std::string error;
    if (print_source_lines(func, objects, &error) == 0) {
        complain("list --lines: " + error);
        return kExitFailure;
    }
    return 0;
}

}  // namespace

Runner add_list(CLI::App &app)
{
    auto *cmd = app.add_subcommand("list", "List the functions that can be probed (OBJECT:NAME), of a process or a file");
    auto pid = std::make_shared<int>(0);
    auto file = std::make_shared<std::string>();
    auto pattern = std::make_shared<std::string>("*");
    auto demangle = std::make_shared<bool>(false);
    auto params = std::make_shared<bool>(false);
    auto lines = std::make_shared<std::string>();
    auto *p_opt = cmd->add_option("-p,--pid", *pid, "The process");
    auto *x_opt = cmd->add_option("-x,--exec", *file, "An executable or library on disk, not running");
    p_opt->excludes(x_opt);
    cmd->add_option("pattern", *pattern,
                    "A glob on the function's name, mangled or demangled, or OBJECT:GLOB as trace takes it; '*' by "
                    "default");
    cmd->add_flag("-d,--demangle", *demangle, "Show C++ names demangled");
    cmd->add_flag("--params", *params, "Show each function's parameters and return type, from its DWARF");
    auto *lines_opt = cmd->add_option("--lines", *lines,
                                      "The source lines of FUNC that can be probed (SRCFILE:LINE, FUNC:RELLINE), and "
                                      "the variables readable at each");
    lines_opt->excludes(cmd->get_option("pattern"));
    return [pid, file, pattern, demangle, params, lines, p_opt, x_opt, lines_opt] {
        if (p_opt->count() == 0 && x_opt->count() == 0) {
            complain("list: name a process (-p PID) or a file (-x FILE)");
            return kExitUsage;
        }
        if (x_opt->count()) {
            if (access(file->c_str(), R_OK) != 0) {
                complain(fmt::format("list: cannot read {}: {}", *file, std::strerror(errno)));
                return kExitFailure;
            }
            std::string err;
            if (!symbols::ElfObject::load(*file, true, &err)) {
                complain(fmt::format("list: {} is not an ELF executable or library", *file));
                return kExitFailure;
            }
            if (lines_opt->count()) return show_lines(*lines, {{*file, *file}});
            if (list_object(*file, *file, *pattern, *demangle, *params) == 0) {
                complain(fmt::format("no function of {} matches '{}'", *file, *pattern));
                return kExitFailure;
            }
            return 0;
        }
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
        if (lines_opt->count()) {
            std::vector<SourceObject> objects;
            for (const LoadedObject &o : loaded_objects(*pid)) objects.push_back({path_in(*pid, o.path), o.path});
            return show_lines(*lines, objects);
        }
        size_t shown = 0;
        for (const LoadedObject &o : loaded_objects(*pid))
            shown += list_object(o.path, path_in(*pid, o.path), *pattern, *demangle, *params);
        if (shown == 0) {
            complain(fmt::format("no function of process {} matches '{}'", *pid, *pattern));
            return kExitFailure;
        }
        return 0;
    };
}

}  // namespace liveprobe::tool
