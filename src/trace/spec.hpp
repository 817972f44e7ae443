// The probe specs of `liveprobe trace`, as the kernel's kprobe_events writes them
// (Documentation/trace/kprobetrace.rst), parsed once by the tool (to point at a mistake before
// anything is attached) and again by the target's agent (to place the probes and fetch):
//
//   FUNC [$retval[:TYPE]]    entry and return of each function FUNC names: the seeds' line
//                            (the return value typed by the function's DWARF, or as TYPE says)
//   FUNC+OFF                 an instruction: a line each time a thread reaches it
//   p[:GRP/EVENT] LOC [FETCHARG...]    a probe at LOC (FUNC or FUNC+OFF), fetching FETCHARGs
//   r[MAXACTIVE][:GRP/EVENT] FUNC [FETCHARG...]   at FUNC's return
//   p:LOC [FETCHARG...], r:FUNC [FETCHARG...]     the same, the event named after the function
// (The kernel also reads p:EVENT LOC; here p:X is always the location, so that p:FUNC NAME can
// fetch the parameter NAME: an event name takes its group, p:GRP/EVENT.)
//
// FUNC is a name, OBJECT:name, a C++ name or a glob. A FETCHARG is [NAME=]FETCH[:TYPE]:
//   NAME (a parameter, by its DWARF), %REG (%ax or %rax, ... %r15, %ip, %flags), $argN
//   (1-based, at an entry or a return),
//   $retval (return), $stack, $stackN, $comm, @ADDR, @SYM[+|-OFF], +|-[u]OFF(FETCH), \IMM;
//   %xmm0 .. %xmm15 (the low 8 bytes: :f64, :f32 read them as numbers);
//   TYPE: u8..u64, s8..s64, x8..x64 (the default: x64), f32, f64, string ($comm's default), raw
//   (the 64 bits, said raw: what a call without DWARF shows), or
//   {DESC}: a type from DWARF (trace/value_type.hpp), which a parameter by name and $retval get
//   when no TYPE is given and the function has DWARF.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <memory>
#include <vector>

#include "trace/value_type.hpp"

namespace liveprobe::trace {

enum class SpecKind : uint8_t {
    call,   // FUNC: entry and return, the return value and the duration
    probe,  // FUNC+OFF, p:: at an instruction
    ret,    // r:: at the return
};

enum class FetchBase : uint8_t {
    reg,      // a register: `reg` is its index in struct pt_regs (8-byte fields)
    arg,      // $argN: `n` (1-based)
    retval,   // $retval
    stack,    // $stack: the stack pointer
    stack_n,  // $stackN: the Nth 8-byte word above the stack pointer
    comm,     // $comm: the thread's name
    imm,      // \IMM or @ADDR's address: `value`
    symbol,   // @SYM: the address of `symbol`, resolved in the target
    param,    // a parameter by name (`symbol`), from the function's DWARF: becomes an arg
    xmm,      // %xmmN: `n`
};

enum class FetchType : uint8_t { u8, u16, u32, u64, s8, s16, s32, s64, x8, x16, x32, x64, string, f32, f64, raw, typed };

struct FetchArg {
    std::string name;  // NAME, or argI (1-based) by default
    FetchBase base = FetchBase::reg;
    FetchType type = FetchType::x64;
    uint32_t n = 0;                // register index, argument or stack word
    uint64_t value = 0;            // the immediate or address (symbol: resolved into it)
    std::string symbol;            // @SYM
    std::vector<int64_t> derefs;   // loads, innermost first: v = *(v + off)
    bool typed = false;            // :TYPE given (else a parameter's type comes from DWARF)
    std::string desc;              // FetchType::typed: the type's descriptor,
    std::shared_ptr<const VType> vt;  // and the type
    // FetchType::typed: where the value is (arch::ValueClass: which registers, or memory),
    // and its image's bytes (image_bytes).
    uint8_t home = 0;
    uint32_t image = 0;
};

struct Spec {
    std::string text;   // as given
    SpecKind kind = SpecKind::call;
    std::string event;  // GRP/EVENT when given, else empty
    std::string target; // the function or glob
    uint64_t offset = 0;
    int maxactive = 0;  // r<N>: when given
    std::vector<FetchArg> args;
};

// Parses one spec. false with *error ("what is wrong") and *at (its byte offset in text).
bool parse_spec(const std::string &text, Spec *out, std::string *error, size_t *at);

// The spec as text that parse_spec() reads back the same (symbols and parameters as resolved
// into immediates and arguments).
std::string to_text(const Spec &spec);

// Why the spec cannot be traced in --count (count) or --hist (hist) mode, or empty.
std::string mode_conflict(const Spec &spec, bool count, bool hist);

// True when fetching the spec's values reads the thread's vector or x87 registers: its probes
// are registered with KPROBE_FLAG_FPREGS.
bool needs_fpregs(const Spec &spec);

// The bytes an argument takes in the payload: 8, or kStringBytes for a string or a typed value
// larger than 8 bytes (cut to fit).
size_t arg_bytes(const FetchArg &a);

// A call's (FUNC's) return value goes in its record's retval alone (8 bytes, no payload): a
// spec without $retval (the raw rax), or with one of a type that rax holds whole.
bool retval_in_record(const Spec &spec);

// The message for a spec that did not parse: the spec, then a caret under the mistake.
std::string point_at(const std::string &text, size_t at, const std::string &error);

// How the fetched values of an event are laid out after its record's first 32 bytes: a 64-bit
// mask of the arguments that could not be read, then each argument's bytes in order: 8 for a
// number, kStringBytes for a string (NUL-terminated, cut to fit).
constexpr size_t kStringBytes = 64;
constexpr size_t kMaxFetchArgs = 16;
constexpr size_t kMaxPayload = 8 + kMaxFetchArgs * kStringBytes;
size_t payload_bytes(const Spec &spec);
// The bytes of values an event of this spec carries after its record: payload_bytes, or none
// for a call (FUNC) whose return value its record holds.
inline size_t event_bytes(const Spec &spec)
{
    return spec.kind == SpecKind::call && retval_in_record(spec) ? 0 : payload_bytes(spec);
}
size_t arg_offset(const Spec &spec, size_t i);  // in the payload

// One fetched value as text: decimal (u, s), 0x-hex (x), a quoted string, or a typed value as
// trace/value_type.hpp writes it; "(fault)" when it could not be read. JSON: a JSON value.
std::string format_value(const FetchArg &arg, const unsigned char *bytes, bool fault);
std::string format_value_json(const FetchArg &arg, const unsigned char *bytes, bool fault);

const char *type_name(FetchType t);

}  // namespace liveprobe::trace
