// Fuzzing the control protocol's parsing (agent/channel.hpp, issue 32 item 4), what the agent
// reads from every client: any line is a request or refused with a reason, never a crash; any
// bytes, as an argument, come back the same through encode_arg and decode_arg; what the tool
// prints of a reply (escape_controls) holds no control character.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "agent/channel.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    using namespace liveprobe::agent;
    const std::string bytes(reinterpret_cast<const char *>(data), size);
    Request rq;
    std::string why;
    if (!parse_request(bytes, &rq, &why) && why.empty()) std::abort();
    if (decode_arg(encode_arg(bytes)) != bytes) std::abort();
    const std::string encoded = encode_arg(bytes);
    for (unsigned char c : encoded)
        if (c <= 0x20 || c == 0x7f) std::abort();  // an argument is one word of the line
    for (unsigned char c : escape_controls(bytes))
        if ((c < 0x20 && c != '\t') || c == 0x7f) std::abort();
    return 0;
}
