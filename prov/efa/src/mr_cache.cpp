/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
#include "mr_cache.h"

#include "log.h"

#include <unistd.h>

#include <algorithm>
#include <vector>

namespace efa {

struct MrEntry {
	uintptr_t start = 0, end = 0; /* page aligned */
	verbs::Mr mr;
	uint32_t refs = 0;
	bool indexed = false; /* in the index (else stale: freed at its last put) */
	MrEntry *prev = nullptr, *next = nullptr; /* LRU, while unused and indexed */
	bool on_lru = false;
};

namespace {

constexpr int kAccess = verbs::kLocalWrite | verbs::kRemoteRead;

uintptr_t page_size()
{
	static const uintptr_t ps = uintptr_t(sysconf(_SC_PAGESIZE));
	return ps;
}

} // namespace

/* ------------------------------------------------------------------ InternalMr */

InternalMr::InternalMr(InternalMr &&o) noexcept
	: cache_(std::exchange(o.cache_, nullptr)), entry_(std::exchange(o.entry_, nullptr)), own_(std::move(o.own_))
{
}

InternalMr &InternalMr::operator=(InternalMr &&o) noexcept
{
	if (this != &o) {
		reset();
		cache_ = std::exchange(o.cache_, nullptr);
		entry_ = std::exchange(o.entry_, nullptr);
		own_ = std::move(o.own_);
	}
	return *this;
}

void InternalMr::reset()
{
	if (entry_)
		cache_->put(std::exchange(entry_, nullptr));
	cache_ = nullptr;
	own_.reset();
}

uint32_t InternalMr::lkey() const { return entry_ ? entry_->mr.lkey() : own_.lkey(); }
uint32_t InternalMr::rkey() const { return entry_ ? entry_->mr.rkey() : own_.rkey(); }

/* ------------------------------------------------------------------ MrCache */

namespace {

std::mutex g_caches_lock;
std::vector<MrCache *> g_caches; /* the caches with a monitor */

} // namespace

void MrCache::release_unused_all()
{
	std::lock_guard g(g_caches_lock);
	for (MrCache *c : g_caches) {
		std::lock_guard cg(c->lock_);
		while (c->lru_head_)
			c->evict_locked();
	}
}

MrCache::MrCache(const verbs::Pd &pd, bool enabled, size_t max_count, size_t max_bytes)
	: pd_(pd), max_count_(max_count), max_bytes_(max_bytes)
{
	if (!enabled || !max_count || !max_bytes)
		return;
	mon_ = MemMonitor::acquire();
	if (mon_) {
		queue_ = mon_->subscribe();
		if (!queue_) {
			MemMonitor::release();
			mon_ = nullptr;
		}
	}
	if (mon_) {
		std::lock_guard g(g_caches_lock);
		g_caches.push_back(this);
	}
}

MrCache::~MrCache()
{
	/* Operations hold no entries any more (endpoints are closed before their domain). */
	for (auto &[start, e] : index_) {
		if (e->indexed && mon_)
			mon_->unwatch(e->start, e->end);
		delete e;
	}
	index_.clear();
	if (mon_) {
		{
			std::lock_guard g(g_caches_lock);
			std::erase(g_caches, this);
		}
		mon_->unsubscribe(queue_);
		MemMonitor::release();
	}
}

const char *MrCache::monitor() const { return mon_ ? mon_->how() : "none (registrations are not cached)"; }

int MrCache::get(void *buf, size_t len, InternalMr &out)
{
	out.reset();
	const uintptr_t a = reinterpret_cast<uintptr_t>(buf);
	if (!mon_ || !len) {
		const int r = reg_own(buf, len, out);
		std::lock_guard g(lock_);
		st_.uncached += !r;
		return r;
	}
	const uintptr_t ps = page_size();
	uintptr_t start = a & ~(ps - 1);
	uintptr_t end = (a + len + ps - 1) & ~(ps - 1);

	/* Ranges unmapped before this call are queued once the monitor has read them. */
	mon_->settle();
	std::lock_guard g(lock_);
	sync_locked();
	/* The entry that starts at or before `a`, and those after it up to `end`. */
	auto it = index_.upper_bound(a);
	if (it != index_.begin()) {
		MrEntry *e = std::prev(it)->second;
		if (e->start <= a && a + len <= e->end) {
			lru_unlink(e);
			if (!e->refs++)
				st_.in_use++;
			st_.hits++;
			out.cache_ = this;
			out.entry_ = e;
			return 0;
		}
		if (e->end > start)
			--it; /* it overlaps: merged below */
	}
	/* A miss: the new entry takes over the entries it overlaps (their union). */
	while (it != index_.end() && it->second->start < end) {
		MrEntry *e = it->second;
		++it;
		start = std::min(start, e->start);
		end = std::max(end, e->end);
		drop_locked(e);
	}
	/* Room within the limits. */
	while (lru_head_ && (st_.entries + 1 > max_count_ || st_.bytes + (end - start) > max_bytes_))
		evict_locked();
	if (st_.entries + 1 > max_count_ || st_.bytes + (end - start) > max_bytes_ || !mon_->watch(start, end)) {
		/* Everything cached is in use, or the range cannot be watched (a file mapping,
		 * another monitor's range): registered for this use only. */
		const int ret = reg_own(buf, len, out);
		st_.uncached += !ret;
		return ret;
	}
	auto r = verbs::Mr::reg(pd_, reinterpret_cast<void *>(start), end - start, kAccess);
	if (!r.ok()) {
		/* Pages around the buffer that cannot be registered (a guard page, a hole):
		 * the buffer alone, uncached. */
		const int ret = reg_own(buf, len, out);
		st_.uncached += !ret;
		return ret;
	}
	auto *e = new MrEntry();
	e->start = start;
	e->end = end;
	e->mr = r.take();
	e->refs = 1;
	e->indexed = true;
	index_.emplace(start, e);
	st_.entries++;
	st_.bytes += end - start;
	st_.in_use++;
	st_.misses++;
	out.cache_ = this;
	out.entry_ = e;
	return 0;
}

int MrCache::reg_own(void *buf, size_t len, InternalMr &out)
{
	auto r = verbs::Mr::reg(pd_, buf, len, kAccess);
	if (!r.ok())
		return r.error();
	out.own_ = r.take();
	return 0;
}

void MrCache::put(MrEntry *e)
{
	std::lock_guard g(lock_);
	if (--e->refs)
		return;
	st_.in_use--;
	if (!e->indexed) {
		delete e; /* its memory went while in use, or a newer entry took over its range */
		return;
	}
	e->prev = lru_tail_;
	e->next = nullptr;
	(lru_tail_ ? lru_tail_->next : lru_head_) = e;
	lru_tail_ = e;
	e->on_lru = true;
}

void MrCache::lru_unlink(MrEntry *e)
{
	if (!e->on_lru)
		return;
	(e->prev ? e->prev->next : lru_head_) = e->next;
	(e->next ? e->next->prev : lru_tail_) = e->prev;
	e->prev = e->next = nullptr;
	e->on_lru = false;
}

void MrCache::evict_locked()
{
	const uintptr_t vs = lru_head_->start, ve = lru_head_->end;
	drop_locked(lru_head_); /* unused: deregistered */
	mon_->unwatch(vs, ve);
	st_.evictions++;
}

void MrCache::drop_locked(MrEntry *e)
{
	lru_unlink(e);
	index_.erase(e->start);
	e->indexed = false;
	st_.entries--;
	st_.bytes -= e->end - e->start;
	if (!e->refs)
		delete e; /* deregisters */
}

void MrCache::sync_locked()
{
	MemMonitor::Range got[MemMonitor::Queue::kCap];
	size_t n = 0;
	bool complete;
	{
		std::lock_guard g(mon_->lock());
		complete = queue_->drain([&](uintptr_t s, uintptr_t e) { got[n++] = MemMonitor::Range{s, e}; });
	}
	if (!complete) {
		/* Ranges were lost: nothing cached can be trusted. */
		st_.flushes++;
		while (!index_.empty())
			drop_locked(index_.begin()->second);
		return;
	}
	for (size_t i = 0; i < n; i++)
		invalidate_locked(got[i].start, got[i].end);
}

void MrCache::invalidate_locked(uintptr_t start, uintptr_t end)
{
	auto it = index_.upper_bound(start);
	if (it != index_.begin() && std::prev(it)->second->end > start)
		--it;
	while (it != index_.end() && it->second->start < end) {
		MrEntry *e = it->second;
		++it;
		drop_locked(e);
		st_.invalidations++;
	}
}

MrCacheStats MrCache::stats()
{
	std::lock_guard g(lock_);
	if (mon_) {
		mon_->settle();
		sync_locked();
	}
	return st_;
}

} // namespace efa
