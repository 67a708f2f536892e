/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * A cheap monotonic clock in nanoseconds for decisions made on every progress pass
 * (the quiet-device rule of cq.h). steady_clock costs about 30 ns in a virtual
 * machine's vDSO (kvm-clock) and a same-host progress pass read it once or more; the
 * CPU's constant-rate counter (x86-64 TSC where CPUID says it is invariant, the
 * AArch64 virtual counter) costs about a third of that.
 *
 * Counter ticks become nanoseconds with a scale measured against steady_clock once
 * kCalibrateNs has passed since the first reading; until then, and where no constant
 * counter is known, every reading is steady_clock's. A reading kRebaseNs (10 ms) of
 * ticks past the last steady_clock reading takes a new one and measures the scale
 * again, so an error in it never adds up to more than a fraction of 10 ms; readings
 * never go back. Not thread-safe: one per object, used under that object's lock.
 */
#ifndef EFA_COMMON_PASS_CLOCK_H
#define EFA_COMMON_PASS_CLOCK_H

#include <chrono>
#include <cstdint>

#if defined(__x86_64__)
#include <cpuid.h>
#include <x86intrin.h>
#endif

namespace efa {

inline uint64_t steady_ns()
{
	return uint64_t(
		std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
			.count());
}

/* The counter, or 0 where there is none to use. */
inline uint64_t counter_ticks()
{
#if defined(__x86_64__)
	return __rdtsc();
#elif defined(__aarch64__)
	uint64_t v;
	asm volatile("mrs %0, cntvct_el0" : "=r"(v));
	return v;
#else
	return 0;
#endif
}

/* Whether counter_ticks() runs at a constant rate whatever the CPU's state. */
inline bool counter_constant()
{
#if defined(__x86_64__)
	static const bool ok = [] {
		unsigned a, b, c, d;
		return __get_cpuid(0x80000007, &a, &b, &c, &d) && (d & (1u << 8)); /* invariant TSC */
	}();
	return ok;
#elif defined(__aarch64__)
	return true; /* the generic timer's frequency is fixed */
#else
	return false;
#endif
}

class PassClock {
public:
	static constexpr uint64_t kCalibrateNs = 1000000;
	static constexpr uint64_t kRebaseNs = 10000000;

	uint64_t now_ns()
	{
		if (mult_) {
			const uint64_t d = counter_ticks() - base_ticks_;
			if (d < limit_)
				return monotonic(base_ns_ + uint64_t((__uint128_t(d) * mult_) >> 32));
		}
		return monotonic(rebase());
	}
	bool calibrated() const { return mult_ != 0; }

private:
	/* A scaled reading may run ahead of the next steady_clock one by the scale's error. */
	uint64_t monotonic(uint64_t ns)
	{
		if (ns < last_)
			return last_;
		return last_ = ns;
	}
	/* A steady_clock reading and the counter at the same moment: of three tries, the
	 * one with the shortest gap between the counter readings around it (a thread
	 * preempted between the two clocks would skew the scale). */
	uint64_t pair(uint64_t &ticks)
	{
		uint64_t best_gap = ~uint64_t(0), ns = 0;
		for (int i = 0; i < 3; i++) {
			const uint64_t a = counter_ticks(), n = steady_ns(), b = counter_ticks();
			if (b - a < best_gap) {
				best_gap = b - a;
				ticks = a + (b - a) / 2;
				ns = n;
			}
		}
		return ns;
	}
	uint64_t rebase()
	{
		if (!counter_constant())
			return steady_ns();
		uint64_t t = 0;
		const uint64_t ns = pair(t);
		if (!t0_ || t <= t0_ || ns - ns0_ >= (uint64_t(1) << 31)) {
			t0_ = t; /* first reading, or too long ago to scale without overflow */
			ns0_ = ns;
		} else if (ns - ns0_ >= kCalibrateNs) {
			/* Measured again at every rebase, over a longer span each time. */
			mult_ = ((ns - ns0_) << 32) / (t - t0_);
			limit_ = mult_ ? (kRebaseNs << 32) / mult_ : 0;
		}
		base_ticks_ = t;
		base_ns_ = ns;
		return ns;
	}

	uint64_t t0_ = 0, ns0_ = 0;		 /* calibration start */
	uint64_t mult_ = 0, limit_ = 0;		 /* ns per tick, 32.32 fixed point; ticks it may scale */
	uint64_t base_ticks_ = 0, base_ns_ = 0; /* the last steady_clock reading */
	uint64_t last_ = 0;			 /* the last reading returned */
};

} // namespace efa

#endif
