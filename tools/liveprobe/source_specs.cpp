#include "source_specs.hpp"

#include <elf.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <memory>
#include <sstream>

#include <fmt/format.h>

#include "commands.hpp"
#include "process.hpp"
#include "program_check.hpp"
#include "symbols/dwarf_lines.hpp"
#include "trace/spec.hpp"
#include "symbols/elf_object.hpp"
#include "symbols/names.hpp"

namespace liveprobe::tool {
namespace {

struct Words {
    std::vector<std::string> w;
    size_t loc = 0;       // the location's word
    size_t loc_from = 0;  // where the location starts in it (after "p:")
};

Words split(const std::string &s)
{
    Words out;
    size_t i = 0;
    while (i < s.size()) {
        while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
        const size_t start = i;
        while (i < s.size() && !std::isspace(static_cast<unsigned char>(s[i]))) ++i;
        if (i > start) out.w.push_back(s.substr(start, i - start));
    }
    if (out.w.empty()) return out;
    const std::string &w0 = out.w[0];
    if (w0 == "p" && out.w.size() > 1) out.loc = 1;
    else if (w0.rfind("p:", 0) == 0 && w0.find('/') != std::string::npos && out.w.size() > 1 &&
             w0.find(':', 2) == std::string::npos)
        out.loc = 1;  // p:GRP/EVENT LOC
    else if (w0.rfind("p:", 0) == 0) out.loc_from = 2;
    return out;
}

// X:DIGITS, X not ending in ':' (a C++ name's "::").
bool split_line(const std::string &loc, std::string *x, int *line)
{
    const size_t colon = loc.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 >= loc.size() || loc[colon - 1] == ':' ||
        loc.find_first_not_of("0123456789", colon + 1) != std::string::npos || loc.size() - colon > 9)
        return false;
    *x = loc.substr(0, colon);
    *line = std::stoi(loc.substr(colon + 1));
    return true;
}

struct Opened {
    const SourceObject *object;
    std::unique_ptr<symbols::ElfObject> elf;
    std::unique_ptr<symbols::DwarfReader> dwarf;
};

std::vector<Opened> open_all(const std::vector<SourceObject> &objects, std::string *no_dwarf)
{
    std::vector<Opened> out;
    for (const SourceObject &o : objects) {
        std::string why;
        Opened x{&o, symbols::ElfObject::load(o.read_path, true, &why), symbols::DwarfReader::open(o.read_path, &why)};
        if (!x.dwarf && no_dwarf->empty()) *no_dwarf = why;
        if (x.elf && x.dwarf) out.push_back(std::move(x));
    }
    return out;
}

// The file addresses of the functions a name names in one object: a symbol's name, its
// demangled form, or OBJECT:NAME.
std::vector<uint64_t> entries_of(Opened &o, const std::string &func)
{
    std::string name = func;
    if (const size_t colon = func.find(':'); colon != std::string::npos && func.find("::") != colon) {
        const std::string soname = o.elf->soname();
        if (!symbols::names::object_matches(func.substr(0, colon), o.object->path) &&
            (soname.empty() || !symbols::names::object_matches(func.substr(0, colon), soname)))
            return {};
        name = func.substr(colon + 1);
    }
    std::vector<uint64_t> out;
    auto add = [&](uint32_t i) {
        const symbols::Symbol &s = o.elf->symbols()[i];
        if ((s.type == STT_FUNC || s.type == STT_GNU_IFUNC) && s.value &&
            std::find(out.begin(), out.end(), s.value) == out.end())
            out.push_back(s.value);
    };
    if (const auto *idx = o.elf->by_name(name))
        for (uint32_t i : *idx) add(i);
    if (out.empty())
        for (uint32_t i : o.elf->by_demangled(symbols::names::normalize(name))) add(i);
    return out;
}

// An object as trace names it: a library by its soname (the loader's name: libjq.so.1 for the
// file libjq.so.1.0.4), a program by its file's base name.
std::string object_name(const Opened &o)
{
    const std::string soname = o.elf->soname();
    return soname.empty() ? std::string(symbols::names::base_name(o.object->path)) : soname;
}

// The location text of a file address: OBJECT:NAME+0xOFF.
bool location_of(Opened &o, uint64_t addr, std::string *loc)
{
    const symbols::Symbol *s = o.elf->function_containing(addr);
    if (!s) return false;
    *loc = fmt::format("{}:{}+{:#x}", object_name(o), s->name.substr(0, s->name.find('@')), addr - s->value);
    return true;
}

// The fetch args of a source-line spec with each variable by name (NAME[:TYPE], NAME=VAR[:TYPE],
// and inside a load: +8(VAR)) put where it is at addr; others as they are.
bool resolve_variables(Opened &o, uint64_t addr, const Words &words, size_t first, std::vector<std::string> *args,
                       std::string *error)
{
    std::vector<symbols::SourceVariable> vars;
    bool looked = false;
    // Where a variable is there, as a fetch typed :{DESC}: "" with *error when it is not there.
    auto where = [&](const std::string &var) -> std::string {
        if (!looked) vars = o.dwarf->variables_at(addr), looked = true;
        for (const auto &x : vars) {
            if (x.name != var) continue;
            if (x.fetch.empty()) *error = fmt::format("variable '{}' ({}) cannot be read there: {}", var, x.type, x.why);
            return x.fetch;
        }
        std::string names;
        for (const auto &x : vars) names += (names.empty() ? "" : ", ") + x.name;
        *error = fmt::format("no variable '{}' there (in scope: {})", var, names.empty() ? "none" : names);
        return {};
    };
    const auto is_ident = [](const std::string &v) {
        bool ident = !v.empty() && (std::isalpha(static_cast<unsigned char>(v[0])) || v[0] == '_');
        for (char c : v) ident = ident && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
        return ident;
    };
    for (size_t i = first; i < words.w.size(); ++i) {
        std::string w = words.w[i], name, var = w, type;
        if (const size_t eq = w.find('='); eq != std::string::npos) name = w.substr(0, eq), var = w.substr(eq + 1);
        if (const size_t colon = var.find(':'); colon != std::string::npos) type = var.substr(colon + 1), var.resize(colon);
        if (is_ident(var)) {
            std::string fetch = where(var);
            if (fetch.empty()) return false;
            if (!type.empty()) fetch = fetch.substr(0, fetch.rfind(":{")) + ":" + type;
            args->push_back(fmt::format("{}={}", name.empty() ? var : name, fetch));
            continue;
        }
        // A load through a variable, +OFF(VAR): its value, untyped, in the variable's place.
        for (size_t open = w.find('('); open != std::string::npos; open = w.find('(', open + 1)) {
            const size_t close = w.find(')', open);
            if (close == std::string::npos || !is_ident(w.substr(open + 1, close - open - 1))) continue;
            std::string fetch = where(w.substr(open + 1, close - open - 1));
            if (fetch.empty()) return false;
            fetch = fetch.substr(0, fetch.rfind(":{"));
            w.replace(open + 1, close - open - 1, fetch);
        }
        args->push_back(w);
    }
    return true;
}

// The addresses a source location X:LINE stands for: X a source file (a line of it), else a
// function (LINE counted from its declaration's line).
std::vector<std::pair<Opened *, symbols::SourceLine>> addresses(std::vector<Opened> &objs, const std::string &x, int line,
                                                               bool *is_file)
{
    std::vector<std::pair<Opened *, symbols::SourceLine>> out;
    *is_file = false;
    for (Opened &o : objs)
        if (o.dwarf->has_source(x)) {
            *is_file = true;
            for (auto &l : o.dwarf->line_addresses(x, line)) out.emplace_back(&o, l);
        }
    if (*is_file) return out;
    for (Opened &o : objs)
        for (uint64_t entry : entries_of(o, x)) {
            symbols::SourceFunction f;
            if (!o.dwarf->function_at(entry, &f)) continue;
            for (auto &l : o.dwarf->lines(f))
                if (l.line == f.decl_line + line) out.emplace_back(&o, l);
        }
    return out;
}

}  // namespace

std::vector<SourceObject> program_objects(const std::string &exe)
{
    std::vector<SourceObject> out{{exe, exe}};
    // What its loader will map, as ldd asks it (LD_LIBRARY_PATH as the program will have it):
    // "\tlibjq.so.1 => /path/libjq.so.1 (0x...)", "\t/lib64/ld-linux-x86-64.so.2 (0x...)".
    int pipefd[2];
    if (pipe2(pipefd, O_CLOEXEC) != 0) return out;
    const pid_t child = fork();
    if (child == 0) {
        dup2(pipefd[1], 1);
        const int null = open("/dev/null", O_WRONLY);
        if (null >= 0) dup2(null, 2);
        execlp("ldd", "ldd", exe.c_str(), static_cast<char *>(nullptr));
        _exit(127);
    }
    close(pipefd[1]);
    std::string text;
    char buf[4096];
    for (ssize_t n; child > 0 && (n = read(pipefd[0], buf, sizeof buf)) > 0;) text.append(buf, static_cast<size_t>(n));
    close(pipefd[0]);
    if (child > 0) waitpid(child, nullptr, 0);
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
        const size_t arrow = line.find("=> ");
        const size_t from = arrow == std::string::npos ? line.find_first_not_of(" \t") : arrow + 3;
        const size_t to = line.find(" (0x", from);
        if (from == std::string::npos || to == std::string::npos || line[from] != '/') continue;
        const std::string path = line.substr(from, to - from);
        out.push_back({path, path});
    }
    return out;
}

bool is_source_spec(const std::string &spec)
{
    Words words = split(spec);
    if (words.w.empty() || (words.w[0][0] == 'r' && (words.w[0].size() == 1 || words.w[0][1] == ':' || std::isdigit(static_cast<unsigned char>(words.w[0][1])))))
        return false;
    std::string x;
    int line = 0;
    return split_line(words.w[words.loc].substr(words.loc_from), &x, &line);
}

bool resolve_source_spec(const std::string &spec, const std::vector<SourceObject> &objects, std::vector<std::string> *out,
                         std::vector<std::string> *notes, std::string *error)
{
    Words words = split(spec);
    const std::string loc = words.w[words.loc].substr(words.loc_from);
    std::string x;
    int line = 0;
    split_line(loc, &x, &line);
    std::string no_dwarf;
    std::vector<Opened> objs = open_all(objects, &no_dwarf);
    if (objs.empty()) {
        *error = fmt::format("{}: a source line needs DWARF: {}", loc, no_dwarf.empty() ? "no object to look in" : no_dwarf);
        return false;
    }
    bool is_file = false;
    const auto found = addresses(objs, x, line, &is_file);
    if (found.empty()) {
        *error = is_file ? fmt::format("{}: no code starts at line {} of {} (liveprobe list --lines FUNC shows the lines "
                                       "that can be probed)",
                                       loc, line, x)
                         : fmt::format("{}: no source file {} with DWARF, nor a function {} with a line {} (FUNC:RELLINE "
                                       "counts lines from the function's declaration, its line 0)",
                                       loc, x, x, line);
        return false;
    }
    for (const auto &[o, l] : found) {
        std::string where;
        if (!location_of(*o, l.addr, &where)) continue;
        std::vector<std::string> args;
        if (!resolve_variables(*o, l.addr, words, words.loc + 1, &args, error)) {
            *error = fmt::format("{}: {}", loc, *error);
            return false;
        }
        std::string head = words.loc == 1 ? words.w[0] + " " : "p:";
        std::string text = head + where;
        for (const std::string &a : args) text += " " + a;
        out->push_back(text);
        notes->push_back(fmt::format("{} is {} ({}:{})", loc, where, symbols::names::base_name(l.file), l.line));
    }
    if (out->empty()) *error = fmt::format("{}: its code is in no function the symbol table names", loc);
    return !out->empty();
}

size_t print_source_lines(const std::string &func, const std::vector<SourceObject> &objects, std::string *error)
{
    std::string no_dwarf;
    std::vector<Opened> objs = open_all(objects, &no_dwarf);
    size_t shown = 0;
    for (Opened &o : objs)
        for (uint64_t entry : entries_of(o, func)) {
            symbols::SourceFunction f;
            std::string loc;
            if (!o.dwarf->function_at(entry, &f) || !location_of(o, entry, &loc)) continue;
            const std::string mangled = loc.substr(loc.find(':') + 1, loc.rfind('+') - loc.find(':') - 1);
            const std::string name = symbols::names::demangle(mangled.c_str());
            std::printf("%s%s:%s at %s:%d\n", shown ? "\n" : "", object_name(o).c_str(),
                        (name.empty() ? mangled : name).c_str(), f.decl_file.c_str(), f.decl_line);
            for (const auto &l : o.dwarf->lines(f)) {
                std::string at, vars;
                location_of(o, l.addr, &at);
                for (const auto &v : o.dwarf->variables_at(l.addr))
                    if (!v.fetch.empty()) vars += " " + v.name;
                std::printf("%6d  %-28s %-28s%s%s\n", l.line - f.decl_line,
                            fmt::format("{}:{}", symbols::names::base_name(l.file), l.line).c_str(),
                            at.substr(at.find(':') + 1).c_str(), vars.empty() ? "" : "  vars:", vars.c_str());
            }
            ++shown;
        }
    if (shown == 0)
        *error = objs.empty() ? fmt::format("no DWARF to list lines from: {}", no_dwarf)
                              : fmt::format("no function named '{}' with DWARF", func);
    return shown;
}

void raw_calls(std::vector<std::string> &specs)
{
    for (std::string &text : specs) {
        trace::Spec spec;
        std::string error;
        size_t at = 0;
        if (trace::parse_spec(text, &spec, &error, &at) && spec.kind == trace::SpecKind::call && spec.args.empty())
            text += " $retval:raw";
    }
}

bool resolve_source_specs(std::vector<std::string> &specs, int pid, const std::vector<std::string> &command)
{
    if (std::none_of(specs.begin(), specs.end(), is_source_spec)) return true;
    std::vector<SourceObject> objects;
    if (pid != 0) {
        for (const LoadedObject &o : loaded_objects(pid)) objects.push_back({path_in(pid, o.path), o.path});
    } else if (const std::string exe = resolve_command(command.empty() ? std::string() : command[0]); !exe.empty()) {
        objects = program_objects(exe);
    }
    std::vector<std::string> out;
    for (const std::string &text : specs) {
        std::vector<std::string> notes;
        std::string error;
        if (!is_source_spec(text)) {
            out.push_back(text);
        } else if (!resolve_source_spec(text, objects, &out, &notes, &error)) {
            complain("trace: " + error);
            return false;
        }
        for (const std::string &n : notes) std::fprintf(stderr, "liveprobe: %s\n", n.c_str());
    }
    specs = std::move(out);
    return true;
}

}  // namespace liveprobe::tool
