/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Memory monitor: tells registration caches (mr_cache.h) which address ranges stopped
 * describing the memory they were registered for (munmap, mremap, madvise DONTNEED or
 * FREE, a brk shrink, a free() of a block malloc had mapped), so that no cached
 * registration outlives its memory.
 *
 * Mechanism: userfaultfd in write-protect mode (no page is ever protected, so no fault
 * ever stops the application; only the UNMAP, REMOVE and REMAP events are read). A
 * cached range is registered with the monitor (watch); the kernel then holds every
 * thread that unmaps part of it until this monitor's thread has read the event. The
 * thread marks `reading_` before each read and clears it once the ranges are queued to
 * every subscriber, so a cache that drains its queue after the unmapping call returned
 * (after waiting for `reading_` to clear) sees the invalidation.
 *
 * Rules that keep this free of deadlocks: the monitor thread never allocates or frees
 * (fixed rings; a full ring tells its subscriber to flush everything), and it reads
 * events without any lock a cache could hold.
 *
 * Where userfaultfd cannot start (no kernel support, EPERM under a seccomp profile or an
 * unprivileged_userfaultfd=0 kernel without USER_MODE_ONLY) or cannot watch a range (a
 * file mapping, a range another userfaultfd watches), the cache does not cache: every
 * such registration is made and released as before (fi_efa(7), FI_EFA_MR_CACHE_ENABLE).
 */
#ifndef EFA_MEM_MONITOR_H
#define EFA_MEM_MONITOR_H

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <thread>

namespace efa {

class MemMonitor {
public:
	/* One subscriber's queue of invalidated ranges (guarded by lock()). */
	struct Range {
		uintptr_t start, end;
	};
	class Queue {
	public:
		static constexpr size_t kCap = 256;
		/* Calls f(start, end) for each queued range, oldest first; returns false when
		 * ranges were lost (the ring overflowed: invalidate everything). */
		template <typename F> bool drain(F &&f);

	private:
		friend class MemMonitor;
		Range ring_[kCap];
		size_t head_ = 0, tail_ = 0;
		bool lost_ = false;
	};

	/* The process's monitor, started on first use (null when userfaultfd is not
	 * available: see the top of this file). Pair with release(). */
	static MemMonitor *acquire();
	static void release();
	/* At provider cleanup (before the library is unloaded): stops the thread even if
	 * domains were left open; their caches then cache nothing new. */
	static void shutdown();

	/* A queue for one cache (null beyond kMaxSubscribers). */
	static constexpr size_t kMaxSubscribers = 64;
	Queue *subscribe();
	void unsubscribe(Queue *q);

	/* Starts watching [start, end) (page aligned by the caller); false when it cannot be
	 * watched. Ranges are never unwatched while mapped, except by unwatch. */
	bool watch(uintptr_t start, uintptr_t end);
	void unwatch(uintptr_t start, uintptr_t end);

	/* Waits until every event already read is queued (see the top of this file). */
	void settle() const
	{
		while (reading_.load(std::memory_order_seq_cst))
			std::this_thread::yield();
	}
	std::mutex &lock() { return lock_; }

	const char *how() const { return how_; }

private:
	MemMonitor() = default;
	bool start();
	void stop();
	void run();
	void post(uintptr_t start, uintptr_t end);

	int fd_ = -1;
	int wake_fd_ = -1;
	const char *how_ = "";
	std::thread thread_;
	std::atomic<bool> reading_{false};
	std::atomic<bool> stopping_{false};
	std::mutex lock_;			 /* subs_ and the queues */
	Queue *subs_[kMaxSubscribers] = {}; /* fixed: the thread never allocates */
};

template <typename F> bool MemMonitor::Queue::drain(F &&f)
{
	while (head_ != tail_) {
		const Range r = ring_[head_ % kCap];
		head_++;
		f(r.start, r.end);
	}
	const bool ok = !lost_;
	lost_ = false;
	return ok;
}

} // namespace efa

#endif
