// Man pages from the CLI11 definitions: each page is the text `--help` prints, laid out in man(7)
// macros. The footers are free text with a light structure, which becomes the page's sections:
//
//   Label: text          a line at column 0 whose label names a man section (Example(s), Exit
//                        status, Environment, Files) starts that section; the text is its first
//                        paragraph or example
//   Heading:             any other line at column 0 ending with ':' starts a subsection of the
//                        DESCRIPTION; the indented lines under it are its items
//   TERM  text           an item whose term is followed by two spaces (or "TERM: text", a short
//                        term) is a tagged paragraph, others an indented one
//   text at column 0     a paragraph of the DESCRIPTION; indented lines right under it continue it
//
// Lines indented deeper than an item's first continue the item. Nothing here names a command's
// options or sections: a new option or footer line shows in the page at the next build.
#include "man_page.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cctype>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string_view>

#include "commands.hpp"

namespace liveprobe::tool {

namespace {

// Roff's special characters in text. '-' is a minus (\-), as an option's dash must be to be
// searched and pasted; quotes and backquotes are the ASCII ones (\(aq, \(ga), not typographic
// ones, so that shell words in the text can be pasted.
std::string escape(std::string_view s)
{
    std::string out;
    for (char c : s) switch (c) {
        case '\\': out += "\\e"; break;
        case '-': out += "\\-"; break;
        case '\'': out += "\\(aq"; break;
        case '`': out += "\\(ga"; break;
        default: out += c;
        }
    return out;
}

// Runs of spaces as one: in filled text roff keeps each space given.
std::string squeeze(std::string_view s)
{
    std::string out;
    for (char c : s)
        if (c != ' ' || (!out.empty() && out.back() != ' ')) out += c;
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out;
}

// Prose: the help's `quoted commands` in bold, the rest escaped.
std::string prose(std::string_view s)
{
    const std::string text = squeeze(s);
    std::string_view t = text;
    std::string out;
    while (!t.empty()) {
        const size_t open = t.find('`');
        const size_t close = open == std::string_view::npos ? open : t.find('`', open + 1);
        if (close == std::string_view::npos) {
            out += escape(t);
            break;
        }
        out += escape(t.substr(0, open)) + "\\fB" + escape(t.substr(open + 1, close - open - 1)) + "\\fR";
        t.remove_prefix(close + 1);
    }
    return out;
}

// A macro's quoted argument.
std::string argument(std::string_view s)
{
    std::string out = "\"";
    for (char c : escape(s)) out += c == '"' ? std::string("\\(dq") : std::string(1, c);
    return out + '"';
}

// A text line: one starting with '.' or '\'' would be taken for a request.
void text_line(std::ostream &out, const std::string &roff)
{
    if (roff.empty()) return;  // a blank line is a blank line on the page
    if (roff[0] == '.' || roff[0] == '\'') out << "\\&";
    out << roff << '\n';
}

std::string trim(std::string_view s)
{
    const size_t b = s.find_first_not_of(' ');
    if (b == std::string_view::npos) return {};
    return std::string(s.substr(b, s.find_last_not_of(' ') - b + 1));
}

std::string lower(std::string s)
{
    for (char &c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

struct Element {
    enum Kind { kParagraph, kHeading, kItem } kind;
    std::string text;
};

struct Footer {
    std::vector<Element> body;                              // the DESCRIPTION's
    std::map<std::string, std::vector<Element>> sections;  // "EXAMPLES", "EXIT STATUS", ...
};

// The man section a footer label names, or "".
std::string section_of(const std::string &label)
{
    const std::string l = lower(label);
    if (l == "example" || l == "examples") return "EXAMPLES";
    if (l == "exit status") return "EXIT STATUS";
    if (l == "environment") return "ENVIRONMENT";
    if (l == "files") return "FILES";
    return {};
}

Footer parse_footer(const std::string &text)
{
    Footer f;
    std::vector<Element> *into = &f.body;
    bool paragraph = false;  // a paragraph at column 0, which indented lines continue
    size_t item_indent = 0;  // the indent of the items under a heading (0: none yet)
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
        const std::string t = trim(line);
        if (t.empty()) {
            paragraph = false;
            continue;
        }
        const size_t indent = line.find_first_not_of(' ');
        if (indent == 0) {
            paragraph = false;
            item_indent = 0;
            size_t colon = t.find(": ");
            if (colon == std::string::npos && t.back() == ':') colon = t.size() - 1;
            if (colon != std::string::npos) {
                if (const std::string sec = section_of(t.substr(0, colon)); !sec.empty()) {
                    into = &f.sections[sec];
                    if (const std::string rest = trim(std::string_view(t).substr(colon + 1)); !rest.empty())
                        into->push_back({Element::kParagraph, rest});
                    continue;
                }
            }
            into = &f.body;
            if (t.back() == ':') {
                into->push_back({Element::kHeading, t.substr(0, t.size() - 1)});
            } else {
                into->push_back({Element::kParagraph, t});
                paragraph = true;
            }
            continue;
        }
        if (paragraph || (item_indent != 0 && indent > item_indent && !into->empty())) {
            into->back().text += ' ' + t;
            continue;
        }
        if (item_indent == 0) item_indent = indent;
        into->push_back({Element::kItem, t});
    }
    return f;
}

// An item's term and text: "TERM  text", or "TERM: text" with a short term ("-p PID: ...").
std::pair<std::string, std::string> split_item(const std::string &item)
{
    if (const size_t gap = item.find("  "); gap != std::string::npos) return {item.substr(0, gap), trim(item.substr(gap))};
    if (const size_t colon = item.find(": ");
        colon != std::string::npos && colon <= 16 && item[0] != '(' && item.find('`') > colon)
        return {item.substr(0, colon + 1), item.substr(colon + 2)};  // the colon kept: "-p PID: text"
    return {{}, item};
}

// An example, and what it shows after it: "CMD   (comment)".
void write_example(std::ostream &out, const std::string &text)
{
    std::string cmd = text, comment;
    if (const size_t gap = cmd.find("  ("); gap != std::string::npos) {
        comment = trim(cmd.substr(gap));
        cmd = cmd.substr(0, gap);
    }
    out << ".PP\n";
    text_line(out, "\\fB" + escape(squeeze(cmd)) + "\\fR");
    if (!comment.empty()) text_line(out, prose(comment));
}

void write_elements(std::ostream &out, const std::vector<Element> &elements, bool examples)
{
    bool list = false;  // in a run of items
    for (const Element &e : elements) {
        if (examples) {
            write_example(out, e.text);
            continue;
        }
        switch (e.kind) {
        case Element::kHeading:
            out << ".SS " << argument(e.text) << '\n';
            list = false;
            break;
        case Element::kParagraph:
            out << ".PP\n";
            text_line(out, prose(e.text));
            list = false;
            break;
        case Element::kItem:
            const auto [term, text] = split_item(e.text);
            if (term.empty()) {
                out << (list ? ".IP\n" : ".IP \"\" 4\n");
            } else {
                out << ".TP\n";
                text_line(out, "\\fB" + escape(squeeze(term)) + "\\fR");
                list = true;
            }
            text_line(out, prose(text));
            break;
        }
    }
}

const CLI::App *find_command(const CLI::App &app, const std::string &name)
{
    for (const CLI::App *sub : app.get_subcommands({}))
        if (sub->get_name() == name) return sub;
    return nullptr;
}

bool takes_program(const CLI::App &cmd, const std::vector<std::string> &program_commands)
{
    for (const std::string &c : program_commands)
        if (c == cmd.get_name()) return true;
    return false;
}

bool is_vector(const CLI::Option *opt) { return opt->get_expected_max() >= CLI::detail::expected_max_vector_size; }

// An option's value as --help names it: the type name, without its validators' descriptions
// ("UINT" of "UINT:INT in [1 - 64]").
std::string value_name(const CLI::Option *opt)
{
    if (opt->get_type_size() == 0) return {};
    const std::string t = opt->get_type_name();
    return t.substr(0, t.find(':'));
}

// The rest of what --help says of an option after its description: its validators, default,
// whether it is required, the options it needs or excludes.
std::string option_notes(const CLI::Option *opt)
{
    std::string notes;
    const std::string t = opt->get_type_size() == 0 ? std::string() : opt->get_type_name();
    if (const size_t colon = t.find(':'); colon != std::string::npos) notes += " Value: " + t.substr(colon + 1) + '.';
    if (!opt->get_default_str().empty()) notes += " Default: " + opt->get_default_str() + '.';
    if (opt->get_required() && !opt->get_positional()) notes += " Required.";
    auto names = [](const std::set<CLI::Option *> &opts) {
        std::set<std::string> sorted;
        for (const CLI::Option *o : opts) sorted.insert(o->get_name());
        std::string s;
        for (const std::string &n : sorted) s += (s.empty() ? "" : ", ") + n;
        return s;
    };
    if (!opt->get_needs().empty()) notes += " Needs " + names(opt->get_needs()) + '.';
    if (!opt->get_excludes().empty()) notes += " Not with " + names(opt->get_excludes()) + '.';
    return notes;
}

std::string ending(std::string s)
{
    if (!s.empty() && s.back() != '.' && s.back() != '!' && s.back() != '?') s += '.';
    return s;
}

void write_options(std::ostream &out, const CLI::App &cmd)
{
    // Hidden options (an empty group) stay hidden; each group of --help a subsection.
    std::vector<std::string> groups;
    for (const CLI::Option *opt : cmd.get_options())
        if (!opt->get_positional() && !opt->get_group().empty() &&
            std::find(groups.begin(), groups.end(), opt->get_group()) == groups.end())
            groups.push_back(opt->get_group());
    if (groups.empty()) return;
    out << ".SH OPTIONS\n";
    for (const std::string &group : groups) {
        if (groups.size() > 1) out << ".SS " << argument(group) << '\n';
        for (const CLI::Option *opt : cmd.get_options()) {
            if (opt->get_positional() || opt->get_group() != group) continue;
            std::string tag;
            for (const std::string &s : opt->get_snames()) tag += (tag.empty() ? "" : ", ") + ("\\fB\\-" + escape(s) + "\\fR");
            for (const std::string &l : opt->get_lnames())
                tag += (tag.empty() ? "" : ", ") + ("\\fB\\-\\-" + escape(l) + "\\fR");
            if (const std::string v = value_name(opt); !v.empty())
                tag += " \\fI" + escape(v) + "\\fR" + (is_vector(opt) ? "..." : "");
            out << ".TP\n";
            text_line(out, tag);
            text_line(out, prose(ending(opt->get_description()) + option_notes(opt)));
        }
    }
    std::vector<const CLI::Option *> positionals = cmd.get_options([](const CLI::Option *o) { return o->get_positional(); });
    if (positionals.empty()) return;
    out << ".SH ARGUMENTS\n";
    for (const CLI::Option *opt : positionals) {
        out << ".TP\n";
        text_line(out, "\\fI" + escape(opt->get_name(true, false)) + "\\fR" + (is_vector(opt) ? "..." : ""));
        text_line(out, prose(ending(opt->get_description()) + option_notes(opt)));
    }
}

std::string synopsis(const CLI::App &cmd, const std::vector<std::string> &program_commands)
{
    std::string s = "\\fBliveprobe " + escape(cmd.get_name()) + "\\fR";
    // A required option by its first name (lsmod's "-p INT"), the others as [OPTIONS].
    for (const CLI::Option *opt : cmd.get_options([](const CLI::Option *o) { return o->nonpositional(); })) {
        if (!opt->get_required() || opt->get_group().empty()) continue;
        s += opt->get_snames().empty() ? " \\fB\\-\\-" + escape(opt->get_lnames().front()) + "\\fR"
                                       : " \\fB\\-" + escape(opt->get_snames().front()) + "\\fR";
        if (const std::string v = value_name(opt); !v.empty()) s += " \\fI" + escape(v) + "\\fR";
    }
    if (!cmd.get_options([](const CLI::Option *o) { return o->nonpositional(); }).empty()) s += " [\\fIOPTIONS\\fR]";
    for (const CLI::Option *opt : cmd.get_options([](const CLI::Option *o) { return o->get_positional(); })) {
        std::string word = "\\fI" + escape(opt->get_name(true, false)) + "\\fR" + (is_vector(opt) ? "..." : "");
        s += ' ' + (opt->get_required() ? word : '[' + word + ']');
    }
    if (takes_program(cmd, program_commands)) s += " [\\fB\\-\\-\\fR \\fICMD\\fR [\\fIARGS\\fR...]]";
    return s;
}

// "Trace functions ..." as NAME's line has it: "trace functions ...".
std::string whatis(std::string desc)
{
    if (desc.size() > 1 && std::isupper(static_cast<unsigned char>(desc[0])) &&
        std::islower(static_cast<unsigned char>(desc[1])))
        desc[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(desc[0])));
    return desc;
}

// The other commands a page's text names ("liveprobe detach -p PID"), for its SEE ALSO.
void commands_named(const std::string &text, const CLI::App &app, const CLI::App &cmd, std::set<std::string> *into)
{
    for (size_t at = text.find("liveprobe "); at != std::string::npos; at = text.find("liveprobe ", at + 1)) {
        const size_t b = at + 10, e = text.find_first_of(" `'.,;)\n", b);
        const std::string word = text.substr(b, e == std::string::npos ? e : e - b);
        if (word != cmd.get_name() && find_command(app, word)) into->insert(word);
    }
}

std::string page_name(const CLI::App &app, const CLI::App &cmd)
{
    return &cmd == &app ? std::string("liveprobe") : "liveprobe-" + cmd.get_name();
}

}  // namespace

void write_man_page(std::ostream &out, const CLI::App &app, const CLI::App &cmd,
                    const std::vector<std::string> &program_commands)
{
    const bool main_page = &cmd == &app;
    const std::string name = page_name(app, cmd);
    std::string upper = name;
    for (char &c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    const Footer footer = parse_footer(cmd.get_footer());
    const Footer main_footer = parse_footer(app.get_footer());

    out << ".\\\" Generated by `liveprobe --man-page" << (main_page ? "" : " " + cmd.get_name())
        << "` from its --help text: edit the tool's definitions, not this file.\n";
    out << ".TH " << argument(upper) << " 1 \"\" " << argument("liveprobe " LIVEPROBE_VERSION) << " \"User Commands\"\n";
    // Left-aligned and unhyphenated: much of the text is names and code, which must not be split.
    out << ".ad l\n.nh\n";

    // The app's description is "liveprobe: what it is".
    std::string desc = cmd.get_description();
    if (main_page && desc.rfind("liveprobe: ", 0) == 0) desc = desc.substr(11);
    out << ".SH NAME\n";
    text_line(out, escape(name) + " \\- " + escape(whatis(desc)));

    out << ".SH SYNOPSIS\n";
    if (main_page)
        text_line(out, "\\fBliveprobe\\fR [\\fIOPTIONS\\fR] \\fICOMMAND\\fR [\\fIARGS\\fR...]");
    else
        text_line(out, synopsis(cmd, program_commands));

    out << ".SH DESCRIPTION\n";
    if (main_page) {
        text_line(out, "\\fBliveprobe\\fR: " + prose(ending(desc)) +
                           " Each command has its page, \\fBliveprobe\\-\\fR\\fICOMMAND\\fR(1), made from the text of "
                           "\\fBliveprobe\\fR \\fICOMMAND\\fR \\fB\\-\\-help\\fR.");
    } else {
        text_line(out, prose(ending(desc)));
    }
    write_elements(out, footer.body, false);

    if (main_page) {
        out << ".SH COMMANDS\n";
        for (const CLI::App *sub : app.get_subcommands({})) {
            out << ".TP\n";
            text_line(out, "\\fB" + escape(sub->get_name()) + "\\fR");
            text_line(out, prose(ending(sub->get_description())));
        }
    }
    write_options(out, cmd);

    // Every command exits as the tool says it does.
    auto section = [&](const char *title, const Footer &from) {
        auto it = from.sections.find(title);
        if (it == from.sections.end()) return false;
        out << ".SH " << title << '\n';
        write_elements(out, it->second, std::string_view(title) == "EXAMPLES");
        return true;
    };
    if (!section("EXIT STATUS", footer)) section("EXIT STATUS", main_footer);
    section("ENVIRONMENT", footer);
    section("FILES", footer);
    section("EXAMPLES", footer);

    std::set<std::string> see;
    if (main_page) {
        for (const CLI::App *sub : app.get_subcommands({})) see.insert(sub->get_name());
    } else {
        std::string text = cmd.get_description() + '\n' + cmd.get_footer();
        for (const CLI::Option *opt : cmd.get_options()) text += '\n' + opt->get_description();
        commands_named(text, app, cmd, &see);
    }
    out << ".SH SEE ALSO\n";
    std::vector<std::string> pages;
    if (!main_page) pages.push_back("liveprobe");
    for (const std::string &s : see) pages.push_back("liveprobe-" + s);
    for (size_t i = 0; i < pages.size(); ++i)
        out << ".BR " << escape(pages[i]) << " (1)" << (i + 1 < pages.size() ? "," : "") << '\n';
}

void write_completion_words(std::ostream &out, const CLI::App &app, const std::vector<std::string> &program_commands)
{
    auto options = [&out](const CLI::App &cmd, const std::string &cmd_name) {
        for (const CLI::Option *opt : cmd.get_options()) {
            if (opt->get_group().empty()) continue;  // hidden
            // The whole type name: a validator's says more of the value ("TEXT:FILE").
            const std::string value = opt->get_type_size() == 0 ? std::string() : opt->get_type_name();
            if (opt->get_positional()) {
                out << "positional\t" << cmd_name << '\t' << opt->get_name(true, false) << '\t' << value << '\t'
                    << (is_vector(opt) ? "many" : "") << '\n';
                continue;
            }
            std::string names;
            for (const std::string &s : opt->get_snames()) names += (names.empty() ? "-" : " -") + s;
            for (const std::string &l : opt->get_lnames()) names += (names.empty() ? "--" : " --") + l;
            out << "option\t" << cmd_name << '\t' << names << '\t' << value << '\n';
        }
    };
    options(app, "");
    for (const CLI::App *sub : app.get_subcommands({})) {
        out << "command\t" << sub->get_name() << '\t' << (takes_program(*sub, program_commands) ? "program" : "")
            << '\n';
        options(*sub, sub->get_name());
    }
}

int documentation_request(const CLI::App &app, const std::vector<std::string> &program_commands, int argc,
                          char **argv)
{
    if (argc < 2) return -1;
    const std::string_view what = argv[1];
    if (what == "--completion" && argc == 2) {
        write_completion_words(std::cout, app, program_commands);
        return std::cout.flush() ? 0 : kExitFailure;
    }
    if (what == "--man-page" && argc <= 3) {
        const CLI::App *cmd = argc == 3 ? find_command(app, argv[2]) : &app;
        if (!cmd) {
            complain(std::string("--man-page: no command '") + argv[2] + "'");
            return kExitUsage;
        }
        write_man_page(std::cout, app, *cmd, program_commands);
        return std::cout.flush() ? 0 : kExitFailure;
    }
    if (what == "--man-pages" && argc == 3) {
        std::vector<const CLI::App *> cmds{&app};
        for (const CLI::App *sub : app.get_subcommands({})) cmds.push_back(sub);
        for (const CLI::App *cmd : cmds) {
            const std::string path = std::string(argv[2]) + '/' + page_name(app, *cmd) + ".1";
            std::ofstream f(path);
            write_man_page(f, app, *cmd, program_commands);
            if (!f.flush()) {
                complain("--man-pages: cannot write " + path);
                return kExitFailure;
            }
        }
        return 0;
    }
    return -1;
}

}  // namespace liveprobe::tool
