// Fuzzing the probe-spec parser (trace/spec.hpp, issue 32 item 4): any text is read or refused
// with a position inside it, never a crash or undefined behaviour; a spec it reads comes back
// the same through to_text (what the agent writes into a session and the tool reads back); its
// values, typed ones included, format from any bytes.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "trace/spec.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    using namespace liveprobe::trace;
    const std::string text(reinterpret_cast<const char *>(data), size);
    Spec s;
    std::string error;
    size_t at = 0;
    if (!parse_spec(text, &s, &error, &at)) {
        if (at > text.size() || error.empty()) std::abort();
        return 0;
    }
    const std::string once = to_text(s);
    Spec again;
    if (!parse_spec(once, &again, &error, &at)) {
        std::fprintf(stderr, "'%s' is read, but its text '%s' is not: %s\n", text.c_str(), once.c_str(), error.c_str());
        std::abort();
    }
    if (to_text(again) != once) {
        std::fprintf(stderr, "'%s' -> '%s' -> '%s'\n", text.c_str(), once.c_str(), to_text(again).c_str());
        std::abort();
    }
    // Each value as the tool shows it, from bytes of the input (a typed one's image: read within
    // its room, whatever its descriptor says).
    unsigned char bytes[kStringBytes] = {};
    for (size_t i = 0; i < sizeof bytes && i < size; ++i) bytes[i] = data[size - 1 - i];
    for (const FetchArg &a : s.args) {
        format_value(a, bytes, false);
        format_value_json(a, bytes, false);
    }
    return 0;
}
