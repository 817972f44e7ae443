// Fuzzing the expressions of --filter, --by and --hist-of (trace/filter.hpp): the agent parses
// the text it is given inside the traced process, so any text is read or refused with a position
// inside it, never a crash, a hang or undefined behaviour; and what it reads is code the
// handlers can run as they do: within kMaxInsns steps and kMaxStack values, every operand's
// index in its table, one value left at the end.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "trace/filter.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    using namespace liveprobe::trace;
    const std::string text(reinterpret_cast<const char *>(data), size);
    Expr e;
    std::string error;
    size_t at = 0;
    if (!parse_expr(text, &e, &error, &at)) {
        if (at > text.size() || error.empty()) std::abort();
        return 0;
    }
    if (e.code.empty() || e.code.size() > kMaxInsns) std::abort();
    uint32_t depth = 0;
    for (const Insn &insn : e.code) {
        switch (insn.op) {
        case Op::imm: case Op::retval: case Op::duration: case Op::tid: case Op::pid: case Op::caller: ++depth; break;
        case Op::fetch:
            if (insn.arg >= e.fetches.size()) std::abort();
            ++depth;
            break;
        case Op::comm_eq:
            if (insn.arg >= e.strings.size()) std::abort();
            ++depth;
            break;
        case Op::neg: case Op::lnot: case Op::bnot:
            if (depth < 1) std::abort();
            break;
        default:
            if (depth < 2) std::abort();
            --depth;
        }
        if (depth > kMaxStack) std::abort();
        if (insn.width != 1 && insn.width != 2 && insn.width != 4 && insn.width != 8) std::abort();
    }
    if (depth != 1) {
        std::fprintf(stderr, "'%s' leaves %u values\n", text.c_str(), depth);
        std::abort();
    }
    return 0;
}
