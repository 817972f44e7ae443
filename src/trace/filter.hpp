// The expressions of `liveprobe trace --filter` (and of --by and --hist-of): one small language,
// modelled on the kernel's kprobe_events filters and bpftrace's predicates. Parsed by the tool
// (to point at a mistake before anything is attached) and again by the agent, which resolves
// the operands for each function it places a probe on, and evaluates the result in the
// handlers: no allocation, no lock, at most kMaxInsns steps.
//
//   operands   argN (bpftrace's: arg0 is the first argument), $argN (the kernel's: 1-based),
//              a parameter's name (from the function's DWARF, typed as declared), retval and
//              duration (ns; at a return only: FUNC and r:, not p:), tid, pid, caller (the
//              return address), %REG, @SYM, numbers (decimal, 0x hex; 10us, 2ms, 1s are ns),
//              comm == "NAME" and comm != "NAME" (the thread's name)
//   operators  as C's, by C's precedence: || && | ^ & == != < <= > >= << >> + - * / % ! - ~ ( )
//   types      every value is a signed 64-bit integer; a parameter, retval of a function with
//              DWARF, and OPERAND:TYPE (u8..u64, s8..s64) are extended from their width by
//              their sign; without DWARF, retval and argN are the whole register.
// Division by 0 is 0. An operand that cannot be read (a fault) makes the whole expression
// unreadable: a --filter then lets nothing through.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "trace/fetch.hpp"
#include "trace/spec.hpp"

namespace liveprobe::trace {

enum class Op : uint8_t {
    imm, fetch, retval, duration, tid, pid, caller, comm_eq,  // operands
    neg, lnot, bnot,                                           // unary
    mul, div, mod, add, sub, shl, shr, lt, le, gt, ge, eq, ne, band, bxor, bor, land, lor,
};

struct Insn {
    Op op = Op::imm;
    uint8_t width = 8;  // fetch, retval: the value's bytes, extended to 64 bits
    bool sign = true;   // by its sign, or with zeros
    bool typed = false; // :TYPE given: DWARF does not retype it
    uint32_t arg = 0;   // fetch: its index in Expr::fetches; comm_eq: in Expr::strings
    int64_t imm = 0;
    size_t at = 0;      // where it is in the text
};

constexpr size_t kMaxInsns = 64;
constexpr uint32_t kMaxStack = 16;

struct Expr {
    std::string text;
    std::vector<Insn> code;                      // postfix
    std::vector<FetchArg> fetches;               // the arguments, parameters, registers it reads
    std::vector<std::array<char, 16>> strings;   // comm's names
    bool at_return = false;                      // reads retval or duration
};

// Parses text into *out: false with *error and *at (a byte offset into text).
bool parse_expr(const std::string &text, Expr *out, std::string *error, size_t *at);

// The operands resolved for one function whose entry is at `entry` (parameters by name, the
// return value's type, from its DWARF), for a probe of `kind`: 0, or -errno with *why.
int resolve_expr(Expr *e, SpecKind kind, uint64_t entry, std::string *why);

// What an expression reads besides the registers.
struct EvalContext {
    FetchContext fetch;
    uint64_t duration = 0, caller = 0;
    uint32_t tid = 0;  // 0: not read yet (the evaluation asks the kernel if it needs it)
};

// eval_expr(e, ctx, &v), the value of e: trace/filter_eval.hpp, inline in the handlers.

}  // namespace liveprobe::trace
