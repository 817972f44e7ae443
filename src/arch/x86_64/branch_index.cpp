#include "arch/x86_64/branch_index.hpp"

#include <Zydis/Zydis.h>

#include <algorithm>

namespace liveprobe::arch {

std::vector<uint64_t> direct_branch_targets(uint64_t start, const uint8_t *code, size_t len)
{
    ZydisDecoder dec;
    ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
    // Minimal mode: lengths and raw immediates are all this needs, and it is much faster.
    ZydisDecoderEnableMode(&dec, ZYDIS_DECODER_MODE_MINIMAL, ZYAN_TRUE);
    std::vector<uint64_t> out;
    ZydisDecodedInstruction in;
    for (size_t off = 0; off < len;) {
        if (!ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(&dec, nullptr, code + off, len - off, &in))) {
            ++off;
            continue;
        }
        if (in.raw.imm[0].is_relative) {
            int64_t rel = in.raw.imm[0].value.s;
            out.push_back(start + off + in.length + static_cast<uint64_t>(rel));
        }
        off += in.length;
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
}

}  // namespace liveprobe::arch
