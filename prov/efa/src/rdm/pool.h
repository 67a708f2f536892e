/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Allocation for the RDM data path: no heap allocation per operation or packet.
 *
 * ObjPool<T>: objects in chunks that never move, recycled through a free list; it grows
 * by a chunk when empty, up to a cap (then get() fails: the caller answers -FI_EAGAIN).
 * IdTable<T>: small integer ids for objects a peer names on the wire (send_id,
 * recv_id). An id carries a generation, so an id from a finished operation does not find
 * its slot's next occupant (until the generation wraps); 0 is never an id.
 */
#ifndef EFA_RDM_POOL_H
#define EFA_RDM_POOL_H

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace efa::rdm {

template <typename T> class ObjPool {
public:
	explicit ObjPool(size_t cap = SIZE_MAX, size_t chunk = 64) : cap_(cap), chunk_(chunk) {}
	ObjPool(const ObjPool &) = delete;
	ObjPool &operator=(const ObjPool &) = delete;

	void set_cap(size_t cap) { cap_ = cap; }

	/* A default-initialised T (members without an initialiser, such as the iov arrays
	 * of the operation entries, are not cleared: the entries set what they use), or null
	 * when `cap` objects are in use. */
	T *get()
	{
		if (free_.empty() && !grow()) [[unlikely]]
			return nullptr;
		Slot *s = free_.back();
		free_.pop_back();
		T *t = new (s->mem) T;
		s->live = true;
		used_++;
		return t;
	}

	void put(T *t)
	{
		t->~T();
		Slot *s = reinterpret_cast<Slot *>(t);
		s->live = false;
		free_.push_back(s);
		used_--;
	}

	/* Calls f(T &) for each object in use (reports; not on the data path). */
	template <typename F> void for_each_live(F &&f)
	{
		for (size_t c = 0; c < chunks_.size(); c++)
			for (size_t i = 0; i < sizes_[c]; i++)
				if (chunks_[c][i].live)
					f(*reinterpret_cast<T *>(chunks_[c][i].mem));
	}

	size_t in_use() const { return used_; }
	/* Heap the pool keeps: every object it made (a pool keeps its high-water mark) and
	 * its bookkeeping (fi_efa_ep_stats.pool_bytes). */
	size_t bytes() const
	{
		return made_ * sizeof(Slot) + chunks_.capacity() * sizeof(chunks_[0]) +
		       sizes_.capacity() * sizeof(size_t) + free_.capacity() * sizeof(Slot *);
	}

private:
	struct Slot {
		alignas(T) unsigned char mem[sizeof(T)]; /* first: a T* is its Slot* */
		bool live = false;
	};
	/* One more chunk on the free list; false at the cap. Out of line: get() is on the
	 * data path and inlines without it. */
	[[gnu::noinline]] bool grow()
	{
		if (made_ >= cap_)
			return false;
		const size_t n = std::min(chunk_, cap_ - made_);
		chunks_.emplace_back(new Slot[n]);
		sizes_.push_back(n);
		for (size_t i = n; i-- > 0;)
			free_.push_back(&chunks_.back()[i]);
		made_ += n;
		return true;
	}
	size_t cap_, chunk_;
	size_t made_ = 0, used_ = 0;
	std::vector<std::unique_ptr<Slot[]>> chunks_;
	std::vector<size_t> sizes_; /* of each chunk */
	std::vector<Slot *> free_;
};

template <typename T> class IdTable {
public:
	/* `mark`: this table's ids have the top bit set, so that they never equal another
	 * table's (the Sender's and the Receiver's share the ids a CTSDATA names). */
	explicit IdTable(bool mark = false) : mark_(mark ? kMark : 0) {}
	static bool marked(uint32_t id) { return id & kMark; }

	uint32_t add(T *t)
	{
		uint32_t idx;
		if (!free_.empty()) {
			idx = free_.back();
			free_.pop_back();
		} else {
			idx = uint32_t(slots_.size());
			slots_.push_back(Slot{});
		}
		Slot &s = slots_[idx];
		s.obj = t;
		return idx | uint32_t(s.gen) << kIdxBits | mark_;
	}

	/* The object of a live id, or null (unknown, stale or corrupt). */
	T *find(uint32_t id) const
	{
		const uint32_t idx = id & kIdxMask;
		if (idx >= slots_.size() || (id & kMark) != mark_)
			return nullptr;
		const Slot &s = slots_[idx];
		return s.obj && uint32_t(s.gen) == ((id & ~kMark) >> kIdxBits) ? s.obj : nullptr;
	}

	/* Calls f(obj) for each live object; f may remove ids (not add). */
	template <typename F> void for_each(F &&f)
	{
		for (size_t i = 0; i < slots_.size(); i++)
			if (T *t = slots_[i].obj)
				f(t);
	}

	void remove(uint32_t id)
	{
		const uint32_t idx = id & kIdxMask;
		if (idx >= slots_.size() || !slots_[idx].obj || (id & kMark) != mark_)
			return;
		slots_[idx].obj = nullptr;
		slots_[idx].gen = uint16_t((slots_[idx].gen + 1) & kGenMask);
		if (!slots_[idx].gen)
			slots_[idx].gen = 1;
		free_.push_back(idx);
	}

	/* Heap the table keeps (its high-water mark). */
	size_t bytes() const { return slots_.capacity() * sizeof(Slot) + free_.capacity() * sizeof(uint32_t); }

private:
	static constexpr uint32_t kIdxBits = 20;
	static constexpr uint32_t kIdxMask = (1u << kIdxBits) - 1;
	static constexpr uint32_t kMark = 1u << 31;
	static constexpr uint32_t kGenMask = (1u << (31 - kIdxBits)) - 1;
	struct Slot {
		T *obj = nullptr;
		uint16_t gen = 1; /* 31 - kIdxBits bits, never 0: no id is 0 */
	};
	uint32_t mark_;
	std::vector<Slot> slots_;
	std::vector<uint32_t> free_;
};

} // namespace efa::rdm

#endif
