// A global that is never destroyed. Threads other than the one calling exit() keep running
// while the process exits (the agent in the middle of a request, any thread hitting a probe),
// and they use liveprobe's tables until the kernel ends them: the tables must outlive the
// static destructors. Immortal<T> is initialized as T alone would be: constant-initialized
// when T's default constructor is constexpr (std::vector: declare it constinit), so it is usable
// from any constructor whatever the order; dynamically otherwise. Its destructor leaves T alone.
#pragma once

namespace liveprobe::core {

template <class T>
union Immortal {
    T value;
    constexpr Immortal() : value() {}
    ~Immortal() {}  // T's destructor never runs
};

}  // namespace liveprobe::core
