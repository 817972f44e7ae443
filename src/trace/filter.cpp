// The expressions of --filter, --by and --hist-of (filter.hpp): parsing into postfix code. Their
// operands are resolved for each function by filter_resolve.cpp, and evaluated by
// filter_eval.hpp.
#include "trace/filter.hpp"

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

#include <fmt/format.h>


namespace liveprobe::trace {
namespace {

struct Token {
    enum Kind { num, ident, fetch, str, op, end } kind = end;
    std::string text;  // ident, fetch, str, op (its spelling)
    int64_t value = 0;
    size_t at = 0;
    std::string type;  // ident, fetch: its :TYPE, if given
};

constexpr uint32_t kMaxNesting = 64;
constexpr unsigned long kMaxArg = 63;  // argN: 6 in registers, the others on the stack

constexpr const char *kOps[] = {"||", "&&", "==", "!=", "<=", ">=", "<<", ">>", "<", ">", "+", "-",
                                "*",  "/",  "%",  "&",  "|",  "^",  "!",  "~",  "(", ")"};

bool is_word(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// A number, with a duration's unit (ns, us, ms, s): in ns.
bool number(const std::string &s, size_t *i, Token *t, std::string *error)
{
    const size_t start = *i;
    const bool hex = s.compare(start, 2, "0x") == 0 || s.compare(start, 2, "0X") == 0;
    size_t j = start + (hex ? 2 : 0);
    while (j < s.size() && (hex ? std::isxdigit(static_cast<unsigned char>(s[j])) : std::isdigit(static_cast<unsigned char>(s[j]))))
        ++j;
    errno = 0;
    uint64_t v = std::strtoull(s.substr(start, j - start).c_str(), nullptr, hex ? 16 : 10);
    if (errno != 0 || j == start + (hex ? 2 : 0)) return *error = "a number is not written so, or is too large", false;
    size_t k = j;
    while (k < s.size() && std::isalpha(static_cast<unsigned char>(s[k]))) ++k;
    const std::string unit = s.substr(j, k - j);
    const uint64_t scale = unit.empty() || unit == "ns" ? 1 : unit == "us" ? 1000 : unit == "ms" ? 1000000 : unit == "s" ? 1000000000 : 0;
    if (scale == 0) return *i = j, *error = "a number's unit is ns, us, ms or s", false;
    if (v > static_cast<uint64_t>(INT64_MAX) / scale) return *error = "a number is too large", false;
    t->kind = Token::num;
    t->value = static_cast<int64_t>(v * scale);
    *i = k;
    return true;
}

// The text's tokens, ending with an `end` token; false with *error at *at.
bool tokens(const std::string &s, std::vector<Token> *out, std::string *error, size_t *at)
{
    for (size_t i = 0;;) {
        while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
        Token t;
        t.at = *at = i;
        if (i == s.size()) {
            out->push_back(t);
            return true;
        }
        const char c = s[i];
        if (std::isdigit(static_cast<unsigned char>(c))) {
            if (!number(s, &i, &t, error)) return *at = i, false;
        } else if (c == '"') {
            size_t j = s.find('"', i + 1);
            if (j == std::string::npos) return *error = "a string has no closing \"", false;
            t.kind = Token::str;
            t.text = s.substr(i + 1, j - i - 1);
            i = j + 1;
        } else if (is_word(c) || ((c == '$' || c == '%' || c == '@') && i + 1 < s.size() && is_word(s[i + 1]))) {
            size_t j = i + 1;
            while (j < s.size() && (is_word(s[j]) || s[j] == '.')) ++j;
            t.kind = is_word(c) ? Token::ident : Token::fetch;
            t.text = s.substr(i, j - i);
            if (j < s.size() && s[j] == ':') {  // OPERAND:TYPE
                size_t k = j + 1;
                while (k < s.size() && is_word(s[k])) ++k;
                t.type = s.substr(j + 1, k - j - 1);
                j = k;
            }
            i = j;
        } else {
            for (const char *op : kOps)
                if (s.compare(i, std::strlen(op), op) == 0) {
                    t.kind = Token::op;
                    t.text = op;
                    i += t.text.size();
                    break;
                }
            if (t.kind != Token::op) return *error = fmt::format("'{}' is no operator", c), false;
        }
        out->push_back(t);
    }
}

// TYPE of OPERAND:TYPE: u8..u64, s8..s64 (x8..x64 as u).
bool int_type(const std::string &type, uint8_t *width, bool *sign)
{
    if (type.size() < 2 || (type[0] != 'u' && type[0] != 's' && type[0] != 'x')) return false;
    const std::string bits = type.substr(1);
    if (bits != "8" && bits != "16" && bits != "32" && bits != "64") return false;
    *width = static_cast<uint8_t>(std::stoi(bits) / 8);
    *sign = type[0] == 's';
    return true;
}

// Binary operators by precedence, loosest first.
const std::vector<std::vector<std::pair<const char *, Op>>> kLevels = {
    {{"||", Op::lor}},
    {{"&&", Op::land}},
    {{"|", Op::bor}},
    {{"^", Op::bxor}},
    {{"&", Op::band}},
    {{"==", Op::eq}, {"!=", Op::ne}},
    {{"<", Op::lt}, {"<=", Op::le}, {">", Op::gt}, {">=", Op::ge}},
    {{"<<", Op::shl}, {">>", Op::shr}},
    {{"+", Op::add}, {"-", Op::sub}},
    {{"*", Op::mul}, {"/", Op::div}, {"%", Op::mod}},
};

class Parser {
public:
    Parser(std::vector<Token> toks, Expr *e, std::string *error, size_t *at)
        : t_(std::move(toks)), e_(e), error_(error), at_(at)
    {
    }

    bool parse()
    {
        if (!binary(0)) return false;
        if (t_[i_].kind != Token::end) return fail(t_[i_].kind == Token::op && t_[i_].text == ")" ? "a ')' without its '('" : "an operator is missing here");
        return true;
    }

private:
    std::vector<Token> t_;
    size_t i_ = 0;
    Expr *e_;
    std::string *error_;
    size_t *at_;
    uint32_t depth_ = 0;
    uint32_t nesting_ = 0;  // parentheses and unary operators open: the parser's recursion, bounded

    bool fail(const std::string &why)
    {
        *error_ = why;
        *at_ = t_[i_].at;
        return false;
    }
    bool is_op(const char *op) const { return t_[i_].kind == Token::op && t_[i_].text == op; }

    // Appends insn; the evaluation stack's depth and the code's length bounded.
    bool emit(Insn insn, int push)
    {
        depth_ = static_cast<uint32_t>(static_cast<int>(depth_) + push);
        if (depth_ > kMaxStack) return fail(fmt::format("nested more than {} deep", kMaxStack));
        if (e_->code.size() >= kMaxInsns) return fail(fmt::format("longer than {} steps", kMaxInsns));
        e_->code.push_back(insn);
        return true;
    }

    bool binary(size_t level)
    {
        if (level == kLevels.size()) return unary();
        if (!binary(level + 1)) return false;
        for (;;) {
            const std::pair<const char *, Op> *hit = nullptr;
            for (const auto &op : kLevels[level])
                if (is_op(op.first)) hit = &op;
            if (!hit) return true;
            Insn insn;
            insn.op = hit->second;
            insn.at = t_[i_++].at;
            if (!binary(level + 1) || !emit(insn, -1)) return false;
        }
    }

    bool unary()
    {
        if (++nesting_ > kMaxNesting) return fail(fmt::format("nested more than {} deep", kMaxNesting));
        const bool ok = unary_in();
        --nesting_;
        return ok;
    }

    bool unary_in()
    {
        for (auto [text, op] : {std::pair{"!", Op::lnot}, std::pair{"-", Op::neg}, std::pair{"~", Op::bnot}})
            if (is_op(text)) {
                Insn insn;
                insn.op = op;
                insn.at = t_[i_++].at;
                return unary() && emit(insn, 0);
            }
        return primary();
    }

    bool primary()
    {
        const Token &t = t_[i_];
        Insn insn;
        insn.at = t.at;
        if (t.kind == Token::num) {
            insn.imm = t.value;
            ++i_;
            return emit(insn, 1);
        }
        if (is_op("(")) {
            ++i_;
            if (!binary(0)) return false;
            if (!is_op(")")) return fail("a ')' is missing here");
            ++i_;
            return true;
        }
        if (t.kind == Token::ident || t.kind == Token::fetch) return operand(t, insn);
        if (t.kind == Token::str) return fail("a string is compared with comm only: comm == \"NAME\"");
        return fail(t.kind == Token::end ? "an operand is missing at the end" : "an operand is missing here");
    }

    bool operand(const Token &t, Insn insn)
    {
        ++i_;
        if (!t.type.empty()) {
            if (!int_type(t.type, &insn.width, &insn.sign)) return --i_, fail(fmt::format("no type '{}': u8..u64, s8..s64", t.type));
            insn.typed = true;
        }
        const std::string &w = t.text;
        if (w == "comm" || w == "$comm") return comm(insn);
        if (w == "retval" || w == "$retval") return e_->at_return = true, insn.op = Op::retval, emit(insn, 1);
        if (w == "duration") return e_->at_return = true, insn.op = Op::duration, emit(insn, 1);
        if (w == "tid" || w == "pid" || w == "caller") {
            insn.op = w == "tid" ? Op::tid : w == "pid" ? Op::pid : Op::caller;
            return emit(insn, 1);
        }
        FetchArg a;
        if (w.size() > 3 && w.compare(0, 3, "arg") == 0 && w.find_first_not_of("0123456789", 3) == std::string::npos) {
            if (w.size() > 5 || std::strtoul(w.c_str() + 3, nullptr, 10) > kMaxArg)  // (no stoul: no exception)
                return --i_, fail(fmt::format("'{}': arguments are arg0 to arg{}", w, kMaxArg));
            a.base = FetchBase::arg;
            a.n = static_cast<uint32_t>(std::strtoul(w.c_str() + 3, nullptr, 10)) + 1;
        } else if (t.kind == Token::ident) {
            a.base = FetchBase::param;
            a.symbol = w;
        } else {  // $argN, %REG, @SYM: as a spec's FETCHARG reads them
            Spec s;
            std::string error;
            size_t at = 0;
            if (!parse_spec("p:x " + w, &s, &error, &at) || s.args.size() != 1)
                return --i_, fail(fmt::format("'{}': {}", w, error.empty() ? "not an operand" : error));
            a = s.args[0];
            if (a.base == FetchBase::retval) return e_->at_return = true, insn.op = Op::retval, emit(insn, 1);
        }
        a.name = w;
        a.type = FetchType::x64;
        insn.op = Op::fetch;
        insn.arg = static_cast<uint32_t>(e_->fetches.size());
        e_->fetches.push_back(std::move(a));
        return emit(insn, 1);
    }

    // comm == "NAME", comm != "NAME"
    bool comm(Insn insn)
    {
        const bool eq = is_op("=="), ne = is_op("!=");
        if (!eq && !ne) return fail("comm is compared with a name: comm == \"NAME\" or comm != \"NAME\"");
        ++i_;
        if (t_[i_].kind != Token::str) return fail("comm is compared with a name in quotes: comm == \"NAME\"");
        if (t_[i_].text.size() > 15) return fail("a thread's name is 15 bytes at most");
        std::array<char, 16> name{};
        std::memcpy(name.data(), t_[i_].text.data(), t_[i_].text.size());
        ++i_;
        insn.op = Op::comm_eq;
        insn.arg = static_cast<uint32_t>(e_->strings.size());
        e_->strings.push_back(name);
        if (!emit(insn, 1)) return false;
        Insn negate;
        negate.op = Op::lnot;
        negate.at = insn.at;
        return eq || emit(negate, 0);
    }
};

}  // namespace

bool parse_expr(const std::string &text, Expr *out, std::string *error, size_t *at)
{
    *out = Expr{};
    out->text = text;
    std::vector<Token> toks;
    if (!tokens(text, &toks, error, at)) return false;
    if (toks.size() == 1) return *error = "the expression is empty", *at = 0, false;
    return Parser(std::move(toks), out, error, at).parse();
}

}  // namespace liveprobe::trace
