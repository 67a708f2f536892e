/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The request-to-message family (docs/protocol.md section 5): the RTMs that start a
 * message, EAGER, MEDIUM, LONGCTS and LONGREAD (untagged and tagged, with and without
 * delivery complete), and our EXT_VOID. Each is built here from its operation (the
 * Sender chose the protocol), its send completion is the generic one (Sender::pkt_sent)
 * except EXT_VOID runs (below), and its receive handler is the Receiver's start_msg /
 * add_segment / skip_ids.
 */
#include "rdm/ep.h"

#include "efa_errno.h"
#include "log.h"

#include <algorithm>

namespace efa::rdm {

/* ------------------------------------------------------------------ building */

void Sender::post_eager(TxOp &op, uint16_t flags)
{
	Pkt *pkt = tx_pkt(*op.peer, &op);
	op.sent = op.len;
	send_eager(port_, pkt, *op.peer, flags,
		   EagerReq{op.kind == TxKind::Tagged, op.need_receipt, op.msg_id, op.id, op.tag, op.data, op.iov,
			    op.iov_count, op.len});
}

void Sender::payload(Pkt *pkt, const TxOp &op, uint64_t off, size_t n, v4::Writer &w)
{
	uint64_t in = off; /* offset within iov i */
	for (size_t i = 0; i < op.iov_count; i++) {
		const size_t l = op.iov[i].iov_len;
		if (in >= l) {
			in -= l;
			continue;
		}
		const uint8_t *at = static_cast<const uint8_t *>(op.iov[i].iov_base) + in;
		if (in + n <= l && port_.tx_data_lkey(op.desc[i], at, n, pkt->data_lkey)) {
			pkt->data = at;
			pkt->data_len = uint32_t(n);
			return;
		}
		break;
	}
	iov_to_buf(op.iov, op.iov_count, off, w.reserve(n), n);
}

void Sender::post_medium(TxOp &op, uint16_t flags, size_t seg)
{
	const bool tagged = op.kind == TxKind::Tagged, dc = op.need_receipt;
	const Type t = rtm_type(Type::MediumMsgRtm, tagged, dc);
	/* Held while posting: a post the endpoint refuses fails the operation, which must
	 * not end (and go back to its pool) before the loop has stopped using it. */
	op.inflight++;
	for (uint64_t off = 0; off < op.len && !op.err; off += seg) {
		const size_t n = std::min<uint64_t>(seg, op.len - off);
		Pkt *pkt = tx_pkt(*op.peer, &op);
		v4::Writer w(pkt->buf, pkt->cap);
		if (dc) {
			v4::DcMediumRtm *h = w.header<v4::DcMediumRtm>(t, flags);
			h->r.msg_id = op.msg_id;
			h->send_id = op.id;
			h->msg_length = op.len;
			h->seg_offset = off;
		} else {
			v4::MediumRtm *h = w.header<v4::MediumRtm>(t, flags);
			h->r.msg_id = op.msg_id;
			h->msg_length = op.len;
			h->seg_offset = off;
		}
		if (tagged)
			w.u64(op.tag);
		req_opts(w, *op.peer, flags, op.data);
		payload(pkt, op, off, n, w);
		pkt->len = uint32_t(w.size());
		op.sent += n;
		port_.tx_post_more(pkt);
	}
	/* All segments behind one doorbell: the device sends them back to back. */
	port_.tx_ring();
	release(op);
}

void Sender::post_longcts(TxOp &op, uint16_t flags, size_t room)
{
	op.id = ids_.add(&op);
	const size_t first = std::min<uint64_t>(op.len, room);
	const bool tagged = op.kind == TxKind::Tagged;
	Pkt *pkt = tx_pkt(*op.peer, &op);
	v4::Writer w(pkt->buf, pkt->cap);
	v4::LongCtsRtm *h = w.header<v4::LongCtsRtm>(rtm_type(Type::LongCtsMsgRtm, tagged, op.need_receipt), flags);
	h->r.msg_id = op.msg_id;
	h->msg_length = op.len;
	h->send_id = op.id;
	h->credit_request = uint32_t(cfg_.credits);
	if (tagged)
		w.u64(op.tag);
	req_opts(w, *op.peer, flags, op.data);
	iov_to_buf(op.iov, op.iov_count, 0, w.reserve(first), first);
	pkt->len = uint32_t(w.size());
	op.sent = first;
	port_.tx_post(pkt);
}

/* ------------------------------------------------------------------ LONGREAD */

bool Sender::longread_ok(const Peer &p, uint64_t len, size_t iov_count, size_t min_read) const
{
	return cfg_.use_device_rdma && len && len >= min_read && p.hs_got && (cfg_.features & v4::kExtraRdmaRead) &&
	       (p.features & v4::kExtraRdmaRead) && iov_count <= kMaxRmaIov;
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
	const bool tagged = op.kind == TxKind::Tagged;
	Pkt *pkt = tx_pkt(p, &op);
	v4::Writer w(pkt->buf, pkt->cap);
	/* No delivery-complete twin: the EOR comes once the data is in place. */
	v4::LongReadRtm *h = w.header<v4::LongReadRtm>(rtm_type(Type::LongReadMsgRtm, tagged, false), flags);
	h->r.msg_id = op.msg_id;
	h->msg_length = op.len;
	h->send_id = op.id;
	h->read_iov_count = n;
	if (tagged)
		w.u64(op.tag);
	req_opts(w, p, flags, op.data);
	w.iovs(riov, n);
	pkt->len = uint32_t(w.size());
	port_.tx_post(pkt);
	return 0;
}

/* ------------------------------------------------------------------ EXT_VOID runs (FI_RM_DISABLED) */

/*
 * Message id `id` to p was refused (FI_ENORX): it joins p's runs to void, and `pkt`
 * (its refused packet) becomes the EXT_VOID packet if p has none, else goes back to the
 * pool. One EXT_VOID per peer at a time, each naming up to kMaxVoidRun consecutive ids:
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

/* Sends p's next EXT_VOID run in pkt (parked, len 0, until p's HANDSHAKE says whether it
 * takes one), or frees it when none is left or p does not take it. */
void Ep::void_next(Peer &p, Pkt *pkt)
{
	if (p.voids.empty() || p.dead || p.released || (p.hs_got && !p.ext)) {
		if (!p.voids.empty() && !p.dead && !p.released)
			EFA_WARN(EpData, "%s does not take our EXT_VOID (not this provider): it will wait for the %zu "
				 "message id run(s) whose sends failed with FI_ENORX, as upstream's peers do; use "
				 "FI_RM_ENABLED with such peers",
				 addr_to_string(p.raw).c_str(), p.voids.size());
		p.voids.clear();
		p.void_pkt = nullptr;
		io.put_tx(pkt);
		return;
	}
	if (!p.hs_got) {
		/* Whether it takes EXT_VOID is in its HANDSHAKE: the run waits for it
		 * (handle_handshake sends it). */
		p.void_pkt = pkt;
		pkt->len = 0;
		pkt->op = nullptr;
		return;
	}
	const auto [first, count] = p.voids.front();
	p.voids.erase(p.voids.begin());
	v4::Writer w(pkt->buf, pkt->cap);
	v4::ExtVoid *h = w.header<v4::ExtVoid>(Type::ExtVoid, v4::kFlagConnId);
	h->connid = qkey;
	h->msg_id = first;
	h->count = count;
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

/* An eager message (without delivery complete) that a posted receive takes whole: placed
 * and completed at once, without a message entry (the common small message). False
 * leaves it to the general path: no receive, a multi-receive buffer, or truncation.
 * Ep::rx_eager calls it straight from the packet's arrival. */
void Receiver::start_msg(Peer &p, Pkt &pkt, const Parsed &pk)
{
	if (pk.type == Type::EagerTagRtm || pk.type == Type::EagerMsgRtm) {
		const v4::Eager e{.tagged = pk.info.tagged,
				  .has_cq_data = pk.has_cq_data,
				  .msg_id = msg_id_of(pk),
				  .connid = pk.connid,
				  .tag = pk.tag,
				  .cq_data = pk.cq_data,
				  .payload = pk.payload,
				  .payload_len = pk.payload_len};
		if (take_eager(port_, p, e))
			return;
	}
	MsgRx *m = msgs_.get();
	m->peer = &p;
	link(p, *m);
	m->src = p.addr;
	m->tagged = pk.info.tagged;
	m->msg_id = msg_id_of(pk);
	m->tag = pk.tag;
	m->has_data = pk.has_cq_data;
	m->data = pk.cq_data & 0xffffffffu; /* cq_data_size is 4 */
	m->dc = pk.info.dc;
	switch (pk.type) {
	case Type::DcEagerMsgRtm:
	case Type::DcEagerTagRtm: m->send_id = pk.as<v4::DcEagerRtm>().send_id; [[fallthrough]];
	case Type::EagerMsgRtm:
	case Type::EagerTagRtm:
		m->kind = RxKind::Eager;
		m->msg_len = pk.payload_len;
		break;
	case Type::MediumMsgRtm:
	case Type::MediumTagRtm:
	case Type::DcMediumMsgRtm:
	case Type::DcMediumTagRtm:
		m->kind = RxKind::Medium;
		if (m->dc) {
			m->send_id = pk.as<v4::DcMediumRtm>().send_id;
			m->msg_len = pk.as<v4::DcMediumRtm>().msg_length;
		} else {
			m->msg_len = pk.as<v4::MediumRtm>().msg_length;
		}
		m->alink.m = m;
		p.active.push_back(&m->alink);
		take_segment(*m, pk);
		break;
	case Type::LongReadMsgRtm:
	case Type::LongReadTagRtm: {
		const v4::LongReadRtm h = pk.as<v4::LongReadRtm>();
		start_long(*m, RxKind::LongRead, h.msg_length, h.send_id, pk);
		m->dc = false; /* the EOR answers it */
		break;
	}
	case Type::RuntReadMsgRtm:
	case Type::RuntReadTagRtm: {
		/* The first runt_length bytes in packets like MEDIUM's, the rest by our reads
		 * from the read iovs (which describe the whole message), then EOR. */
		const v4::RuntRtm h = pk.as<v4::RuntRtm>();
		start_long(*m, RxKind::LongRead, h.msg_length, h.send_id, pk);
		m->dc = false;
		m->runt = h.runt_length;
		m->alink.m = m;
		p.active.push_back(&m->alink);
		take_segment(*m, pk);
		break;
	}
	default: { /* LONGCTS, with or without delivery complete */
		const v4::LongCtsRtm h = pk.as<v4::LongCtsRtm>();
		start_long(*m, RxKind::LongCts, h.msg_length, h.send_id, pk);
		break;
	}
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

void Receiver::start_long(MsgRx &m, RxKind kind, uint64_t msg_len, uint32_t send_id, const Parsed &pk)
{
	m.kind = kind;
	m.msg_len = msg_len;
	m.send_id = send_id;
	if (kind == RxKind::LongRead) {
		for (uint32_t i = 0; i < pk.read_iov_count; i++) /* at most kMaxRmaIov: arrival.cpp */
			m.rd[i] = pk.read(i);
		m.rd_count = pk.read_iov_count;
	} else {
		m.granted = pk.payload_len; /* the first bytes came with the REQ */
	}
}

void Receiver::skip_ids(Peer &p, const Parsed &pk)
{
	/* Abandoned messages (FI_ENORX at their sender): this id and the next count - 1
	 * are consumed, nothing is delivered. */
	const uint32_t count = pk.as<v4::ExtVoid>().count;
	if (!count || count > kMaxVoidRun) {
		drops_.malformed++;
		return;
	}
	p.rob.skip(count - 1, [this](Pkt *c) {
		drops_.dup++;
		port_.rx_free_copy(c);
	});
}

void Receiver::route_segment(Peer &p, Pkt &pkt, const Parsed &pk)
{
	if (!is_segmented(pk.type)) {
		drops_.dup++;
		return;
	}
	MsgLink *l = active_msg(p, msg_id_of(pk));
	if (!l) {
		drops_.dup++;
		return;
	}
	add_segment(*l->m, pkt, pk);
}

void Receiver::add_segment(MsgRx &m, Pkt &pkt, const Parsed &pk)
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
	const uint64_t off = data_offset(pk), end = off + pk.payload_len;
	auto it = std::lower_bound(m.segs.begin(), m.segs.end(), std::make_pair(off, uint64_t(0)));
	if (it != m.segs.end() && it->first < end)
		return false;
	if (it != m.segs.begin() && std::prev(it)->first + std::prev(it)->second > off)
		return false;
	m.segs.emplace(it, off, pk.payload_len);
	m.runt_got += is_runtread_rtm(pk.type) ? pk.payload_len : 0;
	return true;
}

} // namespace efa::rdm
