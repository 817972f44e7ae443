// A C++ program that throws through probed frames (issue 31), built at -O2 as a user's would be:
// GCC moves the landing pads of leaf, dive and top into NAME.cold parts, which `'*'` must not
// take for functions. Counts its own calls, so that a tracer's counts can be checked exactly.
//
//   throw_target [CALLS [DEPTH]]   (30000 calls of top, each through DEPTH frames of dive)
//
// Every third call throws from leaf: caught in top (by type), or, every fifth of those, caught
// and rethrown by `catch (...)` in the outermost dive and caught in top through a
// std::exception_ptr. Each dive frame holds a std::string, destroyed while unwinding. Each call
// of top is followed by one of flat, the reproducer as it was (flat's and mid's
// landing pads start their .cold parts: a return probe there replaced a word of the frame,
// and free() aborted).
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <stdexcept>
#include <string>

static long leaf_calls, dive_calls, top_calls, caught, rethrown, mid_calls, flat_calls;

__attribute__((noinline)) int leaf(int i)
{
    ++leaf_calls;
    if (i % 3 == 0) throw std::runtime_error("boom " + std::to_string(i));
    return i & 0xff;
}

__attribute__((noinline)) int dive(int i, int depth, bool outer)
{
    ++dive_calls;
    std::string guard(24 + depth, 'g');  // destroyed during the unwinding
    if (outer && i % 5 == 0) {
        try {
            return depth ? dive(i, depth - 1, false) + 1 : leaf(i);
        } catch (...) {
            ++rethrown;
            throw;
        }
    }
    int r = depth ? dive(i, depth - 1, false) : leaf(i);
    return r + static_cast<int>(guard.size() & 1);
}

__attribute__((noinline)) int top(int i, int depth)
{
    ++top_calls;
    std::exception_ptr held;
    try {
        return dive(i, depth, true);
    } catch (const std::runtime_error &) {
        if (i % 5 != 0) {
            ++caught;
            return -1;
        }
        held = std::current_exception();
    }
    try {
        std::rethrow_exception(held);
    } catch (const std::exception &) {
        ++caught;
    }
    return -1;
}

__attribute__((noinline)) int mid(int i)
{
    ++mid_calls;
    std::string s(40, 'x');
    return leaf(i) + static_cast<int>(s.size());
}

__attribute__((noinline)) int flat(int i)
{
    ++flat_calls;
    try {
        return mid(i);
    } catch (const std::runtime_error &) {
        ++caught;
        return -1;
    }
}

int main(int argc, char **argv)
{
    const int calls = argc > 1 ? std::atoi(argv[1]) : 30000;
    const int depth = argc > 2 ? std::atoi(argv[2]) : 3;
    long sum = 0;
    for (int i = 0; i < calls; ++i) {
        int r = top(i, depth);
        if (r >= 0) sum += r;
        r = flat(i);
        if (r >= 0) sum += r;
    }
    std::printf("top %ld dive %ld flat %ld mid %ld leaf %ld caught %ld rethrown %ld sum %ld\n", top_calls, dive_calls,
                flat_calls, mid_calls, leaf_calls, caught, rethrown, sum);
    return 0;
}
