/* mono.h -- the monotonic clock in whole seconds, for intervals (cache ages,
 * refetch throttles) that a wall-clock step must not stretch or shrink.
 * The one definition of mono_now (lint.sh). */
#ifndef CS_MONO_H
#define CS_MONO_H

#include <stdint.h>
#include <time.h>

/* Seconds on CLOCK_MONOTONIC; 0 when the clock cannot be read. */
static inline int64_t mono_now(void)
{
	struct timespec ts;
	if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
		return 0;
	return (int64_t)ts.tv_sec;
}

/* Milliseconds on CLOCK_MONOTONIC (deadlines of waits). */
static inline int64_t mono_ms(void)
{
	struct timespec ts;
	if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
		return 0;
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

#endif
