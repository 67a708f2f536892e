/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Peers (docs/protocol.md sections 2 and 7) as the endpoint uses them (the table itself:
 * peer_table.h): the peer of an operation and of a packet, whether a packet may go to
 * its peer (post), and the endpoint's progress. The handshake: pkt_ctl.cpp.
 */
#include "rdm/ep.h"

#include "common/pass_clock.h"
#include "efa_errno.h"
#include "log.h"
#include "params.h"

#include <cstdlib>

namespace efa::rdm {

uint64_t Ep::now_ns() const { return steady_ns(); }

RawAddr Ep::self_addr() const
{
	RawAddr a{};
	std::memcpy(a.gid, dom->dev->gid().raw, 16);
	a.qpn = uint16_t(qp.qpn());
	a.qkey = qkey;
	return a;
}

Peer *Ep::new_peer_for_addr(fi_addr_t addr)
{
	PeerTable::Found how;
	Peer *p = peers.for_addr(addr, how);
	if (p && how == PeerTable::Found::Adopted)
		adopted(*p);
	else if (p && how == PeerTable::Found::Created)
		p->silent_since = now_ns(); /* a full probe interval before the first probe */
	return p;
}

ssize_t Ep::call_error(CallCheck c, const char *what, uint64_t flags, uint64_t allowed) const
{
	switch (c) {
	case CallCheck::Ok: return 0;
	case CallCheck::NotEnabled:
		EFA_WARN_ONCE(EpData, "%s before fi_enable: bind an AV and CQs, call fi_enable, then post", what);
		return -FI_EOPBADSTATE;
	case CallCheck::NoCq: return -FI_ENOCQ;
	case CallCheck::BadFlags:
		EFA_WARN_ONCE(EpData, "%s: flags %#lx are not flags of this operation; drop them", what,
			      (unsigned long)(flags & ~allowed));
		return -FI_EINVAL;
	}
	return -FI_EINVAL;
}

ssize_t Ep::tx_peer_error(fi_addr_t dest, Peer *p)
{
	if (!p) {
		Av::warn_unknown(dest);
		return -FI_EINVAL;
	}
	if (p->dead)
		return dead_peer(*p);
	return -FI_EAGAIN; /* backing off, or too many ids ahead */
}

Peer *Ep::known_peer(uint16_t ahn, uint32_t qpn, bool has_conn, uint32_t conn)
{
	Peer *known = peers.for_src(ahn, qpn);
	if (known && (!has_conn || known->raw.qkey == conn)) {
		/* An implicit peer inserted into the AV since: from now on it has an fi_addr. */
		if (known->addr == FI_ADDR_NOTAVAIL)
			adopt_pending();
		return known;
	}
	/* Another connection id on a known QP: a new endpoint took the QP number, so the
	 * one we knew there is gone (protocol.md section 2). */
	if (known)
		peer_replaced(*known, conn);
	const fi_addr_t a = av->reverse_lookup(ahn, qpn);
	if (a == FI_ADDR_NOTAVAIL)
		return nullptr;
	const AvEntry *e = av->lookup(a);
	return e && (!has_conn || e->addr.qkey == conn) ? peer_for_addr(a) : nullptr;
}

Peer *Ep::peer_from_wc(const verbs::Wc &wc, const Parsed &pk)
{
	const uint32_t conn = pk.connid;
	if (wc.src_known()) {
		if (Peer *p = known_peer(wc.slid, wc.src_qp, pk.has_connid, conn))
			return p;
	}
	const RawAddr *ra = pk.has_raw_addr ? &pk.raw_addr : nullptr;
	/* The device had no address handle for the sender when the packet arrived (or the
	 * sender is a new endpoint on a known QP number): the packet's own address names
	 * it. Every packet of one sender must reach the same peer, whether it came before
	 * or after an address handle existed. */
	if (ra && ra->qkey == conn && ra->qpn == wc.src_qp) {
		int err = 0;
		Domain::AhRef *ah = dom->get_ah(ra->gid, &err);
		if (!ah) {
			EFA_WARN(EpData, "no address handle for %s: %s", addr_to_string(*ra).c_str(), fi_strerror(-err));
		} else if (Peer *p = known_peer(ah->ah.ahn(), ra->qpn, true, conn)) {
			dom->put_ah(ah);
			return p;
		} else {
			return peers.add_implicit(ah, *ra);
		}
	}
	drops.unknown++;
	EFA_DBG(EpData, "%s from QP %u (AHN %u, conn %#x): unknown sender, dropped", v4::type_name(pk.type), wc.src_qp,
		wc.slid, conn);
	return nullptr;
}

/* ------------------------------------------------------------------ posting */

Pkt *Ep::tx_pkt(Peer &p, TxOp *op)
{
	Pkt *pkt = io.get_tx();
	if (!pkt)
		return nullptr;
	pkt->peer = &p;
	pkt->op = op;
	if (op)
		op->inflight++;
	return pkt;
}

int Ep::post_held(Pkt *pkt)
{
	Peer &p = *pkt->peer;
	if ((p.dead && !pkt->probe) || p.released) {
		/* Control packets owed to a peer that is gone (a CTS, an EOR, a RECEIPT): nobody
		 * waits for them. An operation's packet fails it. */
		pkt_lost(pkt->op, pkt->inject, p.released ? FI_ECANCELED : FI_EHOSTUNREACH,
			 p.released ? uint32_t(EfaStatus::PEER_REMOVED) : p.down);
		io.put_tx(pkt);
		return -FI_EHOSTUNREACH;
	}
	if (!held_back(p)) { /* a probe to a dead peer */
		const int r = io.send(pkt);
		return r ? post_failed(pkt, r) : 0;
	}
	/* Backing off: keep the order of this peer's packets. */
	io.queue(pkt);
	return 0;
}

void Ep::ring()
{
	std::vector<Pkt *> refused;
	if (const int r = io.ring(refused))
		for (Pkt *pkt : refused)
			post_failed(pkt, r);
}

int Ep::post_failed(Pkt *pkt, int r)
{
	if (r != -ENOMEM) {
		EFA_WARN(EpData, "posting a %s packet failed: %s", pkt_type_name(pkt->buf[0]), fi_strerror(-r));
		pkt_lost(pkt->op, pkt->inject, FI_EIO, uint32_t(EfaStatus::POST_FAILED));
		io.put_tx(pkt);
		return -FI_EIO;
	}
	/* The send queue is full: keep the order of this peer's packets. */
	io.queue(pkt);
	return 0;
}

void Ep::tx_done(Pkt *pkt, const verbs::Wc &wc)
{
	Peer *p = pkt->peer;
	const uint32_t status = wc.ok() ? 0 : wc.vendor_err;
	/* The device gave up on the peer: everything waiting on it fails (liveness.cpp). */
	const bool gone = status == uint32_t(EfaStatus::LOCAL_ERROR_UNRESP_REMOTE) ||
			  status == uint32_t(EfaStatus::LOCAL_ERROR_UNREACH_REMOTE) ||
			  status == uint32_t(EfaStatus::REMOTE_ERROR_BAD_DEST_QPN);
	if (pkt->msg) {
		if (!status)
			peer_heard(*p);
		rx.read_done(pkt, wc.ok(), wc.vendor_err);
		if (gone)
			peer_unresponsive(*p, status);
		return;
	}
	if (pkt->probe)
		p->probe_out = false;
	if (pkt->len && pkt->buf[0] == uint8_t(Type::Handshake)) /* len 0: an RDMA work request's credit */
		p->hs_inflight = false;
	TxOp *op = pkt->op;
	if (wc.ok()) {
		p->backoff_us = 0;
		peer_heard(*p); /* acknowledged by its device */
		if (pkt == p->void_pkt) {
			void_next(*p, pkt);
			return;
		}
		const bool inject = pkt->inject;
		io.put_tx(pkt);
		if (op)
			tx.pkt_sent(op);
		else if (inject)
			count(kCntrSend, true);
		return;
	}
	/* RNR: a packet is resent after the backoff. Not a device RDMA work request (len 0:
	 * its credit), which has no packet to resend; it fails like any other status. */
	if (status == uint32_t(EfaStatus::REMOTE_ERROR_RNR) && pkt->len && !p->dead && !p->released) {
		if (pkt == p->void_pkt) {
			/* The EXT_VOID itself found no buffer: it absorbs the runs refused since,
			 * and is resent after the backoff. */
			v4::ExtVoid *v = reinterpret_cast<v4::ExtVoid *>(pkt->buf);
			while (!p->voids.empty() && p->voids.front().first == v->msg_id + v->count &&
			       v->count + p->voids.front().second <= kMaxVoidRun) {
				v->count += p->voids.front().second;
				p->voids.erase(p->voids.begin());
			}
			io.on_rnr(pkt, now_ns());
			return;
		}
		/* The first packet of a message (MEDIUM segments cannot be refused one by one;
		 * FI_RM_DISABLED sends none) or of an atomic: the ones with a message id. */
		Parsed pk;
		const bool first = v4::parse(pkt->buf, pkt->len, pk) == v4::Error::None && is_ordered(pk) &&
				   !is_medium(pk.type) && pk.type != Type::ExtVoid;
		if (rm_enabled || !op || !first) {
			io.on_rnr(pkt, now_ns());
			return;
		}
		/* FI_RM_DISABLED: the operation fails with FI_ENORX now, whatever the peer's
		 * software does; its message id still has to reach the peer, in an EXT_VOID
		 * run (protocol.md section 7). */
		tx.pkt_failed(op, FI_ENORX, status);
		pkt->op = nullptr;
		void_ids(*p, pkt, msg_id_of(pk));
		return;
	}
	if (pkt == p->void_pkt) {
		p->void_pkt = nullptr;
		p->voids.clear();
	}
	if (op || pkt->inject) {
		pkt_lost(op, pkt->inject, p->released ? FI_ECANCELED : efa_status_to_fi(status),
			 p->released ? uint32_t(EfaStatus::PEER_REMOVED) : status);
		if (!op)
			EFA_WARN(EpData, "an inject to %s failed: %s", addr_to_string(p->raw).c_str(),
				 efa_status_msg(status));
	} else if (pkt->len && pkt->buf[0] != uint8_t(Type::Handshake) && !gone && !p->released) {
		EFA_WARN(EpData, "a %s packet to %s failed: %s", pkt_type_name(pkt->buf[0]),
			 addr_to_string(p->raw).c_str(), efa_status_msg(status));
	}
	io.put_tx(pkt);
	if (gone)
		peer_unresponsive(*p, status);
}

void Ep::progress_work()
{
	if (const uint64_t asked = g_report_requests.load(std::memory_order_relaxed); asked != report_seen) [[unlikely]] {
		report_seen = asked;
		report(params().report_age * 1000000000ull, "signal");
	}
	sync_removed();
	if (shm)
		shm->progress();
	/* No clock read while nothing waits (an idle endpoint polling its CQ). */
	if (probe_ns && (tx.busy() || rx.busy())) {
		const uint64_t now = now_ns();
		if (now >= next_probe_check) {
			next_probe_check = now + probe_ns / 4;
			probe_peers(now);
		}
	}
	if (io.any_busy())
		io.resend(
			now_ns(),
			[](void *ep, Peer &p) {
				if (p.hs_owed)
					static_cast<Ep *>(ep)->send_handshake(p);
				return p.hs_owed;
			},
			this);
	if (!ctl_pending.empty())
		send_pending_ctl();
	tx.progress();
	rx.progress();
}

} // namespace efa::rdm
