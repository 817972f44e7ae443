#include "trace/spec.hpp"

#include <cctype>
#include <cstring>

#include <fmt/format.h>

#include "arch/x86_64/value_home.hpp"

namespace liveprobe::trace {
namespace {

struct Word {
    std::string text;
    size_t at;  // in the spec
};

std::vector<Word> split_words(const std::string &s)
{
    std::vector<Word> out;
    size_t i = 0;
    while (i < s.size()) {
        while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
        size_t start = i;
        while (i < s.size() && !std::isspace(static_cast<unsigned char>(s[i]))) ++i;
        if (i > start) out.push_back({s.substr(start, i - start), start});
    }
    return out;
}

// A whole decimal or 0x-hex number, optionally signed.
bool parse_number(const std::string &s, int64_t *v, bool allow_sign)
{
    if (s.empty()) return false;
    size_t i = 0;
    bool neg = false;
    if (allow_sign && (s[0] == '-' || s[0] == '+')) neg = s[i++] == '-';
    int base = 10;
    if (s.size() > i + 2 && s[i] == '0' && (s[i + 1] == 'x' || s[i + 1] == 'X')) base = 16, i += 2;
    if (i >= s.size()) return false;
    uint64_t r = 0;
    for (; i < s.size(); ++i) {
        int d = std::isdigit(static_cast<unsigned char>(s[i])) ? s[i] - '0'
                : base == 16 && std::isxdigit(static_cast<unsigned char>(s[i])) ? std::tolower(s[i]) - 'a' + 10
                                                                                 : -1;
        if (d < 0) return false;
        uint64_t next = r * static_cast<uint64_t>(base) + static_cast<uint64_t>(d);
        if (next / static_cast<uint64_t>(base) != r) return false;  // overflow
        r = next;
    }
    // Negated as unsigned (2^63 negated is itself, as a 64-bit address offset wraps).
    *v = static_cast<int64_t>(neg ? 0 - r : r);
    return true;
}

// struct pt_regs, 8 bytes a field, in its order.
const char *const kRegs[] = {"r15", "r14", "r13", "r12", "bp", "bx", "r11", "r10", "r9", "r8", "ax",
                             "cx",  "dx",  "si",  "di",  "orig_ax", "ip", "cs", "flags", "sp", "ss"};

int reg_index(std::string name)
{
    if (name == "eflags") name = "flags";
    if (name.size() == 3 && name[0] == 'r' && !std::isdigit(static_cast<unsigned char>(name[1]))) name.erase(0, 1);
    for (size_t i = 0; i < std::size(kRegs); ++i)
        if (name == kRegs[i] && name != "orig_ax") return static_cast<int>(i);
    return -1;
}

const char *const kTypes[] = {"u8", "u16", "u32", "u64", "s8", "s16", "s32", "s64",
                              "x8", "x16", "x32", "x64", "string", "f32", "f64", "raw"};

bool type_of(const std::string &s, FetchType *t)
{
    for (size_t i = 0; i < std::size(kTypes); ++i)
        if (s == kTypes[i]) {
            *t = static_cast<FetchType>(i);
            return true;
        }
    return false;
}

struct Parser {
    const std::string &text;
    std::string *error;
    size_t *at;

    bool fail(size_t pos, std::string what)
    {
        *error = std::move(what);
        *at = pos;
        return false;
    }

    // FETCH (no NAME=, no :TYPE) at text position `pos`.
    bool fetch(const std::string &f, size_t pos, FetchArg *a, int depth)
    {
        if (depth > 8) return fail(pos, "too many nested loads (at most 8)");
        if (f.empty()) return fail(pos, "a value to fetch is missing here");
        switch (f[0]) {
        case '%': {
            int64_t x = 0;
            if (f.rfind("%xmm", 0) == 0 && parse_number(f.substr(4), &x, false) && x < 16 && std::isdigit(static_cast<unsigned char>(f[4]))) {
                a->base = FetchBase::xmm;
                a->n = static_cast<uint32_t>(x);
                return true;
            }
            int r = reg_index(f.substr(1));
            if (r < 0) return fail(pos, fmt::format("unknown register '{}' (%ax .. %r15, %ip, %flags, %xmm0 .. %xmm15)", f));
            a->base = FetchBase::reg;
            a->n = static_cast<uint32_t>(r);
            return true;
        }
        case '$': {
            std::string v = f.substr(1);
            int64_t n = 0;
            if (v == "retval") a->base = FetchBase::retval;
            else if (v == "stack") a->base = FetchBase::stack;
            else if (v == "comm") a->base = FetchBase::comm;
            else if (v.rfind("arg", 0) == 0 && parse_number(v.substr(3), &n, false) && v.size() > 3 &&
                     std::isdigit(static_cast<unsigned char>(v[3]))) {
                if (n < 1 || n > 32) return fail(pos, fmt::format("'{}': arguments are $arg1 .. $arg32", f));
                a->base = FetchBase::arg;
                a->n = static_cast<uint32_t>(n);
            } else if (v.rfind("stack", 0) == 0 && v.size() > 5 && std::isdigit(static_cast<unsigned char>(v[5])) &&
                       parse_number(v.substr(5), &n, false) && n < 4096) {
                a->base = FetchBase::stack_n;
                a->n = static_cast<uint32_t>(n);
            } else {
                return fail(pos, fmt::format("unknown variable '{}' ($argN, $retval, $stack, $stackN, $comm)", f));
            }
            return true;
        }
        case '@': {
            std::string v = f.substr(1);
            int64_t n = 0;
            if (!v.empty() && std::isdigit(static_cast<unsigned char>(v[0]))) {
                if (!parse_number(v, &n, false)) return fail(pos + 1, fmt::format("'{}' is not an address", v));
                a->base = FetchBase::imm;
                a->value = static_cast<uint64_t>(n);
                a->derefs.push_back(0);
                return true;
            }
            // @SYM[+|-OFF]
            size_t sign = v.find_last_of("+-");
            int64_t off = 0;
            if (sign != std::string::npos && sign > 0 && parse_number(v.substr(sign), &off, true)) v.resize(sign);
            if (v.empty()) return fail(pos + 1, "a symbol or an address is missing after '@'");
            a->base = FetchBase::symbol;
            a->symbol = v;
            a->derefs.push_back(off);
            return true;
        }
        case '\\': {
            int64_t n = 0;
            if (!parse_number(f.substr(1), &n, true))
                return fail(pos + 1, fmt::format("'{}' is not a number (\\IMM: decimal or 0x-hex)", f.substr(1)));
            a->base = FetchBase::imm;
            a->value = static_cast<uint64_t>(n);
            return true;
        }
        case '+':
        case '-': {
            size_t open = f.find('(');
            if (open == std::string::npos || f.back() != ')')
                return fail(pos, fmt::format("'{}': a load is +|-OFF(FETCHARG), as +8(%di)", f));
            std::string off = f.substr(1, open - 1);
            if (!off.empty() && off[0] == 'u') off.erase(0, 1);  // user memory: the same here
            int64_t n = 0;
            if (!parse_number(off, &n, false))
                return fail(pos + 1, fmt::format("'{}' is not an offset (decimal or 0x-hex)", f.substr(1, open - 1)));
            if (!fetch(f.substr(open + 1, f.size() - open - 2), pos + open + 1, a, depth + 1)) return false;
            a->derefs.push_back(f[0] == '-' ? static_cast<int64_t>(0 - static_cast<uint64_t>(n)) : n);
            return true;
        }
        default: {
            bool ident = std::isalpha(static_cast<unsigned char>(f[0])) || f[0] == '_';
            for (char c : f) ident = ident && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
            if (ident) {  // a parameter by name
                a->base = FetchBase::param;
                a->symbol = f;
                return true;
            }
            return fail(pos, fmt::format("'{}': expected a parameter's name, %REG, $argN, $retval, $stack[N], $comm, "
                                         "@ADDR, @SYM, +|-OFF(FETCHARG) or \\IMM",
                                         f));
        }
        }
    }

    bool fetcharg(const Word &w, const Spec &spec, size_t index, FetchArg *a)
    {
        std::string s = w.text;
        size_t pos = w.at;
        size_t eq = s.find('=');
        if (eq != std::string::npos && s[0] != '+' && s[0] != '-' && s[0] != '@' && s[0] != '%' && s[0] != '$') {
            std::string name = s.substr(0, eq);
            bool ok = !name.empty() && (std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_');
            for (char c : name) ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
            if (!ok) return fail(pos, fmt::format("'{}' is not a name (letters, digits, _)", name));
            a->name = name;
            s.erase(0, eq + 1);
            pos += eq + 1;
        } else {
            a->name = fmt::format("arg{}", index + 1);
        }
        // :TYPE, unless the colon is an object's (@libc.so.6:environ).
        bool typed = false;
        if (size_t colon = s.rfind(':'); colon != std::string::npos) {
            std::string t = s.substr(colon + 1);
            if (type_of(t, &a->type)) {
                typed = true;
                s.resize(colon);
            } else if (t.size() >= 2 && t[0] == '{' && t.back() == '}') {
                size_t bad = 0;
                a->desc = t.substr(1, t.size() - 2);
                a->vt = parse_vtype(a->desc, &bad);
                if (!a->vt) return fail(pos + colon + 2 + bad, "not a type descriptor");
                a->type = FetchType::typed;
                a->home = static_cast<uint8_t>(arch::classify(*a->vt));
                a->image = image_bytes(*a->vt);
                typed = true;
                s.resize(colon);
            } else if (s[0] != '@' || s.find(')') != std::string::npos) {
                return fail(pos + colon + 1, fmt::format("unknown type '{}' (u8 .. u64, s8 .. s64, x8 .. x64, f32, f64, string, raw)", t));
            }
        }
        if (!fetch(s, pos, a, 0)) return false;
        a->typed = typed;
        if (a->base == FetchBase::param && eq == std::string::npos) a->name = a->symbol;
        if (a->base == FetchBase::comm) {
            if (typed && a->type != FetchType::string) return fail(pos, "$comm is a string: only :string");
            a->type = FetchType::string;
        }
        if (a->type == FetchType::typed && a->derefs.empty() && a->base != FetchBase::arg && a->base != FetchBase::retval &&
            a->base != FetchBase::xmm && a->base != FetchBase::reg)
            return fail(pos, "a type from DWARF is for a load, %REG, $argN, %xmmN or $retval");
        if (a->base == FetchBase::retval && spec.kind == SpecKind::call && eq == std::string::npos) a->name = "retval";
        if (a->base == FetchBase::retval && spec.kind == SpecKind::probe)
            return fail(pos, "$retval is known at a return only: use r:FUNC");
        if (a->base == FetchBase::arg && spec.kind == SpecKind::probe && spec.offset != 0)
            return fail(pos, "$argN is known at a function's entry (offset 0) or return only");
        if (a->base == FetchBase::param && spec.kind == SpecKind::probe && spec.offset != 0)
            return fail(pos, "parameters by name are known at a function's entry (offset 0) or return only");
        if (a->base == FetchBase::comm && !a->derefs.empty()) return fail(pos, "$comm cannot be loaded from");
        return true;
    }

    // LOC: FUNC or FUNC+OFF.
    bool location(const Word &w, Spec *spec)
    {
        std::string loc = w.text;
        size_t plus = loc.rfind('+');
        int64_t off = 0;
        if (plus != std::string::npos && plus > 0 && plus + 1 < loc.size() &&
            std::isdigit(static_cast<unsigned char>(loc[plus + 1])) && loc.compare(0, plus, "operator") != 0 &&
            !(plus >= 8 && loc.compare(plus - 8, 8, "operator") == 0)) {
            if (!parse_number(loc.substr(plus + 1), &off, false))
                return fail(w.at + plus + 1, fmt::format("'{}' is not an offset (decimal or 0x-hex)", loc.substr(plus + 1)));
            loc.resize(plus);
        }
        if (loc.empty()) return fail(w.at, "a function is missing");
        // No function's name ends in "operator" (C++'s are operator+, operator() ...), and one
        // that did could not be written with an offset after it (operator+N is a name).
        if (loc.size() >= 8 && loc.compare(loc.size() - 8, 8, "operator") == 0)
            return fail(w.at + loc.size() - 8, "a C++ operator's name needs its operator (operator+, operator())");
        // OBJECT:DIGITS: perf's p:FUNC:LINE (or a function left out), never a function's name.
        if (const size_t colon = loc.rfind(':'); colon != std::string::npos && colon + 1 < loc.size() &&
                                                  (colon == 0 || loc[colon - 1] != ':') &&
                                                  loc.find_first_not_of("0123456789", colon + 1) == std::string::npos)
            return fail(w.at + colon + 1,
                        fmt::format("'{}' is a source line: a return probe is on a function, not a line; an "
                                    "offset is FUNC+{}",
                                    loc.substr(colon + 1), loc.substr(colon + 1)));
        spec->target = loc;
        spec->offset = static_cast<uint64_t>(off);
        return true;
    }
};

}  // namespace

bool parse_spec(const std::string &text, Spec *out, std::string *error, size_t *at)
{
    *out = Spec{};
    out->text = text;
    Parser p{text, error, at};
    std::vector<Word> words = split_words(text);
    if (words.empty()) return p.fail(0, "an empty spec");
    const std::string &w0 = words[0].text;
    // p, r, rN, each with :X or followed by another word.
    size_t digits = 1;
    while (digits < w0.size() && std::isdigit(static_cast<unsigned char>(w0[digits]))) ++digits;
    bool is_probe = (w0[0] == 'p' || w0[0] == 'r') && (w0[0] == 'r' || digits == 1) &&
                    ((digits < w0.size() && w0[digits] == ':') || (digits == w0.size() && words.size() > 1));
    size_t next = 1;  // the first FETCHARG word
    if (!is_probe) {
        if (!p.location(words[0], out)) return false;
        out->kind = out->offset ? SpecKind::probe : SpecKind::call;
        // FUNC $retval[:TYPE]: the return value as TYPE says.
        if (words.size() > 1 && out->kind == SpecKind::call) {
            FetchArg a;
            if (!p.fetcharg(words[1], *out, 0, &a)) return false;
            if (a.base != FetchBase::retval || !a.derefs.empty() || words.size() > 2)
                return p.fail(words[a.base != FetchBase::retval || !a.derefs.empty() ? 1 : 2].at,
                              "a function's calls take $retval[:TYPE] only: other values need a p: or r: probe, as "
                              "'p:FUNC %di' or 'r:FUNC $retval'");
            if (a.type == FetchType::string) return p.fail(words[1].at, "$retval:string needs an r: probe");
            out->args.push_back(std::move(a));
            return true;
        }
        if (words.size() > 1)
            return p.fail(words[1].at, "values to fetch need a p: or r: probe, as 'p:FUNC %di' or 'r:FUNC $retval'");
        return true;
    }
    out->kind = w0[0] == 'p' ? SpecKind::probe : SpecKind::ret;
    if (digits > 1) {
        int64_t n = 0;
        if (w0[0] != 'r' || !parse_number(w0.substr(1, digits - 1), &n, false) || n < 1 || n > 100000)
            return p.fail(1, "MAXACTIVE (r<N>) is 1 .. 100000");
        out->maxactive = static_cast<int>(n);
    }
    std::string x = digits < w0.size() ? w0.substr(digits + 1) : std::string();
    Word loc;
    if (x.find('/') != std::string::npos && words.size() > 1) {
        out->event = x;  // p:GRP/EVENT LOC (a bare p:X is the location: p:X NAME fetches parameter NAME)
        for (char c : x)
            if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '/' && c != '.' && c != '-')
                return p.fail(words[0].at + digits + 1, fmt::format("'{}' is not an event name", x));
        loc = words[1];
        next = 2;
    } else if (!x.empty()) {
        loc = {x, words[0].at + digits + 1};  // p:LOC
    } else if (words.size() > 1) {
        loc = words[1];  // p LOC
        next = 2;
    } else {
        return p.fail(w0.size(), "a function is missing after the probe's kind");
    }
    if (!p.location(loc, out)) return false;
    if (out->kind == SpecKind::ret && out->offset != 0)
        return p.fail(loc.at + loc.text.rfind('+'), "a return probe is on a function: no +OFF");
    if (words.size() - next > kMaxFetchArgs)
        return p.fail(words[next + kMaxFetchArgs].at, fmt::format("at most {} values to fetch", kMaxFetchArgs));
    for (size_t i = next; i < words.size(); ++i) {
        FetchArg a;
        if (!p.fetcharg(words[i], *out, i - next, &a)) return false;
        for (const FetchArg &b : out->args)
            if (b.name == a.name) return p.fail(words[i].at, fmt::format("'{}' is named twice", a.name));
        out->args.push_back(std::move(a));
    }
    return true;
}

std::string to_text(const Spec &spec)
{
    // +OFF when there is one, and +0x0 when the target itself ends in +DIGITS...: read back, that
    // would be taken for the offset.
    const size_t plus = spec.target.rfind('+');
    const bool looks_offset = plus != std::string::npos && plus + 1 < spec.target.size() &&
                              std::isdigit(static_cast<unsigned char>(spec.target[plus + 1]));
    std::string loc = spec.offset || looks_offset ? fmt::format("{}+{:#x}", spec.target, spec.offset) : spec.target;
    std::string out = spec.kind == SpecKind::call ? loc
                      : spec.kind == SpecKind::probe ? "p" : spec.maxactive ? fmt::format("r{}", spec.maxactive) : "r";
    // p:LOC, unless LOC holds a '/' (a path): p:X/Y followed by values is read as an event
    // name (p:GRP/EVENT LOC), so a path goes as p LOC.
    if (spec.kind == SpecKind::call) {
    } else if (!spec.event.empty()) {
        out += ":" + spec.event + " " + loc;
    } else {
        out += (loc.find('/') != std::string::npos ? " " : ":") + loc;
    }
    for (const FetchArg &a : spec.args) {
        std::string f;
        switch (a.base) {
        case FetchBase::reg: f = std::string("%") + kRegs[a.n]; break;
        case FetchBase::arg: f = fmt::format("$arg{}", a.n); break;
        case FetchBase::retval: f = "$retval"; break;
        case FetchBase::stack: f = "$stack"; break;
        case FetchBase::stack_n: f = fmt::format("$stack{}", a.n); break;
        case FetchBase::comm: f = "$comm"; break;
        case FetchBase::imm:
        case FetchBase::symbol: f = fmt::format("\\{:#x}", a.value); break;
        case FetchBase::param: f = a.symbol; break;
        case FetchBase::xmm: f = fmt::format("%xmm{}", a.n); break;
        }
        for (int64_t d : a.derefs)
            f = fmt::format("{}{}({})", d < 0 ? '-' : '+', d < 0 ? -static_cast<uint64_t>(d) : static_cast<uint64_t>(d), f);
        out += fmt::format(" {}={}:{}", a.name, f, a.type == FetchType::typed ? "{" + a.desc + "}" : type_name(a.type));
    }
    return out;
}

std::string mode_conflict(const Spec &spec, bool count, bool hist)
{
    if ((count || hist) && !spec.args.empty())
        return fmt::format("{}: values are fetched for each event: not with --count or --hist", spec.text);
    if (hist && spec.kind == SpecKind::probe)
        return fmt::format("{}: --hist needs calls with a duration (FUNC or r:FUNC), not an instruction", spec.text);
    return {};
}

std::string point_at(const std::string &text, size_t at, const std::string &error)
{
    if (at > text.size()) at = text.size();
    return fmt::format("{}\n  {}\n  {}^", error, text, std::string(at, ' '));
}

size_t payload_bytes(const Spec &spec) { return arg_offset(spec, spec.args.size()); }

size_t arg_offset(const Spec &spec, size_t i)
{
    size_t off = 8;  // the fault mask
    for (size_t k = 0; k < i && k < spec.args.size(); ++k) off += arg_bytes(spec.args[k]);
    return off;
}

size_t arg_bytes(const FetchArg &a)
{
    return a.type == FetchType::string || (a.type == FetchType::typed && a.image > 8) ? kStringBytes : 8;
}

bool needs_fpregs(const Spec &spec)
{
    for (const FetchArg &a : spec.args) {
        if (a.base == FetchBase::xmm) return true;
        if (a.base == FetchBase::retval && (a.type == FetchType::f32 || a.type == FetchType::f64)) return true;  // xmm0
        const auto home = static_cast<arch::ValueClass>(a.home);
        if (a.type == FetchType::typed && a.base == FetchBase::retval && home != arch::ValueClass::integer &&
            home != arch::ValueClass::int_int && home != arch::ValueClass::memory && home != arch::ValueClass::none)
            return true;
    }
    return false;
}

bool retval_in_record(const Spec &spec)
{
    if (spec.args.empty()) return true;
    const FetchArg &a = spec.args[0];
    if (a.type != FetchType::typed) return a.type != FetchType::string && a.type != FetchType::f32 && a.type != FetchType::f64;
    const VKind k = a.vt->kind;
    return k == VKind::void_ || (static_cast<arch::ValueClass>(a.home) == arch::ValueClass::integer && k != VKind::string &&
                                 k != VKind::reference && a.image <= 8);
}

const char *type_name(FetchType t) { return t == FetchType::typed ? "{}" : kTypes[static_cast<size_t>(t)]; }

std::string format_value_json(const FetchArg &arg, const unsigned char *bytes, bool fault)
{
    if (fault) return "null";
    if (arg.type == FetchType::typed) return format_image_json(*arg.vt, bytes, arg_bytes(arg));
    if (arg.type == FetchType::string)
        return json_string(std::string(reinterpret_cast<const char *>(bytes), strnlen(reinterpret_cast<const char *>(bytes), kStringBytes - 1)));
    const std::string v = format_value(arg, bytes, fault);
    if (arg.type <= FetchType::s64) return v;
    if (arg.type == FetchType::raw) {
        int64_t n;
        std::memcpy(&n, bytes, 8);
        return std::to_string(n);
    }
    if (arg.type == FetchType::f32 || arg.type == FetchType::f64)
        return v.find_first_of("ni") == std::string::npos ? v : json_string(v);
    return json_string(v);
}

std::string format_value(const FetchArg &arg, const unsigned char *bytes, bool fault)
{
    if (fault) return "(fault)";
    if (arg.type == FetchType::typed) return format_image(*arg.vt, bytes, arg_bytes(arg));
    if (arg.type == FetchType::f32) {
        float f;
        std::memcpy(&f, bytes, 4);
        return fmt::format("{}", f);
    }
    if (arg.type == FetchType::f64) {
        double d;
        std::memcpy(&d, bytes, 8);
        return fmt::format("{}", d);
    }
    if (arg.type == FetchType::raw) {  // as a register shows: small ones (and errnos) in decimal
        int64_t n;
        std::memcpy(&n, bytes, 8);
        return n >= -4096 && n < (int64_t{1} << 32) ? "raw " + std::to_string(n) : fmt::format("raw {:#x}", static_cast<uint64_t>(n));
    }
    if (arg.type == FetchType::string) {
        std::string out = "\"";
        size_t i = 0;
        for (; i + 1 < kStringBytes && bytes[i]; ++i) {
            unsigned char c = bytes[i];
            if (c == '"' || c == '\\') out += '\\', out += static_cast<char>(c);
            else if (c == '\n') out += "\\n";
            else if (c == '\t') out += "\\t";
            else if (c < 0x20 || c >= 0x7f) out += fmt::format("\\x{:02x}", c);
            else out += static_cast<char>(c);
        }
        out += '"';
        if (bytes[kStringBytes - 1]) out += "...";  // cut to fit
        return out;
    }
    uint64_t v;
    std::memcpy(&v, bytes, 8);
    switch (arg.type) {
    case FetchType::u8: return std::to_string(static_cast<uint8_t>(v));
    case FetchType::u16: return std::to_string(static_cast<uint16_t>(v));
    case FetchType::u32: return std::to_string(static_cast<uint32_t>(v));
    case FetchType::u64: return std::to_string(v);
    case FetchType::s8: return std::to_string(static_cast<int8_t>(v));
    case FetchType::s16: return std::to_string(static_cast<int16_t>(v));
    case FetchType::s32: return std::to_string(static_cast<int32_t>(v));
    case FetchType::s64: return std::to_string(static_cast<int64_t>(v));
    case FetchType::x8: return fmt::format("{:#x}", static_cast<uint8_t>(v));
    case FetchType::x16: return fmt::format("{:#x}", static_cast<uint16_t>(v));
    case FetchType::x32: return fmt::format("{:#x}", static_cast<uint32_t>(v));
    default: return fmt::format("{:#x}", v);
    }
}

}  // namespace liveprobe::trace
