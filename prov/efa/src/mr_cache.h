/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Registration cache for the registrations the efa fabric makes for itself (the sender's
 * buffers of a read-based message, the receiver's destination of its RDMA reads, when
 * the application gave no descriptor that covers them). One per domain.
 *
 * Entries are keyed by address range, page aligned, and registered for local write and
 * remote read (what every internal use needs). A request that a cached range covers is
 * a hit; otherwise the entries it overlaps leave the index and one new entry covers
 * their union and the request. Entries in use are never evicted; unused ones wait on an
 * LRU list and go when the count or byte limit (FI_EFA_MR_MAX_CACHED_COUNT, _SIZE) would
 * be passed. The memory monitor (mem_monitor.h) reports ranges unmapped since; each
 * lookup first drops the entries they touch, so a registration never outlives its
 * memory. Without a monitor, or for a range it cannot watch, a registration is made and
 * released per use, as without the cache.
 *
 * Locking: one mutex per cache (domains are shared by endpoints of any threading
 * level). Nothing the monitor thread needs is taken under it (mem_monitor.h).
 */
#ifndef EFA_MR_CACHE_H
#define EFA_MR_CACHE_H

#include "mem_monitor.h"
#include "verbs/resources.h"

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>

namespace efa {

class MrCache;
struct MrEntry;

/* A registration the provider holds for one operation: a cache entry's, or its own. */
class InternalMr {
public:
	InternalMr() = default;
	InternalMr(const InternalMr &) = delete;
	InternalMr &operator=(const InternalMr &) = delete;
	InternalMr(InternalMr &&o) noexcept;
	InternalMr &operator=(InternalMr &&o) noexcept;
	~InternalMr()
	{
		if (*this) /* an operation entry's unused slots: no call */
			reset();
	}

	void reset();
	explicit operator bool() const { return entry_ || own_; }
	uint32_t lkey() const;
	uint32_t rkey() const;
	bool cached() const { return entry_ != nullptr; }

private:
	friend class MrCache;
	MrCache *cache_ = nullptr;
	MrEntry *entry_ = nullptr;
	verbs::Mr own_;
};

struct MrCacheStats {
	uint64_t hits = 0, misses = 0;
	uint64_t uncached = 0;	   /* registrations made without the cache */
	uint64_t evictions = 0;	   /* unused entries dropped for the limits */
	uint64_t invalidations = 0; /* entries dropped because their memory went */
	uint64_t flushes = 0;	   /* the monitor's queue overflowed: every entry dropped */
	size_t entries = 0, bytes = 0, in_use = 0;
};

class MrCache {
public:
	/* `enabled` false (FI_EFA_MR_CACHE_ENABLE=0) or no monitor: every get() registers. */
	MrCache(const verbs::Pd &pd, bool enabled, size_t max_count, size_t max_bytes);
	~MrCache();
	MrCache(const MrCache &) = delete;
	MrCache &operator=(const MrCache &) = delete;

	/* A registration covering [buf, buf + len) for local write and remote read: 0, or
	 * the registration's error. */
	int get(void *buf, size_t len, InternalMr &out);

	MrCacheStats stats();
	/* Deregisters every cached entry no operation holds, in every cache of the process
	 * (before fork() with rdma-core's fork support on: their pages become the child's
	 * again; fork.h). */
	static void release_unused_all();
	/* How invalidation works here: "userfaultfd", "disabled", ... (fi_efa(7)). */
	const char *monitor() const;

private:
	friend class InternalMr;
	void put(MrEntry *e);
	/* A registration of [buf, buf + len) for this use only: 0 or its error. */
	int reg_own(void *buf, size_t len, InternalMr &out);
	void sync_locked();
	void invalidate_locked(uintptr_t start, uintptr_t end);
	/* e leaves the index (and the LRU); unused, it is deregistered and freed. */
	void drop_locked(MrEntry *e);
	/* The least recently used unused entry is dropped (lru_head_ not null). */
	void evict_locked();
	void lru_unlink(MrEntry *e); /* if on the LRU */

	const verbs::Pd &pd_;
	MemMonitor *mon_ = nullptr;
	MemMonitor::Queue *queue_ = nullptr;
	size_t max_count_, max_bytes_;
	std::mutex lock_;
	std::map<uintptr_t, MrEntry *> index_; /* by start; no two overlap */
	MrEntry *lru_head_ = nullptr, *lru_tail_ = nullptr;
	MrCacheStats st_;
};

} // namespace efa

#endif
