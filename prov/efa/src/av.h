/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Address vector (FI_AV_TABLE and FI_AV_MAP; fi_addr_t is the entry's index in both).
 *
 * Entries live in fixed chunks that never move, so the data path reads an entry without
 * a lock while other threads insert. Indices are never reused after fi_av_remove; a
 * removed entry drops its AH reference. A receive completion's sender (AHN, QPN) maps
 * back to an fi_addr through `reverse` (FI_SOURCE).
 */
#ifndef EFA_AV_H
#define EFA_AV_H

#include "addr.h"
#include "domain.h"

#include <array>
#include <atomic>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace efa {

struct AvEntry {
	RawAddr addr;
	Domain::AhRef *ah; /* null once removed */
	std::atomic<bool> valid;
};

/*
 * What the AV tells each endpoint that listens (the efa fabric's, from fi_enable to
 * fi_close): entries were inserted, entries were removed. fi_av_insert and fi_av_remove
 * set them under the AV's lock; the endpoint reads and clears them under its own when
 * it next makes progress or starts an operation. Only these atomics pass between the
 * two: the AV never calls into an endpoint, so there is no order between their locks
 * (an endpoint calls into the AV, reverse_lookup, under its own).
 */
struct AvNotice {
	std::atomic<bool> inserted{false};
	std::atomic<bool> removed{false};
};

struct Av {
	fid_av av; /* first */
	ObjHeader hdr;
	static constexpr Magic kMagic = Magic::Av;
	static constexpr size_t kChunk = 1024;
	static constexpr size_t kMaxChunks = 4096; /* 4 Mi addresses */

	Domain *dom;
	fi_av_type type;
	uint64_t flags;
	Eq *eq; /* asynchronous inserts (FI_EVENT) report here */
	std::mutex lock;
	std::array<std::atomic<AvEntry *>, kMaxChunks> chunks{};
	std::atomic<size_t> count{0}; /* entries ever inserted */
	std::unordered_map<uint64_t, fi_addr_t> reverse; /* (ahn << 32 | qpn) -> fi_addr */
	std::vector<AvNotice *> listeners; /* under lock */

	/* An endpoint starts / stops listening (see AvNotice). */
	void listen(AvNotice *n);
	void unlisten(AvNotice *n);

	/* The valid entry `a`, or null. Lock-free. */
	const AvEntry *lookup(fi_addr_t a) const
	{
		if (a >= count.load(std::memory_order_acquire))
			return nullptr;
		const AvEntry *c = chunks[a / kChunk].load(std::memory_order_acquire);
		const AvEntry *e = &c[a % kChunk];
		return e->valid.load(std::memory_order_acquire) ? e : nullptr;
	}
	/* FI_SOURCE: the fi_addr of the sender (AHN, QPN), or FI_ADDR_NOTAVAIL. */
	fi_addr_t reverse_lookup(uint16_t ahn, uint32_t qpn);
	/* Logs, once per process, that an operation named an fi_addr not in this AV. */
	static void warn_unknown(fi_addr_t addr);
};

int av_open(fid_domain *domain, fi_av_attr *attr, fid_av **av, void *context);

} // namespace efa

#endif
