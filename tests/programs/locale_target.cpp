// A program whose thread holds libstdc++'s locale mutex much of the time, as fmtlib's chrono
// tests do: std::locale::global() sets the C library's locale (setlocale, which reads the
// locale's files) with that mutex held. A thread an attach makes call into the agent may be
// stopped there: the agent's start must take no lock the program's code takes (an
// std::ifstream constructs a std::locale, which takes that mutex), or it waits for itself.
//   locale_target SECONDS
// Says "ready", switches the global locale between "C.UTF-8" and "C" for SECONDS, then prints
// "switches N" and exits 0.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <locale>

int main(int argc, char **argv)
{
    const double seconds = argc > 1 ? std::atof(argv[1]) : 10;
    const std::locale utf8("C.UTF-8"), c = std::locale::classic();
    std::printf("ready\n");
    std::fflush(stdout);
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    long n = 0;
    while (std::chrono::steady_clock::now() < end) {
        std::locale::global(n % 2 ? c : utf8);
        ++n;
    }
    std::printf("switches %ld\n", n);
    return 0;
}
