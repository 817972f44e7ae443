// Symbols of every object loaded in this process: name -> address resolution with the rules of
// API.md "Symbol names", and address -> function bounds for the instruction-boundary check.
//
// Sources: each object's .symtab and .dynsym read from its file on disk (and its separate debug
// file under /usr/lib/debug/.build-id when present), function bounds from symbol sizes and,
// where symbols are missing or sizeless, from .eh_frame FDEs. liveprobe's own object and the
// vDSO are never searched by name. Thread-safe (an internal mutex); not async-signal-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace liveprobe::symbols {

// Resolves `spec`:
//   "name"         the main program first (a single definition there wins), else exactly one
//                  definition among the other loaded objects;
//   "OBJECT:name"  one object only, by its file's base name with or without version suffix
//                  (libz.so.1.2.13, libz.so.1, libz.so, libz), or the main program's base name;
//   names may be mangled or demangled C++ ("ns::Widget::spin(int)", or "ns::Widget::spin"
//   when only one overload exists), versioned symbols match by base name (the default
//   version), and an IFUNC resolves to the implementation selected in this process.
// Returns 0 and sets *addr, or -ENOENT (unknown; *why names what was searched) or -EINVAL
// (malformed spec, or ambiguous: *why lists every candidate as "OBJECT:name at 0xADDR").
int resolve(std::string_view spec, uint64_t* addr, std::string* why);

struct Function {
    uint64_t start = 0;
    uint64_t end = 0;    // one past the last byte
    std::string name;    // symbol name (mangled as in the file); empty when from an FDE only
    std::string object;  // path of the object file
    bool from_eh_frame = false;
    // [start, end) of the function's cold parts: the sized functions named NAME.cold in the
    // same object (GCC moves unlikely code there; it jumps back into the function).
    std::vector<std::pair<uint64_t, uint64_t>> cold;
};

// The function containing addr, from symbols or FDEs; nullopt when none is known.
std::optional<Function> function_at(uint64_t addr);

// The end of f's alignment padding: [f.end, the result) belongs to no function (no symbol
// starts there, no FDE covers it), up to the next 16-byte boundary; f.end when f's bounds come
// from an FDE, or nothing follows it. What the bytes hold is the caller's to check.
uint64_t padding_end(const Function &f);

// Whether a symbol name (as in the file, or demangled) names a part GCC split out of a function
// ("NAME.cold", "NAME.cold.3", "f(int) [clone .cold]"): code the function jumps to from
// inside, never called. Clones ("NAME.part.0", ".isra.0", ".constprop.0") are functions.
bool is_cold_part(std::string_view name);

// Whether a function of this name (as in the file) returns twice to its caller: the C
// library's setjmp family, vfork (the child returns first, on the parent's stack), getcontext.
// A return probe takes the first return's record, and the second finds none.
bool returns_twice(std::string_view name);

// Whether addr is a function's entry as a return probe needs it, the return address at the
// stack pointer: 1 yes (the call frame information says CFA = rsp + 8 there); 0 no, with *why
// (a cold part, or the CFA elsewhere: inside a function's frame); -1 unknown (no FDE covers
// it, and no cold part's symbol starts there).
int function_entry(uint64_t addr, std::string *why);

// Whether the call frame information at `site` puts the frame's return address in register
// `dwarf_reg` (x86-64 DWARF numbering): a `jmp *%REG` there is a return (arch::JumpIsReturn).
bool jump_is_return(uint64_t site, int dwarf_reg);

// Whether the data of the object holding [from, to) stores an address inside that range (a
// pointer a jump could load; ElfObject::stores_code_address): 1 it does, 0 it does not, -1
// not known (no object there, or one that cannot be read).
int code_address_stored(uint64_t from, uint64_t to);

// Whether `object` (a spec's OBJECT) names liveprobe's own library, loaded in this process:
// never traced (its code runs the probes).
bool object_is_own(std::string_view object);

// Whether an object of this process is named `object` (as resolve()'s OBJECT: base name, with or
// without version suffix).
bool object_loaded(std::string_view object);
// How many objects the dynamic loader has loaded so far (dlpi_adds): it moves at each dlopen.
unsigned long long load_count();

// The object file mapped at addr: what to open (/proc/self/exe for the main program), its path
// and its load bias (runtime address = bias + file address). false when none is.
bool object_at(uint64_t addr, std::string *open_path, std::string *path, uint64_t *bias);

// The symbol the PLT jump slot at runtime address `got` binds to ("" if none is known).
std::string jump_slot_symbol(uint64_t got);

// "name+0xOFF" (or "OBJECT+0xOFF" without a symbol, or "0xADDR" when unmapped), for messages.
std::string describe(uint64_t addr);

// The functions a glob names, for tracers: "GLOB" matches the main program's functions,
// "OBJECT:GLOB" those of one object (OBJECT as in resolve(); liveprobe's own object never). A
// name matches by its symbol name (without "@VERSION") or its demangled name. Sized FUNC
// symbols only (an IFUNC's resolver is not the function), one per address (the best alias),
// without _start, _init and _fini, and not a function's cold part nor any symbol where the
// call frame information says the return address is not at the stack pointer (function_entry);
// sorted by address. -EINVAL (malformed) or -ENOENT (no such
// object) with *why; an empty result is not an error.
struct Match {
    uint64_t addr = 0;
    uint64_t size = 0;
    std::string name;  // as resolve() takes it back: "name" in the main program, else "OBJECT:name"
};
int match(std::string_view pattern, std::vector<Match> *out, std::string *why);

// For printk's %pS and dump_stack: "name+0xOFF/0xSIZE" (with_offset) or "name", followed by
// " [object]" when the function is not the main program's (object: its file's base name, without
// ".so" when it ends so, like the kernel's module names). `return_address`: addr is a return
// address, looked up at addr - 1 (the call may be a function's last instruction). Writes at
// most n bytes (no NUL) and returns how many; 0 when the address has no known function, or when
// the symbol tables stay busy for 50 ms (their lock is taken with a timeout: a handler that
// interrupted a lookup on its own thread does not wait for itself forever).
size_t symbolize(uint64_t addr, bool with_offset, bool return_address, char* buf, size_t n);

// Drops the cached tables (and so the open file and its mapping) of objects no longer loaded,
// at once rather than at the next lookup: after a dlclose that must leave nothing behind.
void forget_unloaded();

// Drops every cached table (objects may have been loaded or unloaded). Cheap; the next
// call rereads what it needs. Callers need not call it: the caches notice dlopen/dlclose.
void invalidate();

// Around fork(): the registry's atfork handlers take the symbols mutex after its own (the
// order every lookup under the registry mutex takes them), so the child never inherits it
// held by a thread that does not exist there.
void lock_for_fork();
void unlock_after_fork();

}  // namespace liveprobe::symbols
