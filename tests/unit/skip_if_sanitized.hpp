// Sanitizer builds instrument every function with calls into their runtime, which nothing can
// prove vector-free (the engine saves the vector state around all of a hit there instead): the
// tests that ask arch::vector_free for a proof skip there.
#pragma once

#include <gtest/gtest.h>

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define LP_SKIP_IF_SANITIZED() GTEST_SKIP() << "sanitizer builds instrument the handlers with calls"
#else
#define LP_SKIP_IF_SANITIZED() (void)0
#endif
