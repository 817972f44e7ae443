// Source lines as probe points, as `perf probe` takes them: SRCFILE:LINE and FUNC:RELLINE (a
// line counted from the function's first, its declaration's), bare or after p: (never r:), with
// variables fetched by name. The tool turns each into p:OBJECT:FUNC+OFF, and each variable by
// name into where the DWARF says it is at that address (`+OFF(%REG):{TYPE}`, `%REG:{TYPE}`),
// before the spec is parsed or sent: the agent sees only the forms it always read.
#pragma once

#include <string>
#include <vector>

namespace liveprobe::tool {

// An object file to look in: its path to read (through /proc/PID/root for a process), and the
// path the program knows it by (its base name names it in a spec).
struct SourceObject {
    std::string read_path;
    std::string path;
};

// A program's file and the libraries its loader will map (as ldd lists them), for a program
// the tool starts: a line of a library it links is found before it runs.
std::vector<SourceObject> program_objects(const std::string &exe);

// Whether the spec's location is a source line (X:DIGITS).
bool is_source_spec(const std::string &spec);

// The specs that one with a source location stands for (one per function the line is in), and
// a note per spec on what it became. False with *error when it cannot be resolved: no such
// line, no DWARF, a variable that is not there or has no location there.
bool resolve_source_spec(const std::string &spec, const std::vector<SourceObject> &objects, std::vector<std::string> *out,
                         std::vector<std::string> *notes, std::string *error);

// `liveprobe list --lines FUNC`: the lines of each function named FUNC (a name, demangled or
// mangled, or OBJECT:NAME) that can be probed, with the variables readable there. The number
// of functions shown; *error when none.
size_t print_source_lines(const std::string &func, const std::vector<SourceObject> &objects, std::string *error);

// Turns each spec at a source line (SRCFILE:LINE, FUNC:RELLINE) into the FUNC+OFF ones it
// stands for, looked up in process pid's objects, or in the program `command` starts and its
// libraries: false when one cannot be (said on stderr). Says what each became.
bool resolve_source_specs(std::vector<std::string> &specs, int pid, const std::vector<std::string> &command);

// --raw: each call (FUNC) without a value of its own asks for $retval:raw.
void raw_calls(std::vector<std::string> &specs);

}  // namespace liveprobe::tool
