/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The RDM endpoint's peers (docs/protocol.md section 2): who they are, not what is
 * going on with them. It owns every Peer of one endpoint and finds them
 *
 *  - by fi_addr: the peers of AV entries, created on first use;
 *  - by the (AHN, QPN) a device completion names, or the address a packet carries;
 *  - implicit peers: senders met through their own address before the AV had them,
 *    adopted (given their fi_addr, state kept) once the application inserts them;
 *  - retired peers: removed from the AV while the device still held work requests to
 *    them (or messages from them were still being finished), freed when those end.
 *
 * The AV tells the table what changed (AvNotice, av.h): fi_av_insert and fi_av_remove
 * raise a flag of the table's, which the endpoint reads under its own lock, so a look
 * costs one load when nothing changed and no lock is taken across the two objects.
 *
 * What happens to a peer's work when it goes (failing operations, dropping messages)
 * is the endpoint's business: the calls that release peers take a function for it.
 */
#ifndef EFA_RDM_PEER_TABLE_H
#define EFA_RDM_PEER_TABLE_H

#include "addr.h"
#include "av.h"
#include "domain.h"

#include <rdma/fabric.h>

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

namespace efa::rdm {

struct Peer;
class PacketIo;

class PeerTable {
public:
	PeerTable();
	~PeerTable();
	PeerTable(const PeerTable &) = delete;
	PeerTable &operator=(const PeerTable &) = delete;

	/* At fi_enable: the domain (address handles), the AV, the reorder window every
	 * new peer gets, and where packet copies a freed peer still holds go back. */
	void init(Domain *dom, Av *av, uint32_t rx_window, PacketIo *io);
	/* Listening to the AV (AvNotice): from a successful fi_enable until fi_close. */
	void listen();
	void unlisten();

	enum class Found : uint8_t { Known, Adopted, Created };
	/* The peer of AV entry `addr`: known, an implicit peer of the same address adopted,
	 * or created (`how` tells); null when `addr` is not in the AV or no address handle
	 * can be made (logged). */
	Peer *for_addr(fi_addr_t addr, Found &how);
	/* The peer of AV entry `addr` if it has state (never creates one). */
	Peer *find(fi_addr_t addr) const { return addr < by_addr_.size() ? by_addr_[addr].get() : nullptr; }
	/* The peer a completion's (AHN, QPN) names, whatever its connection id. The last
	 * one found is remembered: consecutive packets mostly come from one sender. */
	Peer *for_src(uint16_t ahn, uint32_t qpn) const
	{
		const uint64_t k = key(ahn, qpn);
		if (k == last_src_key_)
			return last_src_;
		auto it = by_src_.find(k);
		if (it == by_src_.end())
			return nullptr;
		last_src_key_ = k;
		last_src_ = it->second;
		return it->second;
	}
	/* A new implicit peer towards `raw` over `ah` (whose reference it takes). */
	Peer *add_implicit(Domain::AhRef *ah, const RawAddr &raw);
	/* Implicit peers inserted into the AV since the last look get their fi_addr;
	 * `on_adopt(Peer &)` is called for each. Cheap when nothing was inserted. */
	template <typename F> void adopt_inserted(F &&on_adopt)
	{
		/* exchange, not load + store: an insertion the AV reports while we look must
		 * stay reported (a plain store could land after it). */
		if (implicit_.empty() || !notice_.inserted.exchange(false, std::memory_order_acq_rel))
			return;
		for (size_t i = 0; i < implicit_.size();)
			if (Peer *p = adopt_if_inserted(i))
				on_adopt(*p);
			else
				i++;
	}
	/* Whether entries were removed from the AV since the last release_removed. */
	bool removed() const { return notice_.removed.load(std::memory_order_acquire); }
	/* Releases the peers of removed entries: `on_release(Peer &, fi_addr_t)` ends
	 * their work, then each is freed, or retired while `busy(Peer &)` says the device
	 * or unfinished messages still name it (free_retired frees it later). */
	template <typename R, typename B> void release_removed(R &&on_release, B &&busy)
	{
		/* Taken with an exchange before the scan: a removal during the scan raises the
		 * flag again for the next look, never lost to a delayed clear. */
		notice_.removed.exchange(false, std::memory_order_acq_rel);
		for (fi_addr_t a = 0; a < by_addr_.size(); a++) {
			if (!by_addr_[a] || av_->lookup(a))
				continue;
			Peer &p = *by_addr_[a];
			on_release(p, a);
			unlink_src(p);
			if (busy(p))
				retired_.push_back(std::move(by_addr_[a]));
			else
				free_peer(std::move(by_addr_[a]));
		}
	}
	/* Frees a retired peer (nothing names it any more). */
	void free_retired(Peer *p);
	/* Every peer with an fi_addr or an implicit one (not retired ones). */
	template <typename F> void for_each(F &&f) const
	{
		for (const auto &p : by_addr_)
			if (p)
				f(*p);
		for (const auto &p : implicit_)
			f(*p);
	}
	/* At close: frees every peer. */
	void clear();

private:
	static uint64_t key(uint16_t ahn, uint32_t qpn) { return uint64_t(ahn) << 32 | qpn; }
	std::unique_ptr<Peer> make(Domain::AhRef *ah, const RawAddr &raw, fi_addr_t addr);
	Peer *place(fi_addr_t addr, std::unique_ptr<Peer> p);
	/* implicit_[i] if the AV has its address now (then adopted, erased from implicit_). */
	Peer *adopt_if_inserted(size_t i);
	Peer *adopt(size_t i, fi_addr_t addr);
	void unlink_src(const Peer &p);
	void free_peer(std::unique_ptr<Peer> p);

	Domain *dom_ = nullptr;
	Av *av_ = nullptr;
	uint32_t rx_window_ = 0;
	std::vector<std::unique_ptr<Peer>> by_addr_;
	std::vector<std::unique_ptr<Peer>> implicit_;
	std::vector<std::unique_ptr<Peer>> retired_;
	std::unordered_map<uint64_t, Peer *> by_src_;
	/* for_src's last answer; forgotten whenever by_src_ changes (no key is all ones). */
	mutable uint64_t last_src_key_ = ~uint64_t(0);
	mutable Peer *last_src_ = nullptr;
	void link_src(Peer *p);
	AvNotice notice_;	/* what the AV told us since the last look */
	bool listening_ = false;
	PacketIo *io_ = nullptr;
};

} // namespace efa::rdm

#endif
