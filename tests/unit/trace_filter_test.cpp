// trace/filter.hpp: --filter's expressions parsed and evaluated against a made-up context, where
// the hit path's evaluation must not trap or read past its stack: division by zero and by -1,
// shifts by 64 and more, sign extension by width, the precedence of C's operators.
#include <gtest/gtest.h>

#include <liveprobe/kprobes.h>

#include <climits>

#include "trace/filter.hpp"
#include "trace/filter_eval.hpp"

namespace liveprobe::trace {
namespace {

// The value of text with the given registers at a return (ax) and arguments at the entry.
int64_t value(const std::string &text, uint64_t ax = 0, std::initializer_list<uint64_t> args = {},
              uint64_t duration = 0)
{
    Expr e;
    std::string error;
    size_t at = 0;
    EXPECT_TRUE(parse_expr(text, &e, &error, &at)) << text << ": " << error << " at " << at;
    for (Insn &insn : e.code)  // what resolve_expr does for a function without DWARF
        if (insn.op == Op::fetch) e.fetches[insn.arg].type = FetchType::u64;
    static pt_regs regs;
    regs = pt_regs{};
    regs.ax = ax;
    uint64_t entry[7] = {};
    size_t i = 0;
    for (uint64_t a : args) entry[i++] = a;
    EvalContext c;
    c.fetch.regs = &regs;
    c.fetch.entry = entry;
    c.duration = duration;
    c.tid = 77;
    int64_t v = 0;
    EXPECT_TRUE(eval_expr(e, c, &v)) << text;
    return v;
}

TEST(TraceFilter, OperatorsAsCsPrecedence)
{
    EXPECT_EQ(value("1 + 2 * 3"), 7);
    EXPECT_EQ(value("(1 + 2) * 3"), 9);
    EXPECT_EQ(value("1 << 2 + 1"), 8);
    EXPECT_EQ(value("6 & 3 == 3"), 0);  // == binds tighter than &, as in C
    EXPECT_EQ(value("1 | 2 ^ 3 & 1"), 3);
    EXPECT_EQ(value("!0 && 2 || 0"), 1);
    EXPECT_EQ(value("-3 < -2"), 1);
    EXPECT_EQ(value("~0"), -1);
    EXPECT_EQ(value("10 % 4 - 7 / 2"), -1);
    EXPECT_EQ(value("2ms + 3us + 1s + 4ns"), 1'002'003'004);
    EXPECT_EQ(value("0x10 >= 16 && 0x10 <= 16 && 1 != 2"), 1);
}

TEST(TraceFilter, NothingTraps)
{
    EXPECT_EQ(value("7 / 0"), 0);
    EXPECT_EQ(value("7 % 0"), 0);
    EXPECT_EQ(value("arg0 / -1", 0, {static_cast<uint64_t>(INT64_MIN)}), INT64_MIN);  // wraps, no SIGFPE
    EXPECT_EQ(value("arg0 % -1", 0, {static_cast<uint64_t>(INT64_MIN)}), 0);
    EXPECT_EQ(value("1 << 64"), 1);  // the count taken mod 64, as the machine does
    EXPECT_EQ(value("arg0 * 2", 0, {static_cast<uint64_t>(INT64_MAX)}), -2);
    EXPECT_EQ(value("-arg0", 0, {static_cast<uint64_t>(INT64_MIN)}), INT64_MIN);
}

TEST(TraceFilter, OperandsAndWidths)
{
    EXPECT_EQ(value("retval", 0xfffffffdull), 0xfffffffdll);  // no DWARF: the whole register
    EXPECT_EQ(value("retval:s32", 0xfffffffdull), -3);
    EXPECT_EQ(value("retval:u8", 0x1ff), 0xff);
    EXPECT_EQ(value("retval:s8", 0x1ff), -1);
    EXPECT_EQ(value("arg1 - arg0", 0, {5, 12}), 7);
    EXPECT_EQ(value("$arg2 - $arg1", 0, {5, 12}), 7);
    EXPECT_EQ(value("duration > 1ms", 0, {}, 2'000'000), 1);
    EXPECT_EQ(value("tid == 77"), 1);
}

TEST(TraceFilter, MistakesArePointedAt)
{
    struct Case {
        const char *text;
        size_t at;
        const char *error;
    } cases[] = {
        {"arg0 >", 6, "an operand is missing at the end"},
        {"(arg0", 5, "a ')' is missing here"},
        {"arg0 ) ", 5, "a ')' without its '('"},
        {"comm < \"x\"", 5, "comm is compared with a name"},
        {"comm == \"a name longer than 15\"", 8, "15 bytes at most"},
        {"5 # 3", 2, "'#' is no operator"},
        {"1 2", 2, "an operator is missing here"},
    };
    for (const Case &c : cases) {
        Expr e;
        std::string error;
        size_t at = 99;
        EXPECT_FALSE(parse_expr(c.text, &e, &error, &at)) << c.text;
        EXPECT_EQ(at, c.at) << c.text << ": " << error;
        EXPECT_NE(error.find(c.error), std::string::npos) << c.text << ": " << error;
    }
}

TEST(TraceFilter, BoundedSteps)
{
    std::string deep, wide = "1";
    for (int i = 0; i < 17; ++i) deep += "1+(";
    deep += "1" + std::string(17, ')');
    for (int i = 0; i < 70; ++i) wide += " + 1";
    Expr e;
    std::string error;
    size_t at = 0;
    EXPECT_FALSE(parse_expr(deep, &e, &error, &at));
    EXPECT_NE(error.find("nested more than 16"), std::string::npos) << error;
    EXPECT_FALSE(parse_expr(wide, &e, &error, &at));
    EXPECT_NE(error.find("longer than 64 steps"), std::string::npos) << error;
    EXPECT_TRUE(parse_expr(std::string(16, '(') + "1" + std::string(16, ')'), &e, &error, &at)) << error;
}

}  // namespace
}  // namespace liveprobe::trace
