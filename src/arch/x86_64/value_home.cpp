#include "arch/x86_64/value_home.hpp"

namespace liveprobe::arch {
namespace {

enum Eight : uint8_t { kNone, kInteger, kSse, kMemory };

Eight merge(Eight a, Eight b)
{
    if (a == b || b == kNone) return a;
    if (a == kNone) return b;
    if (a == kMemory || b == kMemory) return kMemory;
    if (a == kInteger || b == kInteger) return kInteger;
    return kSse;
}

// Merges the class of each scalar of t, at `offset` in the value, into its eightbyte's.
void walk(const trace::VType &t, uint32_t offset, Eight eight[2])
{
    using trace::VKind;
    auto put = [&](Eight c) {
        const uint32_t i = offset / 8;
        if (i < 2) eight[i] = merge(eight[i], c);
        if (t.size > 8 && i + 1 < 2 && t.kind != VKind::record && t.kind != VKind::array)
            eight[i + 1] = merge(eight[i + 1], c);  // a 16-byte scalar (__int128) takes both
    };
    switch (t.kind) {
    case VKind::void_: return;
    case VKind::floating:
        put(t.size == 16 ? kMemory : kSse);
        return;
    case VKind::record:
        for (const trace::VType::Field &f : t.fields) {
            if ((f.offset % (f.type->size >= 8 ? 8 : f.type->size ? f.type->size : 1)) != 0) put(kMemory);  // unaligned
            walk(*f.type, offset + f.offset, eight);
        }
        return;
    case VKind::array:
        for (uint32_t k = 0; k < t.count && k < 16; ++k) walk(*t.of, offset + k * t.of->size, eight);
        return;
    case VKind::reference:  // the referent's address
        eight[offset / 8 < 2 ? offset / 8 : 1] = merge(eight[offset / 8 < 2 ? offset / 8 : 1], kInteger);
        return;
    default:
        put(kInteger);
        return;
    }
}

}  // namespace

ValueClass classify(const trace::VType &t)
{
    using trace::VKind;
    if (t.kind == VKind::void_) return ValueClass::none;
    if (t.kind == VKind::reference || t.kind == VKind::string || t.kind == VKind::pointer) return ValueClass::integer;
    if (t.kind == VKind::floating && t.size == 16) return ValueClass::x87;
    if (t.kind == VKind::record && t.by_reference) return ValueClass::memory;  // psABI 3.2.3, C++'s
    const uint32_t size = t.size;
    if (size == 0 || size > 16) return ValueClass::memory;
    Eight eight[2] = {kNone, kNone};
    walk(t, 0, eight);
    // A record the descriptor left members out of (bit fields): what is not known is INTEGER,
    // as a bit field would be.
    if (eight[0] == kNone) eight[0] = kInteger;
    if (size > 8 && eight[1] == kNone) eight[1] = kInteger;
    if (eight[0] == kMemory || eight[1] == kMemory) return ValueClass::memory;
    if (size <= 8) return eight[0] == kSse ? ValueClass::sse : ValueClass::integer;
    if (eight[0] == kInteger) return eight[1] == kInteger ? ValueClass::int_int : ValueClass::int_sse;
    return eight[1] == kInteger ? ValueClass::sse_int : ValueClass::sse_sse;
}

}  // namespace liveprobe::arch
