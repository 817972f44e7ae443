#include "core/kret_debugger.hpp"

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include "core/kretprobe.hpp"
#include "os/linux/gdb_jit.hpp"

extern "C" char liveprobe_replaced_return[];

namespace liveprobe::core {
namespace {

// DWARF opcodes and call frame instructions used here.
enum : uint8_t {
    kOpAddr = 0x03,
    kOpDeref = 0x06,
    kOpDup = 0x12,
    kOpDrop = 0x13,
    kOpPick = 0x15,
    kOpSwap = 0x16,
    kOpMinus = 0x1c,
    kOpPlusUconst = 0x23,
    kOpBra = 0x28,
    kOpEq = 0x29,
    kOpSkip = 0x2f,
    kOpLit0 = 0x30,
    kOpLit8 = 0x38,
    kCfaDefCfa = 0x0c,
    kCfaValExpression = 0x16,
    kRegRsp = 7,
    kRegRip = 16,
};

struct Bytes {
    std::vector<uint8_t> b;
    void u8(uint8_t v) { b.push_back(v); }
    void uleb(uint64_t v)
    {
        do {
            uint8_t x = v & 0x7f;
            v >>= 7;
            b.push_back(v ? x | 0x80 : x);
        } while (v);
    }
    void u32(uint32_t v)
    {
        for (int i = 0; i < 4; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
    }
    void u64(uint64_t v)
    {
        for (int i = 0; i < 8; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
    }
    void plus(uint64_t n)
    {
        if (n == 0) return;
        u8(kOpPlusUconst);
        uleb(n);
    }
};

// A DWARF expression with forward and backward branches to labels.
struct Expr : Bytes {
    std::vector<size_t> labels;
    std::vector<std::pair<size_t, size_t>> fixups;  // operand position, label
    size_t label() { return labels.emplace_back(SIZE_MAX), labels.size() - 1; }
    void bind(size_t l) { labels[l] = b.size(); }
    void branch(uint8_t op, size_t l)
    {
        u8(op);
        fixups.emplace_back(b.size(), l);
        u8(0);
        u8(0);
    }
    void finish()
    {
        for (auto [at, l] : fixups) {
            auto rel = static_cast<int16_t>(static_cast<ptrdiff_t>(labels[l]) - static_cast<ptrdiff_t>(at + 2));
            b[at] = static_cast<uint8_t>(rel);
            b[at + 1] = static_cast<uint8_t>(static_cast<uint16_t>(rel) >> 8);
        }
    }
};

// The return address of a frame whose return slot holds the trampoline's address. The
// expression starts with the CFA (the slot + 8) on the stack and leaves the real return
// address, or 0 when no thread has a call in flight through that slot.
std::vector<uint8_t> real_return_address_expr()
{
    Expr e;
    size_t rec_loop = e.label(), rec_ok = e.label(), inst_loop = e.label(), inst_ok = e.label(),
           found = e.label(), end = e.label();
    e.u8(kOpLit8);
    e.u8(kOpMinus);  // [slot]
    e.u8(kOpAddr);
    e.u64(reinterpret_cast<uint64_t>(thread_list_head()));
    e.u8(kOpDeref);  // [slot, rec]
    e.bind(rec_loop);
    e.u8(kOpDup);
    e.branch(kOpBra, rec_ok);
    e.u8(kOpDrop);
    e.u8(kOpDrop);
    e.u8(kOpLit0);
    e.branch(kOpSkip, end);  // [0]
    e.bind(rec_ok);
    e.u8(kOpDup);
    e.plus(offsetof(ThreadRecord, ret_top));
    e.u8(kOpDeref);  // [slot, rec, inst]
    e.bind(inst_loop);
    e.u8(kOpDup);
    e.branch(kOpBra, inst_ok);
    e.u8(kOpDrop);
    e.plus(offsetof(ThreadRecord, next));
    e.u8(kOpDeref);  // [slot, next rec]
    e.branch(kOpSkip, rec_loop);
    e.bind(inst_ok);
    e.u8(kOpDup);
    e.plus(offsetof(Inst, slot));
    e.u8(kOpDeref);  // [slot, rec, inst, inst->slot]
    e.u8(kOpPick);
    e.u8(3);
    e.u8(kOpEq);
    e.branch(kOpBra, found);  // [slot, rec, inst]
    e.plus(offsetof(Inst, below));
    e.u8(kOpDeref);  // [slot, rec, below]
    e.branch(kOpSkip, inst_loop);
    e.bind(found);
    e.plus(sizeof(Inst) + offsetof(struct kretprobe_instance, ret_addr));
    e.u8(kOpDeref);  // [slot, rec, ret]
    e.u8(kOpSwap);
    e.u8(kOpDrop);
    e.u8(kOpSwap);
    e.u8(kOpDrop);  // [ret]
    e.bind(end);
    e.finish();
    return e.b;
}

// Pads a CIE or FDE body to a multiple of 8 bytes (with its length word) with DW_CFA_nop.
void pad(Bytes &entry)
{
    while ((entry.b.size() + 4) % 8) entry.u8(0);
}

std::vector<uint8_t> eh_frame(uint64_t addr)
{
    Bytes cie;
    cie.u32(0);  // CIE id
    cie.u8(1);   // version
    cie.u8('z');
    cie.u8('R');
    cie.u8(0);
    cie.uleb(1);     // code alignment
    cie.u8(0x78);    // data alignment -8 (SLEB128)
    cie.uleb(kRegRip);
    cie.uleb(1);     // augmentation data: the FDE pointer encoding
    cie.u8(0x00);    // DW_EH_PE_absptr
    cie.u8(kCfaDefCfa);
    cie.uleb(kRegRsp);
    cie.uleb(0);     // CFA = rsp: the stack pointer after the return
    pad(cie);

    Bytes fde;
    std::vector<uint8_t> expr = real_return_address_expr();
    fde.u32(static_cast<uint32_t>(4 + cie.b.size() + 4));  // back to the CIE
    fde.u64(addr);
    fde.u64(1);
    fde.uleb(0);  // no augmentation data
    fde.u8(kCfaValExpression);
    fde.uleb(kRegRip);
    fde.uleb(expr.size());
    fde.b.insert(fde.b.end(), expr.begin(), expr.end());
    pad(fde);

    Bytes out;
    out.u32(static_cast<uint32_t>(cie.b.size()));
    out.b.insert(out.b.end(), cie.b.begin(), cie.b.end());
    out.u32(static_cast<uint32_t>(fde.b.size()));
    out.b.insert(out.b.end(), fde.b.begin(), fde.b.end());
    return out.b;
}

}  // namespace

void describe_trampoline_to_debuggers()
{
    static std::once_flag once;
    std::call_once(once, [] {
        auto addr = reinterpret_cast<uint64_t>(liveprobe_replaced_return);
        os::gdb_jit_register("liveprobe_replaced_return", addr, 1, eh_frame(addr));
    });
}

}  // namespace liveprobe::core
