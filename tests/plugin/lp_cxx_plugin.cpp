// A C++ library that exceptions cross (tests/kretprobe_unwind_test.cpp): one it throws and the
// program catches, one the program throws and it catches.
#include <stdexcept>
#include <string>

extern "C" __attribute__((noinline, visibility("default"))) long lp_cxx_throw(int i)
{
    if (i >= 0) throw std::runtime_error(std::to_string(i));
    __asm__ volatile("" ::: "memory");
    return -1;
}

extern "C" __attribute__((noinline, visibility("default"))) long lp_cxx_catch(long (*fn)(int), int i)
{
    try {
        long r = fn(i);
        __asm__ volatile("" : "+r"(r));
        return r;
    } catch (const std::exception &e) {
        return std::stol(e.what());
    }
}
