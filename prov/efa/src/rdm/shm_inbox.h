/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The inbox of announcements (shm.h, "Senders"): shared memory in an endpoint's
 * key-table file where each same-host sender writes its address before its first
 * message to the endpoint, and which the endpoint (the owner) empties in its progress.
 *
 * Slots are reused: a sender claims a free slot (compare-and-swap, the lowest it finds),
 * raises the high-water mark `used` past it, writes its address, marks the slot written
 * (release) and then rings the doorbell `rung` (release). The owner, when the doorbell
 * moved, reads `used` and takes every written slot below it, freeing each after copying
 * its address out. So the inbox holds the announcements not taken yet, at most
 * kSlots of them, however many senders an endpoint meets in its life; a sender that
 * died between its claim and its write keeps one slot claimed for good.
 *
 * Header-only, on memory the caller maps (tested on private memory in test_shm_inbox).
 */
#ifndef EFA_RDM_SHM_INBOX_H
#define EFA_RDM_SHM_INBOX_H

#include "addr.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>

namespace efa::rdm::inbox {

/* Another layout (the slots were not reused before) has another magic: a sender of
 * another build finds the inbox unreadable and uses the device. */
constexpr uint32_t kMagic = 0xefa5e704;
constexpr uint32_t kSlots = 4096;
enum : uint32_t { kFree = 0, kWritten = 1, kClaimed = 2 };

struct Slot {
	uint32_t state;
	uint32_t pad;
	RawAddr addr;
};

struct Inbox {
	uint32_t magic;
	uint32_t rung; /* announcements written, ever (wraps) */
	uint32_t used; /* slots below this may hold one (at most kSlots) */
	uint32_t pad;
	Slot slot[kSlots];
};

template <typename T> std::atomic_ref<T> at(const T &v) { return std::atomic_ref<T>(const_cast<T &>(v)); }

/* The owner, once, on zeroed memory. */
inline void init(Inbox &in) { at(in.magic).store(kMagic, std::memory_order_release); }

inline bool readable(const Inbox &in) { return at(in.magic).load(std::memory_order_acquire) == kMagic; }

/* A sender: false when every slot holds an announcement not taken yet (twice over: the
 * owner may free a slot behind a first scan). */
inline bool announce(Inbox &in, const RawAddr &self)
{
	for (uint32_t k = 0; k < 2 * kSlots; k++) {
		const uint32_t i = k % kSlots;
		Slot &s = in.slot[i];
		uint32_t st = at(s.state).load(std::memory_order_relaxed);
		if (st != kFree || !at(s.state).compare_exchange_strong(st, kClaimed, std::memory_order_acquire,
									 std::memory_order_relaxed))
			continue;
		uint32_t u = at(in.used).load(std::memory_order_relaxed);
		while (u < i + 1 && !at(in.used).compare_exchange_weak(u, i + 1, std::memory_order_release,
									std::memory_order_relaxed)) {
		}
		std::memcpy(&s.addr, &self, sizeof self);
		at(s.state).store(kWritten, std::memory_order_release);
		at(in.rung).fetch_add(1, std::memory_order_release);
		return true;
	}
	return false;
}

/* The doorbell: the owner takes announcements when it moved since its last look. */
inline uint32_t rung(const Inbox &in) { return at(in.rung).load(std::memory_order_acquire); }

/* The owner: fn(const RawAddr &) for every written slot, which it frees. Read the
 * doorbell (rung) before calling this. */
template <typename F> void take(Inbox &in, F &&fn)
{
	const uint32_t n = std::min(at(in.used).load(std::memory_order_acquire), kSlots);
	for (uint32_t i = 0; i < n; i++) {
		Slot &s = in.slot[i];
		if (at(s.state).load(std::memory_order_acquire) != kWritten)
			continue; /* free, or claimed and not written yet (its doorbell comes later) */
		RawAddr a;
		std::memcpy(&a, &s.addr, sizeof a);
		at(s.state).store(kFree, std::memory_order_release);
		fn(static_cast<const RawAddr &>(a));
	}
}

/* The owner: whether a written announcement waits. */
inline bool waiting(const Inbox &in)
{
	const uint32_t n = std::min(at(in.used).load(std::memory_order_acquire), kSlots);
	for (uint32_t i = 0; i < n; i++)
		if (at(in.slot[i].state).load(std::memory_order_acquire) == kWritten)
			return true;
	return false;
}

} // namespace efa::rdm::inbox

#endif
