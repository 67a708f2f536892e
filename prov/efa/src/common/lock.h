/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The locks of the data path, chosen by the domain's threading level (fi_domain(3)).
 *
 * Under FI_THREAD_DOMAIN and FI_THREAD_COMPLETION the application serialises every call
 * on the objects that share a completion structure (endpoints, their CQs and counters),
 * so the endpoint, CQ and counter locks would guard nothing: they are switched off when
 * the object is created, before any other thread can see it. Under FI_THREAD_SAFE (and
 * FI_THREAD_FID, FI_THREAD_ENDPOINT, and an unspecified level) they are real mutexes.
 * Objects shared across those groups (the domain's address handle cache, AVs, MRs) keep
 * theirs whatever the level.
 */
#ifndef EFA_COMMON_LOCK_H
#define EFA_COMMON_LOCK_H

#include <rdma/fi_domain.h>

#include <mutex>

namespace efa {

/* Whether the application serialises the calls that reach an endpoint's data path. */
inline bool app_serialises(fi_threading t) { return t == FI_THREAD_DOMAIN || t == FI_THREAD_COMPLETION; }

/* A std::mutex that can be switched off (then lock, unlock and try_lock do nothing and
 * try_lock succeeds). Usable with std::lock_guard and std::unique_lock. */
class DataLock {
public:
	DataLock() = default;
	DataLock(const DataLock &) = delete;
	DataLock &operator=(const DataLock &) = delete;

	/* Before the owner is shared with another thread. */
	void set_threading(fi_threading t) { on_ = !app_serialises(t); }
	bool on() const { return on_; }

	/* Inlined into every caller (GCC otherwise keeps them as calls, some 20
	 * instructions per fi_cq_read with the lock off: callgrind, performance.md). */
	[[gnu::always_inline]] void lock()
	{
		if (on_)
			m_.lock();
	}
	[[gnu::always_inline]] void unlock()
	{
		if (on_)
			m_.unlock();
	}
	bool try_lock() { return !on_ || m_.try_lock(); }

private:
	std::mutex m_;
	bool on_ = true;
};

} // namespace efa

#endif
