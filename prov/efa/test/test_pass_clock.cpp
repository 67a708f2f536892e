/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* The progress-pass clock (common/pass_clock.h): steady_clock's time, read cheaply. */
#include "common/pass_clock.h"

#include <criterion/criterion.h>

using efa::PassClock;
using efa::steady_ns;

/* Reads both clocks for `span` ns; every reading of c lies between the steady_clock
 * readings taken just before and after it, give or take `slack` ns plus 1% of the
 * time since the start (the scale is measured over 1 ms). */
static void track(PassClock &c, uint64_t span, uint64_t slack)
{
	const uint64_t start = steady_ns();
	uint64_t prev = 0;
	for (;;) {
		const uint64_t before = steady_ns();
		const uint64_t t = c.now_ns();
		const uint64_t after = steady_ns();
		const uint64_t tol = slack + (after - start) / 100;
		cr_assert_geq(t + tol, before, "%lu ns behind steady_clock", (unsigned long)(before - t));
		cr_assert_leq(t, after + tol, "%lu ns ahead of steady_clock", (unsigned long)(t - after));
		cr_assert_geq(t, prev, "went back by %lu ns", (unsigned long)(prev - t));
		prev = t;
		if (after - start >= span)
			break;
	}
}

Test(pass_clock, reads_steady_clock_before_and_after_calibration)
{
	PassClock c;
	cr_assert_not(c.calibrated());
	track(c, 3 * PassClock::kCalibrateNs, 50000);
	/* Where the CPU has a constant-rate counter, it is in use by now. */
	cr_assert_eq(c.calibrated(), efa::counter_constant());
	track(c, 20 * PassClock::kCalibrateNs, 50000);
}

Test(pass_clock, a_clock_read_long_after_its_first_reading_still_calibrates)
{
	PassClock c;
	(void)c.now_ns();
	/* The first reading is kept; the next ones, at least kCalibrateNs later, scale. */
	const uint64_t until = steady_ns() + 2 * PassClock::kCalibrateNs;
	while (steady_ns() < until)
		;
	(void)c.now_ns();
	cr_assert_eq(c.calibrated(), efa::counter_constant());
	track(c, 5 * PassClock::kCalibrateNs, 50000);
}
