// vector_free (region.hpp): may a detour skip saving the vector and x87 state around a handler?
//
// Only a proof counts: every instruction of the handler and of what it calls directly is
// decoded with all its operands, hidden ones included (Zydis lists the implicit xmm0 of
// pblendvb, the x87 status word of fld1, MXCSR of ldmxcsr), and anything that could reach code
// not decoded here (an indirect call or jump, a PLT stub, a call deeper than allowed) makes
// the answer "not proven".
//
// Each function's own scan is cached by its start address (validated against its bounds and
// object on every use, so an object unloaded and another loaded at the same place is scanned
// again); the walk over calls is redone per query from those scans, which is cheap. Reasons
// are interned for the life of the process so the pointers handed out stay valid.
#include <dlfcn.h>

#include <cinttypes>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <liveprobe/ktime.h>

#include "arch/x86_64/call_keeping.hpp"
#include "arch/x86_64/region.hpp"
#include "core/immortal.hpp"
#include "os/linux/clock.hpp"
#include "symbols/symbols.hpp"

namespace liveprobe::arch {

namespace {

// A branch leaving the function: a call, or a jmp/jcc to elsewhere (a tail call, or a jump
// into the function's cold part).
struct Edge {
    uint64_t site;
    uint64_t target;
    bool call;
};

// One function's own verdict, calls not followed.
struct Scan {
    uint64_t end = 0;
    std::string object;
    std::string name;
    const char *why = nullptr;  // nullptr: the function itself is vector-free
    uint32_t writes = 0;        // the general registers its instructions write (gpr_bit)
    std::vector<Edge> edges;
};

// Guards g_scans and g_reasons. Never held while calling into symbols:: (which has its own
// mutex, taken by the registry's fork handlers), so the two are never nested.
std::mutex g_mutex;
core::Immortal<std::map<uint64_t, std::shared_ptr<const Scan>>> g_scans_storage;
core::Immortal<std::set<std::string>> g_reasons_storage;
std::map<uint64_t, std::shared_ptr<const Scan>> &g_scans = g_scans_storage.value;  // by function start
std::set<std::string> &g_reasons = g_reasons_storage.value;  // interned reasons; never erased

std::string hex(uint64_t v) {
    char buf[24];
    std::snprintf(buf, sizeof buf, "0x%" PRIx64, v);
    return buf;
}

bool vector_class(ZydisRegister r) {
    switch (ZydisRegisterGetClass(r)) {
        case ZYDIS_REGCLASS_XMM:
        case ZYDIS_REGCLASS_YMM:
        case ZYDIS_REGCLASS_ZMM:
        case ZYDIS_REGCLASS_MASK:
        case ZYDIS_REGCLASS_MMX:
        case ZYDIS_REGCLASS_X87:
        case ZYDIS_REGCLASS_TMM:
            return true;
        default:
            break;
    }
    // Control and status registers of the same state, which have no class of their own.
    switch (r) {
        case ZYDIS_REGISTER_MXCSR:
        case ZYDIS_REGISTER_X87CONTROL:
        case ZYDIS_REGISTER_X87STATUS:
        case ZYDIS_REGISTER_X87TAG:
            return true;
        default:
            return false;
    }
}

// Instructions that touch the state without naming a register of it (vzeroupper, emms,
// fxsave, ldmxcsr, xsave, tilerelease, fwait) are caught by category. A few SSE-category
// instructions work on general registers only (crc32, popcnt) and are let through; the
// SSE-era instructions of other categories (fences, prefetch, movnti, clflush) touch no
// vector state and are not matched here at all.
bool vector_category(const ZydisDecodedInstruction &zi) {
    switch (zi.meta.category) {
        case ZYDIS_CATEGORY_SSE:
            return zi.mnemonic != ZYDIS_MNEMONIC_CRC32 && zi.mnemonic != ZYDIS_MNEMONIC_POPCNT;
        case ZYDIS_CATEGORY_AVX:
        case ZYDIS_CATEGORY_AVX2:
        case ZYDIS_CATEGORY_AVX2GATHER:
        case ZYDIS_CATEGORY_AVX512:
        case ZYDIS_CATEGORY_AVX512_4FMAPS:
        case ZYDIS_CATEGORY_AVX512_4VNNIW:
        case ZYDIS_CATEGORY_AVX512_BITALG:
        case ZYDIS_CATEGORY_AVX512_VBMI:
        case ZYDIS_CATEGORY_AVX512_VP2INTERSECT:
        case ZYDIS_CATEGORY_KMASK:
        case ZYDIS_CATEGORY_MMX:
        case ZYDIS_CATEGORY_AMD3DNOW:
        case ZYDIS_CATEGORY_X87_ALU:
        case ZYDIS_CATEGORY_FCMOV:
        case ZYDIS_CATEGORY_XSAVE:
        case ZYDIS_CATEGORY_XSAVEOPT:
        case ZYDIS_CATEGORY_AMX_TILE:
        case ZYDIS_CATEGORY_FMA4:
        case ZYDIS_CATEGORY_XOP:
        case ZYDIS_CATEGORY_VFMA:
        case ZYDIS_CATEGORY_FP16:
        case ZYDIS_CATEGORY_KNC:
        case ZYDIS_CATEGORY_KNCMASK:
        case ZYDIS_CATEGORY_KNCSCALAR:
            return true;
        default:
            break;
    }
    switch (zi.meta.isa_ext) {
        case ZYDIS_ISA_EXT_X87:
        case ZYDIS_ISA_EXT_MMX:
        case ZYDIS_ISA_EXT_AMD3DNOW:
        case ZYDIS_ISA_EXT_AVX:
        case ZYDIS_ISA_EXT_AVX2:
        case ZYDIS_ISA_EXT_AVX2GATHER:
        case ZYDIS_ISA_EXT_AVX512EVEX:
        case ZYDIS_ISA_EXT_AVX512VEX:
        case ZYDIS_ISA_EXT_AVXAES:
        case ZYDIS_ISA_EXT_AVX_VNNI:
        case ZYDIS_ISA_EXT_AMX_BF16:
        case ZYDIS_ISA_EXT_AMX_INT8:
        case ZYDIS_ISA_EXT_AMX_TILE:
        case ZYDIS_ISA_EXT_F16C:
        case ZYDIS_ISA_EXT_FMA:
        case ZYDIS_ISA_EXT_FMA4:
        case ZYDIS_ISA_EXT_XOP:
        case ZYDIS_ISA_EXT_XSAVE:
        case ZYDIS_ISA_EXT_XSAVEC:
        case ZYDIS_ISA_EXT_XSAVEOPT:
        case ZYDIS_ISA_EXT_XSAVES:
        case ZYDIS_ISA_EXT_KNC:
        case ZYDIS_ISA_EXT_KNCE:
        case ZYDIS_ISA_EXT_KNCV:
            return true;
        default:
            return false;
    }
}

// The general registers an instruction writes, explicit or hidden operands (cpuid's rbx, div's
// rdx, syscall's rcx and r11, rep movs's rsi, rdi and rcx), as gpr_bit masks; a write to a
// part (eax, bl) counts for the whole register. rsp is left out: every function gives it back,
// and a resumed thread gets it from its detour.
uint32_t written_gprs(const ZydisDecodedInstruction &zi, const ZydisDecodedOperand *ops) {
    uint32_t m = 0;
    for (size_t i = 0; i < zi.operand_count; ++i) {
        const ZydisDecodedOperand &op = ops[i];
        if (op.type != ZYDIS_OPERAND_TYPE_REGISTER || !(op.actions & ZYDIS_OPERAND_ACTION_MASK_WRITE)) continue;
        m |= gpr_bit(op.reg.value);
    }
    return m & ~gpr_bit(ZYDIS_REGISTER_RSP);
}

std::string where(const std::string &name, uint64_t start, uint64_t at) {
    if (name.empty()) return symbols::describe(at);
    return name + "+" + hex(at - start);
}

// Decodes [f.start, f.end) in place. The code is mapped (function_at found it in a loaded
// object), and liveprobe's own int3s would only make the answer more conservative.
Scan scan(const symbols::Function &f) {
    Scan s;
    s.end = f.end;
    s.object = f.object;
    s.name = f.name;
    ZydisDecoder dec;
    ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
    const auto *code = reinterpret_cast<const uint8_t *>(f.start);
    for (uint64_t at = f.start; at < f.end;) {
        ZydisDecodedInstruction zi;
        ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
        if (!ZYAN_SUCCESS(
                ZydisDecoderDecodeFull(&dec, code + (at - f.start), f.end - at, &zi, ops))) {
            s.why = intern_reason("undecodable bytes at " + where(f.name, f.start, at));
            return s;
        }
        const std::string mnemonic = ZydisMnemonicGetString(zi.mnemonic);
        if (zi.mnemonic == ZYDIS_MNEMONIC_INT3) {
            // A breakpoint (maybe liveprobe's own) hides the instruction under it.
            s.why = intern_reason("int3 at " + where(f.name, f.start, at) +
                           " (a breakpoint hides the instruction under it)");
            return s;
        }
        bool vec = vector_category(zi);
        for (size_t i = 0; i < zi.operand_count && !vec; ++i) {
            const ZydisDecodedOperand &op = ops[i];
            if (op.type == ZYDIS_OPERAND_TYPE_REGISTER) vec = vector_class(op.reg.value);
            // vsib indexes (gathers) are vector registers inside a memory operand.
            if (op.type == ZYDIS_OPERAND_TYPE_MEMORY)
                vec = vector_class(op.mem.base) || vector_class(op.mem.index);
        }
        if (vec) {
            s.why = intern_reason(mnemonic + " at " + where(f.name, f.start, at));
            return s;
        }
        s.writes |= written_gprs(zi, ops);

        if (zi.meta.branch_type != ZYDIS_BRANCH_TYPE_NONE) {
            const bool call = zi.mnemonic == ZYDIS_MNEMONIC_CALL;
            if (zi.meta.branch_type == ZYDIS_BRANCH_TYPE_FAR) {
                s.why = intern_reason("far " + mnemonic + " at " + where(f.name, f.start, at));
                return s;
            }
            const ZydisDecodedOperand *op0 = zi.operand_count_visible > 0 ? &ops[0] : nullptr;
            if (op0 && op0->type == ZYDIS_OPERAND_TYPE_IMMEDIATE && op0->imm.is_relative) {
                ZyanU64 target = 0;
                if (!ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(&zi, op0, at, &target))) {
                    s.why =
                        intern_reason("unresolvable " + mnemonic + " at " + where(f.name, f.start, at));
                    return s;
                }
                if (call || target < f.start || target >= f.end)
                    s.edges.push_back({at, target, call});
            } else if (zi.mnemonic != ZYDIS_MNEMONIC_RET) {
                // Bounds without a name come from an FDE: the linker writes one for .plt.
                s.why =
                    intern_reason("indirect " + std::string(call ? "call" : "jump") + " at " +
                           where(f.name, f.start, at) +
                           (f.name.empty() ? " (cannot follow; a PLT stub?)" : " (cannot follow)"));
                return s;
            }
        }
        at += zi.length;
    }
    return s;
}

// f's scan, from the cache or made now (outside the mutex: decoding a large function takes a
// while, and two threads scanning the same one at once only waste work). Scans are immutable
// once published; one is replaced only when a different object now lies at the same address.
std::shared_ptr<const Scan> scan_of(const symbols::Function &f) {
    {
        std::lock_guard lock(g_mutex);
        auto it = g_scans.find(f.start);
        if (it != g_scans.end() && it->second->end == f.end && it->second->object == f.object)
            return it->second;
    }
    auto s = std::make_shared<const Scan>(scan(f));
    std::lock_guard lock(g_mutex);
    g_scans[f.start] = s;
    return s;
}

// "f.cold" and "f" (or "f.cold.3" and "f") are one function split by GCC: a jump between them
// stays in the function and does not use up a level.
bool same_function(const std::string &a, const std::string &b) {
    auto split_of = [](const std::string &part, const std::string &whole) {
        return part.size() > whole.size() && part.compare(0, whole.size(), whole) == 0 &&
               part.compare(whole.size(), 5, ".cold") == 0;
    };
    return !a.empty() && !b.empty() && (split_of(a, b) || split_of(b, a));
}

// liveprobe's own API functions that handlers call and that are vector-free by construction,
// beyond what decoding can show: liveprobe_ktime_ns() and the slow path of os::clock::tsc_ns
// (slow_ns) are built with -mgeneral-regs-only
// (checked by tests/scripts/novec_check.sh) and calls only the vDSO's clock_gettime, kernel
// code built without FPU use, through a pointer.
// lp_call_keeping (call_keeping.hpp) too: its callers call only vector-free functions through
// it, and it writes only rax, rdx, rsi and rdi.
bool declared_vector_free(uint64_t start) {
    return start == reinterpret_cast<uint64_t>(&liveprobe_ktime_ns) ||
           start == reinterpret_cast<uint64_t>(&os::clock::slow_ns) ||  // the same file's (tsc_ns)
           start == reinterpret_cast<uint64_t>(&lp_call_keeping);
}

// What a declared function writes: whatever the ABI lets a function clobber, but for
// lp_call_keeping.
uint32_t declared_writes(uint64_t start) {
    return start == reinterpret_cast<uint64_t>(&lp_call_keeping) ? kCallKeepingWrites : kCallerSavedGprs;
}

// Functions already proven or being proven. Depth is only a budget: the walk stops at the first
// failure, so every function in here is either proven with all it reaches, or still being
// proven (a recursive call), and reaching it again by another path adds nothing.
using Seen = std::set<uint64_t>;

// nullptr when f and what it reaches within `depth` levels are vector-free; else the reason.
// *writes gets the general registers they write (complete only when nullptr is returned).
const char *prove(const symbols::Function &f, int depth, Seen *seen, uint32_t *writes) {
    seen->insert(f.start);
    if (declared_vector_free(f.start)) {
        // Not decoded: what it is declared to write (it cannot fault).
        *writes |= declared_writes(f.start);
        return nullptr;
    }
    const std::shared_ptr<const Scan> s = scan_of(f);
    if (s->why) return s->why;
    *writes |= s->writes;
    for (const Edge &e : s->edges) {
        // A call into the function itself: its code is the code just scanned.
        if (e.target >= f.start && e.target < f.end) continue;
        const std::string site = where(f.name, f.start, e.site);
        const char *what = e.call ? "call" : "jump";
        std::optional<symbols::Function> g = symbols::function_at(e.target);
        // A call through the PLT: to what the stub jumps to, at no cost of a level.
        if (!g || g->name.empty()) {
            if (uint64_t t = plt_target(e.target)) {
                std::optional<symbols::Function> h = symbols::function_at(t);
                if (h && !h->name.empty()) {
                    g = h;
                    // The dynamic linker's lazy binding may run first: it keeps the arguments
                    // and the callee-saved registers, and may clobber the others.
                    *writes |= kCallerSavedGprs;
                }
            }
        }
        if (!g)
            return intern_reason(std::string(what) + " at " + site + " to " + symbols::describe(e.target) +
                          ": no function bounds known there (a PLT stub?)");
        if (seen->count(g->start)) continue;
        int left = depth;
        if (e.call || !same_function(f.name, g->name)) {
            if (depth == 0)
                return intern_reason(std::string(what) + " at " + site + " to " +
                              symbols::describe(e.target) + ": deeper than the levels followed");
            left = depth - 1;
        }
        if (const char *why = prove(*g, left, seen, writes))
            return intern_reason(std::string(why) + ", reached through the " + what + " at " + site);
    }
    return nullptr;
}

}  // namespace

const char *intern_reason(std::string s) {
    std::lock_guard lock(g_mutex);
    return g_reasons.insert(std::move(s)).first->c_str();
}

// Where a PLT stub at `at` leads: it is `[endbr64;] [bnd] jmp *GOT(%rip)` (.plt.sec, .plt.got,
// or .plt without IBT). The GOT slot holds the function once bound; before the first call it
// points back into the PLT, and the function is the one the dynamic linker will bind: the
// symbol of the slot's JUMP_SLOT relocation, looked up in the global scope. 0 when `at` is
// not a stub or its target is unknown.
uint64_t plt_target(uint64_t at) {
    ZydisDecoder dec;
    ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
    for (int i = 0; i < 2; ++i) {
        ZydisDecodedInstruction zi;
        ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
        if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(&dec, reinterpret_cast<const void *>(at), 16, &zi, ops)))
            return 0;
        if (zi.mnemonic == ZYDIS_MNEMONIC_ENDBR64) {
            at += zi.length;
            continue;
        }
        if (zi.mnemonic != ZYDIS_MNEMONIC_JMP || ops[0].type != ZYDIS_OPERAND_TYPE_MEMORY ||
            ops[0].mem.base != ZYDIS_REGISTER_RIP || ops[0].mem.index != ZYDIS_REGISTER_NONE)
            return 0;
        uint64_t got = at + zi.length + static_cast<uint64_t>(ops[0].mem.disp.value);
        uint64_t bound = *reinterpret_cast<const volatile uint64_t *>(got);
        std::optional<symbols::Function> b = symbols::function_at(bound);
        if (b && !b->name.empty()) return bound;  // bound (or BIND_NOW)
        std::string name = symbols::jump_slot_symbol(got);
        if (name.empty()) return 0;
        return reinterpret_cast<uint64_t>(dlsym(RTLD_DEFAULT, name.c_str()));
    }
    return 0;
}

bool vector_free(uint64_t entry, int depth, const char **why, uint32_t *writes) {
    std::optional<symbols::Function> f = symbols::function_at(entry);
    const char *reason = nullptr;
    uint32_t w = 0;
    if (!f) {
        reason = intern_reason("no bounds for " + symbols::describe(entry));
    } else {
        Seen seen;
        reason = prove(*f, depth < 0 ? 0 : depth, &seen, &w);
    }
    if (why) *why = reason;
    if (writes) *writes = reason ? kAllGprs : w;
    return reason == nullptr;
}

uint32_t gpr_bit(ZydisRegister r) {
    ZydisRegister big = ZydisRegisterGetLargestEnclosing(ZYDIS_MACHINE_MODE_LONG_64, r);
    if (big < ZYDIS_REGISTER_RAX || big > ZYDIS_REGISTER_R15) return 0;
    return 1u << (big - ZYDIS_REGISTER_RAX);
}

uint32_t function_writes(uint64_t entry) {
    std::optional<symbols::Function> f = symbols::function_at(entry);
    if (!f) return kAllGprs;
    const std::shared_ptr<const Scan> s = scan_of(*f);
    if (s->why) {
        // Only its indirect calls and jumps may have stopped the scan (the dispatcher jumps
        // to handlers through a pointer): decode on past them here. The code is decoded in
        // address order over the whole function, so a jump table's targets are covered too.
        uint32_t m = 0;
        ZydisDecoder dec;
        ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
        for (uint64_t at = f->start; at < f->end;) {
            ZydisDecodedInstruction zi;
            ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
            if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(&dec, reinterpret_cast<const void *>(at), f->end - at, &zi, ops)))
                return kAllGprs;
            if (zi.meta.branch_type != ZYDIS_BRANCH_TYPE_NONE && ops[0].type == ZYDIS_OPERAND_TYPE_IMMEDIATE &&
                zi.mnemonic != ZYDIS_MNEMONIC_CALL) {
                const uint64_t to = at + zi.length + static_cast<uint64_t>(ops[0].imm.value.s);
                if (to < f->start || to >= f->end) return kAllGprs;  // a direct jump elsewhere
            }
            // A direct call may clobber what the ABI allows; a call or a jump through a pointer
            // is the handler's, whose registers are proven apart.
            if (zi.mnemonic == ZYDIS_MNEMONIC_CALL && ops[0].type == ZYDIS_OPERAND_TYPE_IMMEDIATE)
                m |= kCallerSavedGprs;
            m |= written_gprs(zi, ops);
            at += zi.length;
        }
        return m;
    }
    uint32_t m = s->writes;
    if (!s->edges.empty()) m |= kCallerSavedGprs;  // what it calls may clobber what the ABI allows
    return m;
}

}  // namespace liveprobe::arch
