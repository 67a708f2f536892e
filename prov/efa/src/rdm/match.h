/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Receive matching (docs/protocol.md section 5): posted receives and unexpected
 * messages, untagged and tagged kept apart, each in FIFO order.
 *
 * Posted (a receive) has fields `src` (fi_addr_t; FI_ADDR_UNSPEC for any), `tag` and
 * `ignore`; Unexp (a message that found no receive) has `src` and `tag`. Both derive
 * from IListNode. The matcher links and finds them; the endpoint owns them, and decides
 * when a multi-receive buffer leaves the posted list.
 */
#ifndef EFA_RDM_MATCH_H
#define EFA_RDM_MATCH_H

#include "rdm/ilist.h"

#include <rdma/fabric.h>

#include <cstdint>

namespace efa::rdm {

/* A receive for `want` ignoring the bits of `ignore` takes a message tagged `got`. */
inline bool tag_matches(uint64_t want, uint64_t ignore, uint64_t got) { return ((want ^ got) & ~ignore) == 0; }

/* A receive from `want` takes a message from `got`. */
inline bool addr_matches(fi_addr_t want, fi_addr_t got) { return want == FI_ADDR_UNSPEC || want == got; }

template <typename Posted, typename Unexp> class Matcher {
public:
	/* directed: FI_DIRECTED_RECV is on, so a receive's source restricts it; without it
	 * every receive takes messages from anyone (fi_recv(3): the address is ignored). */
	explicit Matcher(bool directed = true) : directed_(directed) {}

	void set_directed(bool d) { directed_ = d; }

	void post(bool tagged, Posted *r) { posted_[tagged].push_back(r); }
	void unpost(bool tagged, Posted *r) { posted_[tagged].unlink(r); }
	IList<Posted> &posted(bool tagged) { return posted_[tagged]; }

	void add_unexpected(bool tagged, Unexp *u) { unexp_[tagged].push_back(u); }
	void remove_unexpected(bool tagged, Unexp *u) { unexp_[tagged].unlink(u); }
	IList<Unexp> &unexpected(bool tagged) { return unexp_[tagged]; }

	/* The first posted receive that takes an arriving message; it stays posted. */
	Posted *find_posted(bool tagged, fi_addr_t src, uint64_t tag) const
	{
		return posted_[tagged].find([&](const Posted &r) {
			return (!directed_ || addr_matches(r.src, src)) && (!tagged || tag_matches(r.tag, r.ignore, tag));
		});
	}

	/* The first unexpected message a new receive takes; it stays queued. */
	Unexp *find_unexpected(bool tagged, fi_addr_t src, uint64_t tag, uint64_t ignore) const
	{
		return unexp_[tagged].find([&](const Unexp &u) {
			return (!directed_ || addr_matches(src, u.src)) && (!tagged || tag_matches(tag, ignore, u.tag));
		});
	}

private:
	bool directed_;
	IList<Posted> posted_[2];
	IList<Unexp> unexp_[2];
};

} // namespace efa::rdm

#endif
