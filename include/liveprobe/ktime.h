/*
 * liveprobe: a cheap monotonic clock, for probe handlers.
 *
 * #include <liveprobe/ktime.h>, link with -lliveprobe (pkg-config liveprobe).
 *
 * This is the time source behind the kernel-compatible ktime_get() (<linux/ktime.h>, ktime_t
 * in nanoseconds). Usable from C11 and C++. Both functions may be called from any thread, at
 * any time, including from a probe handler and from inside a signal handler: they are
 * async-signal-safe, take no lock, allocate nothing and call nothing in libc (so a probe on
 * clock_gettime or on any other libc function does not recurse).
 */
#ifndef LIVEPROBE_KTIME_H
#define LIVEPROBE_KTIME_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifndef LIVEPROBE_API
#if defined(__GNUC__)
#define LIVEPROBE_API __attribute__((visibility("default")))
#else
#define LIVEPROBE_API
#endif
#endif

/*
 * Monotonic time in nanoseconds, on CLOCK_MONOTONIC's epoch: a value can be compared with, or
 * subtracted from, clock_gettime(CLOCK_MONOTONIC) converted to nanoseconds (tv_sec * 10^9 +
 * tv_nsec). Like CLOCK_MONOTONIC, it does not count time the system spent suspended.
 *
 * Never decreases: a call returns at least what any call that completed before it returned,
 * in this thread or in another one.
 *
 * When liveprobe_clock_source() says "tsc", it is read from the CPU's time-stamp counter (in
 * order, like the kernel's ktime_get()), converted with a fixed-point multiply that was
 * calibrated against CLOCK_MONOTONIC when the library was loaded and is re-measured against it
 * about every 1/16 s while the clock is being read. It then stays within about a microsecond
 * of CLOCK_MONOTONIC: a small difference is slewed away (by at most about 0.1%); a larger one
 * (the TSC jumped, a suspend) is removed by stepping forward or by standing still until
 * CLOCK_MONOTONIC catches up, never by going back. Otherwise it is
 * clock_gettime(CLOCK_MONOTONIC) itself, read through the vDSO.
 */
LIVEPROBE_API uint64_t liveprobe_ktime_ns(void);

/*
 * What liveprobe_ktime_ns() reads, chosen once when the library is loaded: "tsc" or
 * "clock_gettime". A static string. "tsc" requires an invariant TSC (CPUID 0x80000007 EDX
 * bit 8), a kernel that uses it as its own clocksource
 * (/sys/devices/system/clocksource/clocksource0/current_clocksource is "tsc"), and a process
 * allowed to read it (prctl PR_GET_TSC); LIVEPROBE_CLOCK=clock_gettime in the environment
 * chooses "clock_gettime" regardless.
 */
LIVEPROBE_API const char *liveprobe_clock_source(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* LIVEPROBE_KTIME_H */
