// Replays a fuzz harness's corpus (issue 32 item 4): each file of the directories given, in
// name order, fed once to LLVMFuzzerTestOneInput, as `make test` does with the corpora that
// `make fuzz` grew: deterministic, no fuzzing. A crash or abort fails the test; it says which
// input it was on first.
#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

namespace {

char g_current[4096];  // the input being replayed, for a crash's message

void on_crash(int sig)
{
    static const char head[] = "replay: crashed on ";
    (void)!write(2, head, sizeof head - 1);
    (void)!write(2, g_current, std::strlen(g_current));
    (void)!write(2, "\n", 1);
    signal(sig, SIG_DFL);
    raise(sig);
}

}  // namespace

int main(int argc, char **argv)
{
    for (int sig : {SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL}) signal(sig, on_crash);
    size_t inputs = 0;
    for (int a = 1; a < argc; ++a) {
        std::vector<std::string> names;
        if (DIR *d = opendir(argv[a])) {
            while (struct dirent *e = readdir(d))
                if (e->d_name[0] != '.') names.push_back(e->d_name);
            closedir(d);
        } else {
            std::fprintf(stderr, "replay: cannot read %s\n", argv[a]);
            return 1;
        }
        std::sort(names.begin(), names.end());
        for (const std::string &n : names) {
            const std::string path = std::string(argv[a]) + "/" + n;
            std::ifstream f(path, std::ios::binary);
            const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
            std::snprintf(g_current, sizeof g_current, "%s", path.c_str());
            LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size());
            ++inputs;
        }
    }
    std::fprintf(stderr, "replay: %zu inputs, none crashed\n", inputs);
    return inputs ? 0 : 1;
}
