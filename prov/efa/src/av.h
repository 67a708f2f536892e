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

namespace efa {

struct AvEntry {
	RawAddr addr;
	Domain::AhRef *ah; /* null once removed */
	std::atomic<bool> valid;
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
	std::atomic<size_t> removed{0}; /* entries ever removed (endpoints release their peers) */
	std::unordered_map<uint64_t, fi_addr_t> reverse; /* (ahn << 32 | qpn) -> fi_addr */

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
