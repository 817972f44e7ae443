// Fuzzing insmod's NAME=VALUE parameters (agent/module_params.hpp, issue 32 item 4): a module
// declaring one parameter of each type, an array and a string among them, each inside guard
// bytes. Any argument sets a parameter or is refused with a message, never writes outside the
// variable it names (nor an array past its length), and leaves a charp a string of its own.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "agent/module_params.hpp"

#include <liveprobe/module.h>  // last: its kernel-style macros clash with the C++ headers

namespace {

struct Guarded {
    unsigned char before[16];
    unsigned char var[64];
    unsigned char after[16];
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    using liveprobe::agent::set_param;
    static const int kTypes[] = {LIVEPROBE_PARAM_INT,    LIVEPROBE_PARAM_UINT,    LIVEPROBE_PARAM_LONG,
                                 LIVEPROBE_PARAM_ULONG,  LIVEPROBE_PARAM_SHORT,   LIVEPROBE_PARAM_USHORT,
                                 LIVEPROBE_PARAM_BYTE,   LIVEPROBE_PARAM_ULLONG,  LIVEPROBE_PARAM_HEXINT,
                                 LIVEPROBE_PARAM_BOOL,   LIVEPROBE_PARAM_INVBOOL, LIVEPROBE_PARAM_CHARP};
    static const char *const kNames[] = {"i", "u", "l", "ul", "s", "us", "b", "ull", "hex", "on", "off", "cp"};
    constexpr size_t n = sizeof kTypes / sizeof kTypes[0];
    Guarded vars[n + 2];
    std::memset(vars, 0xa5, sizeof vars);
    unsigned int nump = 99;
    std::vector<liveprobe_module_param> decls(n + 2);
    std::vector<const liveprobe_module_param *> params;
    for (size_t i = 0; i < n; ++i)
        decls[i] = {sizeof(liveprobe_module_param), kNames[i], kTypes[i], vars[i].var, 0, nullptr, 0, 0444};
    decls[n] = {sizeof(liveprobe_module_param), "str", LIVEPROBE_PARAM_STRING, vars[n].var, 16, nullptr, 0, 0444};
    // int arr[4]: 16 of its 64 bytes.
    decls[n + 1] = {sizeof(liveprobe_module_param), "arr", LIVEPROBE_PARAM_INT, vars[n + 1].var, 4, &nump, 1, 0444};
    for (const liveprobe_module_param &d : decls) params.push_back(&d);
    std::vector<char *> owned;
    const std::string arg(reinterpret_cast<const char *>(data), size);
    const std::string e = set_param(params, "fuzz", arg, &owned);
    if (!e.empty() && e.find("parameter") == std::string::npos) std::abort();  // a message names it
    for (size_t i = 0; i < n + 2; ++i) {
        for (unsigned char c : vars[i].before)
            if (c != 0xa5) std::abort();
        for (unsigned char c : vars[i].after)
            if (c != 0xa5) std::abort();
    }
    for (size_t b = 16; b < 64; ++b)  // past the array's 4 ints
        if (vars[n + 1].var[b] != 0xa5) std::abort();
    for (size_t b = 16; b < 64; ++b)  // past the string's 16 bytes
        if (vars[n].var[b] != 0xa5) std::abort();
    for (char *s : owned) {
        if (std::strlen(s) > 1024) std::abort();
        free(s);
    }
    return 0;
}
