// The tool's man pages and its shell completion's word lists, made from the CLI11 definitions
// the tool parses with: the same descriptions, type names and footers `--help` prints, so the
// pages cannot drift from the tool (docs/man-and-completion.md).
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace liveprobe::tool {

// The tool's hidden requests, answered before anything is parsed:
//   liveprobe --man-pages DIR    writes DIR/liveprobe.1 and DIR/liveprobe-COMMAND.1 for each command
//   liveprobe --man-page [CMD]   one of them on stdout
//   liveprobe --completion       the commands and their options, a line each, for the completion
// `program_commands` are the commands that take "-- CMD [ARGS]" after their own arguments.
// Returns the exit status, or -1 when argv is none of these (the tool then parses it).
int documentation_request(const CLI::App &app, const std::vector<std::string> &program_commands, int argc,
                          char **argv);

// The man(7) page of `cmd`, the app itself or one of its sub-commands.
void write_man_page(std::ostream &out, const CLI::App &app, const CLI::App &cmd,
                    const std::vector<std::string> &program_commands);

// For the completion (tools/completion/liveprobe.bash), tab-separated:
//   command     NAME     [program]            program: takes "-- CMD [ARGS]"
//   option      COMMAND  NAMES  [VALUE]       NAMES: "-p --pid"; VALUE: its type name as --help
//                                             shows it ("TEXT:FILE"), none for a flag
//   positional  COMMAND  NAME   VALUE  [many] many: it takes several words
// COMMAND is empty for the options that come before the command.
void write_completion_words(std::ostream &out, const CLI::App &app, const std::vector<std::string> &program_commands);

}  // namespace liveprobe::tool
