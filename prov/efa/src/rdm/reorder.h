/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The per-peer reorder buffer (docs/protocol.md section 6): restores the order of a
 * peer's ordered requests, numbered by 32-bit message ids that wrap.
 *
 * Items are intrusive (T derives from ReorderLink<T>) and stay owned by the caller; the
 * buffer only links them. Several items may share an id (the segments of a medium
 * message): they are chained and come out together, in arrival order.
 *
 * Invariants: every queued id is ahead of expected(), by less than reach() =
 * max(max_window, kMinReach); ids less than max_window ahead live in the ring (slot
 * id & (capacity - 1)), the others on the overflow list until expected() comes within
 * max_window of them. An id reach() or more ahead is refused: no conforming sender
 * gets that far ahead (protocol.md section 6), so memory is bounded by reach() ids. An idle buffer holds no memory beyond the
 * object itself; the ring is allocated at the first out-of-order item (16 slots) and
 * doubles as deeper reordering demands, up to max_window slots.
 */
#ifndef EFA_RDM_REORDER_H
#define EFA_RDM_REORDER_H

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace efa::rdm {

template <typename T> struct ReorderLink {
	T *rb_next = nullptr; /* the next item with the same id */
	T *rb_over = nullptr; /* the next chain on the overflow list */
	uint32_t rb_id = 0;
};

template <typename T> class ReorderBuffer {
public:
	enum class Verdict {
		Deliver, /* the expected id: process it now; expected() has advanced */
		Queued,	 /* ahead of expected(): kept until pop() returns it */
		Past,	 /* behind expected(): a later segment of a message being received,
			  * or a duplicate; the buffer did not take it */
		Refused, /* reach() or more ahead: a peer that breaks the protocol; not taken */
	};

	static constexpr uint32_t kMinSlots = 16;
	/* How far ahead of expected() ids are kept when the ring is smaller (the protocol's
	 * promise to senders: protocol.md section 6). */
	static constexpr uint32_t kMinReach = 16384;

	/* max_window: a power of two >= kMinSlots (the protocol's rx_window). */
	explicit ReorderBuffer(uint32_t max_window = 16384, uint32_t first_id = 0)
		: expected_(first_id), max_(max_window)
	{
	}
	ReorderBuffer(const ReorderBuffer &) = delete;
	ReorderBuffer &operator=(const ReorderBuffer &) = delete;

	uint32_t expected() const { return expected_; }
	size_t queued() const { return queued_; }
	uint32_t capacity() const { return cap_; }
	/* The largest ring it has had (tests). */
	uint32_t peak_capacity() const { return peak_cap_; }
	uint32_t max_window() const { return max_; }
	uint32_t reach() const { return max_ > kMinReach ? max_ : kMinReach; }

	/* The chain queued for id (linked by rb_next), or null. */
	T *find(uint32_t id) const
	{
		const uint32_t d = id - expected_;
		if (d < max_)
			return cap_ && d < cap_ ? ring_[id & (cap_ - 1)] : nullptr;
		for (T *c = overflow_; c; c = c->rb_over)
			if (c->rb_id == id)
				return c;
		return nullptr;
	}

	/* What accept(id, ...) would answer, without taking anything: callers copy an item
	 * that will be queued out of a buffer they must give back. */
	Verdict classify(uint32_t id) const
	{
		const uint32_t d = id - expected_;
		if (d >= 0x80000000u)
			return Verdict::Past;
		if (d >= reach())
			return Verdict::Refused;
		if (d == 0 && !(cap_ && ring_[id & (cap_ - 1)]))
			return Verdict::Deliver;
		return Verdict::Queued;
	}

	/* After classify(id) answered Deliver: what accept(id, ...) would then do. */
	void deliver_expected() { advance(); }

	Verdict accept(uint32_t id, T *item)
	{
		const uint32_t d = id - expected_;
		if (d >= 0x80000000u)
			return Verdict::Past;
		if (d >= reach())
			return Verdict::Refused;
		item->rb_next = nullptr;
		item->rb_over = nullptr;
		item->rb_id = id;
		if (d == 0 && !(cap_ && ring_[id & (cap_ - 1)])) {
			advance();
			return Verdict::Deliver;
		}
		if (d < max_) {
			if (d >= cap_)
				grow(d + 1);
			append(ring_[id & (cap_ - 1)], item);
		} else {
			T **slot = &overflow_;
			while (*slot && (*slot)->rb_id != id)
				slot = &(*slot)->rb_over;
			if (*slot)
				append(*slot, item);
			else
				*slot = item;
		}
		queued_++;
		return Verdict::Queued;
	}

	/*
	 * The chain queued for expected() (linked by rb_next), advancing past it; null when
	 * nothing is queued for it. Call until null after each Deliver or pop.
	 */
	T *pop()
	{
		if (!cap_)
			return nullptr;
		T *&slot = ring_[expected_ & (cap_ - 1)];
		T *chain = slot;
		if (!chain)
			return nullptr;
		slot = nullptr;
		for (T *t = chain; t; t = t->rb_next)
			queued_--;
		advance();
		release_if_empty();
		return chain;
	}

	/*
	 * Consumes the next k ids without delivering anything (an EXT_VOID run, of which the id
	 * before expected() was the first): what is queued for them, which a conforming
	 * peer never sends, is handed to release.
	 */
	template <typename F> void skip(uint32_t k, F &&release)
	{
		for (uint32_t i = 0; i < k; i++) {
			if (cap_) {
				T *&slot = ring_[expected_ & (cap_ - 1)];
				for (T *t = slot; t;) {
					T *next = t->rb_next;
					queued_--;
					release(t);
					t = next;
				}
				slot = nullptr;
			}
			advance();
		}
		release_if_empty();
	}

	/* Hands every queued item to release (peer teardown). */
	template <typename F> void clear(F &&release)
	{
		auto drop = [&](T *chain) {
			while (chain) {
				T *next = chain->rb_next;
				release(chain);
				chain = next;
			}
		};
		for (uint32_t i = 0; i < cap_; i++) {
			drop(ring_[i]);
			ring_[i] = nullptr;
		}
		while (overflow_) {
			T *next = overflow_->rb_over;
			drop(overflow_);
			overflow_ = next;
		}
		queued_ = 0;
	}

private:
	static void append(T *&head, T *item)
	{
		if (!head) {
			head = item;
			return;
		}
		T *t = head;
		while (t->rb_next)
			t = t->rb_next;
		t->rb_next = item;
	}

	void advance()
	{
		expected_++;
		if (overflow_)
			migrate();
	}

	/* Moves overflow chains that are now within the window into the ring. */
	void migrate()
	{
		T **link = &overflow_;
		while (*link) {
			T *chain = *link;
			const uint32_t d = chain->rb_id - expected_;
			if (d < max_) {
				*link = chain->rb_over;
				chain->rb_over = nullptr;
				if (d >= cap_)
					grow(d + 1);
				ring_[chain->rb_id & (cap_ - 1)] = chain;
			} else {
				link = &chain->rb_over;
			}
		}
	}

	/* An empty buffer holds no ring (memory per idle peer, fi_efa(7) MEMORY). */
	void release_if_empty()
	{
		if (!queued_ && !overflow_ && cap_) {
			ring_.reset();
			cap_ = 0;
		}
	}

	void grow(uint32_t need)
	{
		uint32_t n = cap_ ? cap_ : kMinSlots;
		while (n < need)
			n *= 2;
		std::unique_ptr<T *[]> ring(new T *[n]());
		for (uint32_t i = 0; i < cap_; i++)
			if (T *c = ring_[i])
				ring[c->rb_id & (n - 1)] = c;
		ring_ = std::move(ring);
		cap_ = n;
		peak_cap_ = std::max(peak_cap_, n);
	}

	uint32_t expected_;
	uint32_t max_;
	uint32_t cap_ = 0;
	uint32_t peak_cap_ = 0;
	size_t queued_ = 0;
	std::unique_ptr<T *[]> ring_;
	T *overflow_ = nullptr;
};

} // namespace efa::rdm

#endif
