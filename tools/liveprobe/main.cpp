// liveprobe: the command-line tool. One file per sub-command (cmd_*.cpp).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "commands.hpp"
#include "man_page.hpp"

namespace liveprobe::tool {
void complain(const std::string &message) { std::fprintf(stderr, "liveprobe: %s\n", message.c_str()); }
std::vector<std::string> &insmod_command()
{
    static std::vector<std::string> words;
    return words;
}
}  // namespace liveprobe::tool

int main(int argc, char **argv)
{
    using namespace liveprobe::tool;
    CLI::App app{"liveprobe: dynamic probes for running user-space programs (kprobes for user space)"};
    app.require_subcommand(1);
    app.set_version_flag("--version", std::string("liveprobe ") + LIVEPROBE_VERSION);
    // A service's options in a file (trace --serve's unit, docs/metrics.md): TOML, a command's in
    // its section ([trace] serve = "127.0.0.1:9464", specs = ["f", "g"]).
    app.set_config("--config", "", "Read the command's options from FILE ([trace] then NAME = VALUE lines)")
        ->type_name("FILE");
    app.allow_config_extras(false);  // a misspelt option in a service's file is an error, not ignored
    app.footer("Exit status: 0 success, 1 failure (the message says why), 2 bad usage; `run` exits with the "
               "program's status.\nRun `liveprobe COMMAND --help` for a command's options.\n"
               "Environment:\n"
               "  LIVEPROBE_RUNTIME_DIR  where agents make their sockets (/tmp/liveprobe-UID by default, private):\n"
               "    the tool's must be its target's\n"
               "  LIVEPROBE_LIBRARY  the agent loaded into processes (by default the libliveprobe.so installed\n"
               "    beside the tool)\n"
               "  LIVEPROBE_OPTIMIZE=0  (in the target) every probe a breakpoint, no jump\n"
               "  LIVEPROBE_CLOCK=clock_gettime  (in the target) events timed by clock_gettime, not the TSC\n"
               "  LIVEPROBE_TRACE_ATTACH=1  the time each step of attaching took, on stderr\n"
               "  CC  the compiler build-module runs (cc by default)");
    Runner run = add_run(app);
    Runner attach = add_attach(app);
    Runner status = add_status(app);
    Runner list = add_list(app);
    Runner dmesg = add_dmesg(app);
    Runner insmod = add_insmod(app);
    Runner rmmod = add_rmmod(app);
    Runner detach = add_detach(app);
    Runner lsmod = add_lsmod(app);
    Runner build_module = add_build_module(app);
    Runner trace = add_trace(app);
    Runner report = add_report(app);
    Runner replay = add_replay(app);
    Runner graph = add_graph(app);
    // The commands whose "-- CMD [ARGS]" is split off below (their man pages show it).
    const std::vector<std::string> program_commands{"insmod", "trace"};
    // Hidden: the man pages and the completion's word lists, from the definitions above.
    if (const int status = documentation_request(app, program_commands, argc, argv); status >= 0) return status;
    // The first word that is not an option names the command: an unknown one is said so (CLI11
    // would print the general help for `liveprobe foo --help`, or "A subcommand is required").
    const auto option_value = [&](int i) { return std::string(argv[i - 1]) == "--config"; };  // --config FILE
    for (int i = 1; i < argc; ++i) {
        if (argv[i][0] == '-' || option_value(i)) continue;
        std::string names;
        bool known = false;
        for (const CLI::App *sub : app.get_subcommands({})) {
            known |= sub->get_name() == argv[i];
            names += (names.empty() ? "" : ", ") + sub->get_name();
        }
        if (!known) {
            complain(std::string("unknown command '") + argv[i] + "' (the commands: " + names + ")");
            return kExitUsage;
        }
        break;
    }
    // insmod's module parameters (trace's specs) and the program after "--" are both free words:
    // the program is split off here (CLI11 would take it for more of them).
    for (int i = 1; i < argc; ++i) {
        if (argv[i][0] == '-' || option_value(i)) continue;  // options before the sub-command
        if (std::find(program_commands.begin(), program_commands.end(), argv[i]) == program_commands.end()) break;
        for (int j = i + 1; j < argc; ++j)
            if (std::string(argv[j]) == "--") {
                insmod_command().assign(argv + j + 1, argv + argc);
                argc = j;
                break;
            }
        break;
    }
    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp &e) {
        return app.exit(e);
    } catch (const CLI::CallForAllHelp &e) {
        return app.exit(e);
    } catch (const CLI::CallForVersion &e) {
        return app.exit(e);
    } catch (const CLI::ConfigError &e) {  // CLI11 says "INI was not able to parse trace.cuont"
        std::string key = e.what();
        key = key.substr(key.rfind(' ') + 1);
        if (key.find_first_of("\"',[]") != std::string::npos) {
            complain("--config: a line that is no NAME = VALUE ('" + key + "'): an array across lines? Write it on " +
                     "one line (specs = [\"f\", \"g\"]), or specs = \"f\" a line each");
            return kExitUsage;
        }
        complain("--config: '" + key + "' is no option of the command: a file holds a command's options by their long " +
                 "names (follow-name, serve, count, specs, ...) in the command's section ([trace])");
        return kExitUsage;
    } catch (const CLI::ParseError &e) {
        app.exit(e);
        return kExitUsage;
    }
    if (app.got_subcommand("run")) return run();
    if (app.got_subcommand("attach")) return attach();
    if (app.got_subcommand("status")) return status();
    if (app.got_subcommand("list")) return list();
    if (app.got_subcommand("dmesg")) return dmesg();
    if (app.got_subcommand("insmod")) return insmod();
    if (app.got_subcommand("rmmod")) return rmmod();
    if (app.got_subcommand("detach")) return detach();
    if (app.got_subcommand("lsmod")) return lsmod();
    if (app.got_subcommand("build-module")) return build_module();
    if (app.got_subcommand("trace")) return trace();
    if (app.got_subcommand("report")) return report();
    if (app.got_subcommand("replay")) return replay();
    if (app.got_subcommand("graph")) return graph();
    return kExitUsage;
}
