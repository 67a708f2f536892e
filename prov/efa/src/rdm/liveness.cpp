/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Peer failure (docs/reliability.md, "Peer failure"; docs/protocol.md section 9).
 *
 * The device tells when a peer is gone: a work request to it completes with
 * UNRESP_REMOTE / UNREACH_REMOTE / BAD_DEST_QPN. An operation that waits for the peer's
 * answer (a CTS, an EOR, a RECEIPT, a read or atomic response, the rest of a message)
 * has nothing on the device, so nothing would ever tell it: progress probes every peer
 * with such an operation that has been silent for FI_EFA_PEER_PROBE_INTERVAL, with a
 * HANDSHAKE, and the device's verdict on the probe decides. Then everything waiting on
 * the peer fails, and new operations to it fail fast (-FI_EHOSTUNREACH) until it is heard
 * from again or removed from the AV.
 *
 * fi_av_remove releases the peer: its pending operations fail with FI_ECANCELED, its
 * messages not yet received are dropped, and the Peer is freed once the device has no
 * work request to it left (Peer::posted). Later packets from the address find no peer.
 *
 * Invariants: a Peer is freed only with posted == 0 and msgs empty; an operation or
 * message is failed once (Sender::fail keeps the first error).
 */
#include "rdm/ep.h"

#include "efa_errno.h"
#include "log.h"

#include <algorithm>

namespace efa::rdm {

void Ep::release_removed()
{
	peers.release_removed(
		[this](Peer &p, fi_addr_t a) {
			EFA_INFO(EpCtrl, "fi_addr %lu (%s) was removed from the AV: its pending operations complete "
				 "with FI_ECANCELED, its unreceived messages are dropped",
				 (unsigned long)a, addr_to_string(p.raw).c_str());
			p.released = true;
			peer_failed(p, FI_ECANCELED, uint32_t(EfaStatus::PEER_REMOVED));
		},
		[](const Peer &p) { return p.posted || !p.msgs.empty(); });
}

void Ep::peer_unresponsive(Peer &p, uint32_t status)
{
	if (p.dead || p.released)
		return; /* failed already; nothing new waits on it since */
	p.dead = true;
	EFA_WARN(EpData, "%s (fi_addr %lu) is gone: %s. Its pending operations fail with %s; new ones fail with "
		 "-FI_EHOSTUNREACH until it is heard from again. Remove it with fi_av_remove if it will not come "
		 "back",
		 addr_to_string(p.raw).c_str(), (unsigned long)p.addr, efa_status_msg(status),
		 fi_strerror(efa_status_to_fi(status)));
	peer_failed(p, efa_status_to_fi(status), status);
}

void Ep::peer_replaced(Peer &p, uint32_t conn)
{
	if (p.replaced || p.released)
		return;
	p.replaced = true;
	const bool was_dead = p.dead;
	p.dead = true;
	EFA_WARN(EpData, "%s (fi_addr %lu) was replaced: a new endpoint (connection id %#x) sends from its QP "
		 "number. Operations waiting on the old one fail with FI_EHOSTUNREACH, new ones to its fi_addr "
		 "with -FI_EHOSTUNREACH: remove it with fi_av_remove and insert the new endpoint's address",
		 addr_to_string(p.raw).c_str(), (unsigned long)p.addr, conn);
	if (!was_dead)
		peer_failed(p, FI_EHOSTUNREACH, uint32_t(EfaStatus::PEER_REPLACED));
}

void Ep::foreign_packet(const Pkt &pkt, const verbs::Wc &wc)
{
	drops.foreign++;
	const unsigned version = pkt.buf[1];
	/* Its sender, if the device knows it (an address handle: we inserted it or sent to
	 * it). Another version's header need not carry a connid where v4's does, so the QP
	 * number names it. */
	Peer *p = nullptr;
	if (wc.src_known()) {
		p = peers.for_src(wc.slid, wc.src_qp);
		if (!p)
			if (fi_addr_t a = av->reverse_lookup(wc.slid, wc.src_qp); a != FI_ADDR_NOTAVAIL)
				p = peer_for_addr(a);
	}
	if (!warned_foreign) {
		warned_foreign = true;
		EFA_WARN(EpData,
			 "a packet of RDM protocol version %u (type %u, %u bytes) from QP %u%s%s: this provider speaks "
			 "version %u, as libfabric's efa provider does since 1.x; its sender runs something else "
			 "(an older build of this provider spoke version 1). Dropped; further ones are counted, not "
			 "logged; run the same protocol version on every node of the job",
			 version, unsigned(pkt.buf[0]), pkt.len, wc.src_qp, p ? ", " : "",
			 p ? addr_to_string(p->raw).c_str() : "", unsigned(v4::kVersion));
	}
	if (p && !p->foreign && !p->released)
		peer_foreign(*p, version);
}

void Ep::peer_foreign(Peer &p, unsigned version)
{
	const bool was_dead = p.dead;
	p.foreign = uint8_t(version);
	p.dead = true;
	EFA_WARN(EpData, "%s (fi_addr %lu) speaks RDM protocol version %u, not this provider's %u: its pending "
		 "operations fail with FI_EHOSTUNREACH and new ones with -FI_EHOSTUNREACH (%s)",
		 addr_to_string(p.raw).c_str(), (unsigned long)p.addr, version, unsigned(v4::kVersion),
		 efa_status_msg(uint32_t(EfaStatus::PEER_PROTOCOL_MISMATCH)));
	if (!was_dead)
		peer_failed(p, FI_EHOSTUNREACH, uint32_t(EfaStatus::PEER_PROTOCOL_MISMATCH));
}

void Ep::peer_revived(Peer &p)
{
	p.dead = false;
	p.down = 0;
	p.hs_sent = false; /* one dropped while it was dead: the next packet to it resends it */
	EFA_INFO(EpData, "%s (fi_addr %lu) is heard from again: operations to it are accepted",
		 addr_to_string(p.raw).c_str(), (unsigned long)p.addr);
}

ssize_t Ep::dead_peer(const Peer &p) const
{
	if (p.foreign) {
		EFA_DBG(EpData, "%s (fi_addr %lu) speaks RDM protocol version %u: -FI_EHOSTUNREACH",
			addr_to_string(p.raw).c_str(), (unsigned long)p.addr, unsigned(p.foreign));
		return -FI_EHOSTUNREACH;
	}
	EFA_DBG(EpData, "%s (fi_addr %lu) was declared unresponsive: -FI_EHOSTUNREACH (fi_av_remove it, or wait "
		"for it to be heard from)",
		addr_to_string(p.raw).c_str(), (unsigned long)p.addr);
	return -FI_EHOSTUNREACH;
}

void Ep::peer_failed(Peer &p, int err, uint32_t status)
{
	p.down = status;
	/* Packets held back by RNR never reach the device now. */
	while (Pkt *pkt = p.queued.pop_front()) {
		pkt->queued = false;
		if (pkt->probe)
			p.probe_out = false;
		TxOp *op = pkt->op;
		const bool inject = pkt->inject;
		io.put_tx(pkt);
		pkt_lost(op, inject, err, status);
	}
	/* Nothing to void on a peer that is gone (an EXT_VOID on the device comes back as any
	 * packet, and goes to the pool; a parked one, len 0, is on neither: it goes now). */
	p.voids.clear();
	if (p.void_pkt && !p.void_pkt->len)
		io.put_tx(p.void_pkt);
	p.void_pkt = nullptr;
	p.hs_owed = false;
	p.backoff_until = 0;
	p.backoff_us = 0;
	io.unbusy(p);

	/* Operations waiting for an answer of the peer. */
	tx.peer_failed(p, err, status);
	ctl_pending.erase(std::remove_if(ctl_pending.begin(), ctl_pending.end(),
					 [&](const Ctl &c) { return c.peer == &p; }),
			  ctl_pending.end());

	/* Messages from the peer. */
	rx.peer_failed(p, err, status);
}

/* ------------------------------------------------------------------ probes */

void Ep::probe_peers(uint64_t now)
{
	tx.mark_waiting();
	peers.for_each([&](Peer &p) {
		if (p.heard) {
			p.heard = false;
			p.silent_since = now;
		}
		const bool waits = p.waiting || !p.msgs.empty();
		p.waiting = false;
		if (!waits || p.dead || p.released || p.probe_out || now - p.silent_since < probe_ns)
			return;
		send_probe(p);
	});
}

bool Ep::send_probe(Peer &p)
{
	Pkt *pkt = tx_pkt(p, nullptr);
	if (!pkt)
		return false; /* the next check tries again */
	/* A HANDSHAKE: every v4 peer accepts it at any time, and it changes nothing there
	 * (protocol.md section 3). Its completion is the device's verdict. */
	pkt->len = uint32_t(write_handshake(pkt->buf, pkt->cap, features, qkey, device_version));
	pkt->probe = true;
	p.probe_out = true;
	EFA_DBG(EpData, "%s is silent with operations waiting on it: probing", addr_to_string(p.raw).c_str());
	post(pkt);
	return true;
}

} // namespace efa::rdm
