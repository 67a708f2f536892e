/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The request-to-send family (docs/protocol.md section 8): the REQs that start a
 * message, EAGER, MEDIUM, LONGCTS and LONGREAD (untagged and tagged, the VOID form of
 * EAGER included). Each is built here from its operation (the Sender chose the
 * protocol), its send completion is the generic one (Sender::pkt_sent) except VOID
 * runs (below), and its receive handler is the Receiver's start_msg / add_segment.
 */
#include "rdm/ep.h"

#include "efa_errno.h"
#include "log.h"

#include <algorithm>

namespace efa::rdm {

/* ------------------------------------------------------------------ building */

void Sender::req_tail(PktWriter &w, const TxOp &op, uint16_t flags) const
{
	raw_addr(w, *op.peer);
	if (flags & kFlagCqData)
		w.cq_data(op.data);
}

void Sender::post_eager(TxOp &op, uint16_t flags)
{
	Pkt *pkt = tx_pkt(*op.peer, &op);
	PktWriter w(pkt->buf, pkt->cap);
	w.rtm<EagerHdr>(PktType::EagerMsg, op.kind == TxKind::Tagged, cfg_.qkey, flags, op.msg_id, uint32_t(op.len),
			op.tag);
	req_tail(w, op, flags);
	iov_to_buf(op.iov, op.iov_count, 0, w.reserve(op.len), op.len);
	pkt->len = uint32_t(w.size());
	op.sent = op.len;
	port_.tx_post(pkt);
}

void Sender::post_medium(TxOp &op, uint16_t flags, size_t seg)
{
	/* Held while posting: a post the endpoint refuses fails the operation, which must
	 * not end (and go back to its pool) before the loop has stopped using it. */
	op.inflight++;
	for (uint64_t off = 0; off < op.len && !op.err; off += seg) {
		const size_t n = std::min<uint64_t>(seg, op.len - off);
		Pkt *pkt = tx_pkt(*op.peer, &op);
		PktWriter w(pkt->buf, pkt->cap);
		MediumHdr *h = w.rtm<MediumHdr>(PktType::MediumMsg, op.kind == TxKind::Tagged, cfg_.qkey, flags, op.msg_id,
						uint32_t(n), op.tag);
		h->msg_len = op.len;
		h->seg_off = off;
		req_tail(w, op, flags);
		iov_to_buf(op.iov, op.iov_count, off, w.reserve(n), n);
		pkt->len = uint32_t(w.size());
		op.sent += n;
		port_.tx_post(pkt);
	}
	release(op);
}

void Sender::post_longcts(TxOp &op, uint16_t flags, size_t room)
{
	op.id = ids_.add(&op);
	const size_t first = std::min<uint64_t>(op.len, room);
	Pkt *pkt = tx_pkt(*op.peer, &op);
	PktWriter w(pkt->buf, pkt->cap);
	LongCtsHdr *h = w.rtm<LongCtsHdr>(PktType::LongCtsMsg, op.kind == TxKind::Tagged, cfg_.qkey, flags, op.msg_id,
					  uint32_t(first), op.tag);
	h->msg_len = op.len;
	h->send_id = op.id;
	h->credits = uint32_t(cfg_.credits);
	req_tail(w, op, flags);
	iov_to_buf(op.iov, op.iov_count, 0, w.reserve(first), first);
	pkt->len = uint32_t(w.size());
	op.sent = first;
	port_.tx_post(pkt);
}

/* ------------------------------------------------------------------ LONGREAD */

bool Sender::longread_ok(const Peer &p, uint64_t len, size_t iov_count) const
{
	return cfg_.use_device_rdma && len && len >= cfg_.min_read && p.hs_got && (cfg_.features & kFeatRdmaRead) &&
	       (p.features & kFeatRdmaRead) && iov_count <= kMaxRmaIov;
}

int Sender::longread_send(TxOp &op, uint16_t flags)
{
	Peer &p = *op.peer;
	RmaIov riov[kMaxRmaIov];
	uint32_t n = 0;
	for (size_t i = 0; i < op.iov_count; i++) {
		void *base = op.iov[i].iov_base;
		const size_t len = op.iov[i].iov_len;
		if (!len)
			continue;
		uint64_t key = 0;
		if (int r = port_.tx_read_key(base, len, op.desc[i], op.reg[i], key))
			return r;
		riov[n++] = RmaIov{reinterpret_cast<uintptr_t>(base), len, key};
	}
	op.proto = Proto::LongRead;
	op.id = ids_.add(&op);
	op.need_receipt = true; /* the EOR */
	op.sent = op.len;
	Pkt *pkt = tx_pkt(p, &op);
	PktWriter w(pkt->buf, pkt->cap);
	LongReadHdr *h = w.rtm<LongReadHdr>(PktType::LongReadMsg, op.kind == TxKind::Tagged, cfg_.qkey,
					    uint16_t(flags & ~kFlagDeliveryComplete), op.msg_id, 0, op.tag);
	h->msg_len = op.len;
	h->send_id = op.id;
	h->iov_count = n;
	raw_addr(w, p);
	if (flags & kFlagCqData)
		w.cq_data(op.data);
	w.bytes(riov, n * sizeof(RmaIov));
	pkt->len = uint32_t(w.size());
	port_.tx_post(pkt);
	return 0;
}

/* ------------------------------------------------------------------ VOID runs (FI_RM_DISABLED) */

/*
 * Message id `id` to p was refused (FI_ENORX): it joins p's runs to void, and `pkt`
 * (its refused packet) becomes the VOID packet if p has none, else goes back to the
 * pool. One VOID per peer at a time, each naming up to kMaxVoidRun consecutive ids:
 * a receiver that sleeps costs its senders one packet and a few runs, and never holds
 * back their sends.
 */
void Ep::void_ids(Peer &p, Pkt *pkt, uint32_t id)
{
	/* Refusals come back in the device's order, not in id order: the id extends a run
	 * among the last few that ends just before it or starts just after it (both: they
	 * become one), so a sleeping receiver's refused ids stay a handful of runs. */
	auto &runs = p.voids;
	constexpr size_t kLook = 32;
	const size_t from = runs.size() > kLook ? runs.size() - kLook : 0;
	size_t before = SIZE_MAX, after = SIZE_MAX;
	for (size_t i = from; i < runs.size(); i++) {
		if (runs[i].first + runs[i].second == id && runs[i].second < kMaxVoidRun)
			before = i;
		else if (runs[i].first == id + 1 && runs[i].second < kMaxVoidRun)
			after = i;
	}
	if (before != SIZE_MAX && after != SIZE_MAX && runs[before].second + 1 + runs[after].second <= kMaxVoidRun) {
		runs[before].second += 1 + runs[after].second;
		runs.erase(runs.begin() + ptrdiff_t(after));
	} else if (before != SIZE_MAX) {
		runs[before].second++;
	} else if (after != SIZE_MAX) {
		runs[after].first = id;
		runs[after].second++;
	} else {
		runs.emplace_back(id, 1);
	}
	if (p.void_pkt) {
		io.put_tx(pkt);
		return;
	}
	void_next(p, pkt);
}

/* Sends p's next VOID run in pkt (the VOID packet), or frees it when none is left. */
void Ep::void_next(Peer &p, Pkt *pkt)
{
	if (p.voids.empty() || p.dead || p.released) {
		p.voids.clear();
		p.void_pkt = nullptr;
		io.put_tx(pkt);
		return;
	}
	const auto [first, count] = p.voids.front();
	p.voids.pop_front();
	PktWriter w(pkt->buf, pkt->cap);
	/* The run's length travels in the tag field (protocol.md section 11). */
	w.rtm<EagerHdr>(PktType::EagerMsg, false, qkey, uint16_t(req_flags(p) | kFlagVoid), first, 0, count);
	write_raw_addr(w, p);
	pkt->len = uint32_t(w.size());
	pkt->op = nullptr;
	pkt->rnr_tries = 0;
	p.void_pkt = pkt;
	if (post(pkt)) { /* the peer is gone, or the device refused the work request */
		p.void_pkt = nullptr;
		p.voids.clear();
	}
}

/* ------------------------------------------------------------------ receiving */

void Receiver::start_msg(Peer &p, const Pkt &pkt, const Parsed &pk)
{
	const RtmHdr &h = pk.as<RtmHdr>();
	if (pk.base->flags & kFlagVoid) {
		/* Abandoned messages (FI_ENORX at their sender): this id and the next tag - 1
		 * are consumed, nothing is delivered. */
		p.rob.skip(uint32_t(h.tag - 1), [this](Pkt *c) {
			drops_.dup++;
			port_.rx_free_copy(c);
		});
		return;
	}
	MsgRx *m = msgs_.get();
	m->peer = &p;
	link(p, *m);
	m->src = p.addr;
	m->type = pk.type;
	m->tagged = is_tagged(pk.type);
	m->msg_id = h.msg_id;
	m->tag = h.tag;
	m->has_data = pk.has_cq_data;
	m->data = pk.cq_data & 0xffffffffu; /* cq_data_size is 4 */
	m->dc = pk.base->flags & kFlagDeliveryComplete;
	switch (pk.type) {
	case PktType::MediumMsg:
	case PktType::MediumTag:
		m->msg_len = pk.as<MediumHdr>().msg_len;
		m->alink.m = m;
		p.active.push_back(&m->alink);
		take_segment(*m, pk);
		break;
	case PktType::LongCtsMsg:
	case PktType::LongCtsTag:
		m->msg_len = pk.as<LongCtsHdr>().msg_len;
		m->send_id = pk.as<LongCtsHdr>().send_id;
		m->granted = h.seg_len;
		break;
	case PktType::LongReadMsg:
	case PktType::LongReadTag:
		m->msg_len = pk.as<LongReadHdr>().msg_len;
		m->send_id = pk.as<LongReadHdr>().send_id;
		m->dc = false; /* the EOR answers it */
		std::copy(pk.iov, pk.iov + pk.iov_count, m->rd);
		m->rd_count = pk.iov_count;
		break;
	default:
		m->msg_len = h.seg_len;
		break;
	}
	RxOp *r = match_.find_posted(m->tagged, m->src, m->tag);

	if (!r) {
		m->held.push_back(port_.rx_copy(pkt));
		match_.add_unexpected(m->tagged, m);
		return;
	}
	if (!r->multi)
		match_.unpost(r->tagged, r);
	bind(*m, r);
	place(*m, pk);
	advance(m);
}

void Receiver::route_segment(Peer &p, const Pkt &pkt, const Parsed &pk)
{
	if (pk.type != PktType::MediumMsg && pk.type != PktType::MediumTag) {
		drops_.dup++;
		return;
	}
	MsgLink *l = active_msg(p, pk.as<RtmHdr>().msg_id);
	if (!l) {
		drops_.dup++;
		return;
	}
	add_segment(*l->m, pkt, pk);
}

void Receiver::add_segment(MsgRx &m, const Pkt &pkt, const Parsed &pk)
{
	if (!take_segment(m, pk)) {
		/* A segment already taken: counting its bytes twice would complete the message
		 * while another segment is missing. */
		drops_.dup++;
		return;
	}
	if (!m.bound) {
		m.held.push_back(port_.rx_copy(pkt)); /* not matched yet */
		return;
	}
	place(m, pk);
	advance(&m);
}

bool Receiver::take_segment(MsgRx &m, const Parsed &pk)
{
	const uint64_t off = pk.as<MediumHdr>().seg_off, end = off + pk.payload_len;
	auto it = std::lower_bound(m.segs.begin(), m.segs.end(), std::make_pair(off, uint64_t(0)));
	if (it != m.segs.end() && it->first < end)
		return false;
	if (it != m.segs.begin() && std::prev(it)->first + std::prev(it)->second > off)
		return false;
	m.segs.emplace(it, off, pk.payload_len);
	return true;
}

} // namespace efa::rdm
