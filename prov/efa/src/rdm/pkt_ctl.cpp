/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The control packet family (docs/protocol.md sections 3, 5, 8 and
 * 10): for each type, how it is built and sent,
 * and what its arrival does.
 *
 *  - HANDSHAKE: the extra features and requests we announce, and our extension's mark.
 *  - CTS: a long-CTS receiver's (or emulated-read requester's) window grants.
 *  - EOR: the end of a read-based message's RDMA reads. READ_NACK: its refusal.
 *  - RECEIPT: delivery complete.
 *  - ATOMRSP, EXT_ERROR, EXT_WRITE_DATA: answers and notices, queued (send_ctl) when no
 *    transmit buffer is free and sent by progress.
 */
#include "rdm/ep.h"

#include "efa_errno.h"
#include "log.h"

#include <cstring>

namespace efa::rdm {

/* ------------------------------------------------------------------ HANDSHAKE */

bool Ep::send_handshake(Peer &p)
{
	p.hs_sent = true;
	Pkt *pkt = tx_pkt(p, nullptr);
	if (!pkt) {
		p.hs_owed = true;
		io.mark_busy(p);
		return false;
	}
	p.hs_owed = false;
	p.hs_inflight = true;
	p.hs_blind = !p.got_pkt;
	pkt->len = uint32_t(write_handshake(pkt->buf, pkt->cap, features, qkey, device_version));
	post(pkt);
	return true;
}

void Ep::handle_handshake(Peer &p, const Parsed &pk)
{
	HandshakeInfo hs;
	decode_handshake(pk, hs);
	const bool first = !p.hs_got;
	p.hs_got = true;
	p.features = hs.features;
	p.ext = hs.ext;
	if (first && pk.has_user_recv_qp)
		EFA_WARN(EpData, "%s asks for messages on its user receive QP (extra feature 7: libfabric 1.22-2.5 with "
			 "zero-copy receive), which this provider does not do; it will not take our messages: turn "
			 "zero-copy receive off there (FI_EFA_USE_ZCPY_RX=0)", addr_to_string(p.raw).c_str());
	/* Ours went out before the peer had sent us anything: a v4 node drops a HANDSHAKE
	 * from an address it does not know yet (it learns ours from a REQ's raw address),
	 * so it may never have had it. Its own HANDSHAKE says it knows us now. */
	if (first && p.hs_blind)
		send_handshake(p);
	/* An EXT_VOID run parked until we knew whether the peer takes it. */
	if (first && p.void_pkt && !p.void_pkt->len)
		void_next(p, p.void_pkt);
}

/* ------------------------------------------------------------------ CTS */

bool Receiver::send_cts(MsgRx &m)
{
	Pkt *pkt = port_.rx_tx_pkt(*m.peer);
	if (!pkt) {
		m.owes_cts = true;
		owe(m);
		return false;
	}
	m.owes_cts = false;
	if (!m.has_id) {
		m.id = ids_.add(&m);
		m.has_id = true;
	}
	const uint64_t window = std::min<uint64_t>(m.msg_len - m.granted, cfg_.cts_window);
	v4::Writer w(pkt->buf, pkt->cap);
	v4::Cts *h = w.header<v4::Cts>(Type::Cts, v4::kFlagConnId);
	h->connid = cfg_.qkey;
	h->send_id = m.send_id;
	h->recv_id = m.id;
	h->recv_length = window;
	pkt->len = uint32_t(w.size());
	m.granted += window;
	port_.rx_post(pkt);
	return true;
}

void Sender::handle_cts(Peer &p, const Parsed &pk)
{
	const v4::Cts h = pk.as<v4::Cts>();
	TxOp *op = ids_.find(h.send_id);
	if (!op || op->peer != &p || op->err || (op->kind == TxKind::Read && !op->responder)) {
		drops_.unknown++;
		return;
	}
	op->peer_id = h.recv_id;
	op->window += h.recv_length;
	pump(*op);
}

/* ------------------------------------------------------------------ EOR, READ_NACK */

bool Receiver::send_eor(MsgRx &m)
{
	Pkt *pkt = port_.rx_tx_pkt(*m.peer);
	if (!pkt) {
		m.owes_eor = true;
		owe(m);
		return false;
	}
	m.owes_eor = false;
	v4::Writer w(pkt->buf, pkt->cap);
	v4::Eor *h = w.header<v4::Eor>(Type::Eor, v4::kFlagConnId);
	h->send_id = m.send_id;
	h->recv_id = m.has_id ? m.id : 0;
	h->connid = cfg_.qkey;
	pkt->len = uint32_t(w.size());
	port_.rx_post(pkt);
	return true;
}

void Sender::handle_eor(Peer &p, const Parsed &pk)
{
	TxOp *op = ids_.find(pk.as<v4::Eor>().send_id);
	if (!op || op->peer != &p || op->proto != Proto::LongRead || op->got_receipt) {
		drops_.unknown++;
		return;
	}
	op->got_receipt = true;
	finish(op);
}

/* The receiver of our read-based message could not read it (it registers its buffer,
 * or its device refused the read). We do not announce READ_NACK (no fall back to
 * long-CTS), so the send fails. */
void Sender::handle_read_nack(Peer &p, const Parsed &pk)
{
	TxOp *op = ids_.find(pk.as<v4::ReadNack>().send_id);
	if (!op || op->peer != &p || op->proto != Proto::LongRead || op->got_receipt) {
		drops_.unknown++;
		return;
	}
	EFA_WARN(EpData, "%s could not read a message of %lu bytes from us (READ_NACK): the send fails; "
		 "FI_EFA_USE_DEVICE_RDMA=0 at either end avoids the read-based protocol",
		 addr_to_string(p.raw).c_str(), (unsigned long)op->len);
	op->window = 0;
	fail(op, FI_EIO, uint32_t(EfaStatus::TARGET_REFUSED));
}

/* ------------------------------------------------------------------ RECEIPT */

/* Delivery complete: the message (or emulated write) is whole at this end. */
bool Receiver::send_receipt(MsgRx &m)
{
	Pkt *pkt = port_.rx_tx_pkt(*m.peer);
	if (!pkt) {
		m.owes_receipt = true;
		owe(m);
		return false;
	}
	m.owes_receipt = false;
	v4::Writer w(pkt->buf, pkt->cap);
	v4::Receipt *h = w.header<v4::Receipt>(Type::Receipt, v4::kFlagConnId);
	h->send_id = m.send_id;
	h->msg_id = m.msg_id;
	h->connid = cfg_.qkey;
	pkt->len = uint32_t(w.size());
	port_.rx_post(pkt);
	return true;
}

void Sender::handle_receipt(Peer &p, const Parsed &pk)
{
	TxOp *op = ids_.find(pk.as<v4::Receipt>().send_id);
	if (!op || op->peer != &p || !op->need_receipt || op->got_receipt || op->proto == Proto::LongRead) {
		drops_.unknown++;
		return;
	}
	op->got_receipt = true;
	finish(op);
}

/* ------------------------------------------------------------------ target answers: ATOMRSP, RECEIPT, EXT_ERROR */

/* The remote CQ data of a device write from a peer of ours: it arrived in one of our
 * receive packets, which hold a CQ entry each, so no peer can overrun the CQ. */
void Ep::handle_write_data(Peer &p, const Parsed &pk)
{
	const v4::ExtWriteData h = pk.as<v4::ExtWriteData>();
	count(kCntrRemoteWrite, true);
	if (!rx_cq)
		return;
	fi_cq_tagged_entry e{};
	e.flags = FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA;
	e.data = h.cq_data & 0xffffffffu; /* cq_data_size is 4 */
	e.len = size_t(h.length);
	rx_cq->push(e, p.addr);
}

void Sender::handle_error(Peer &p, const Parsed &pk)
{
	const v4::ExtError h = pk.as<v4::ExtError>();
	TxOp *op = ids_.find(h.op_id);
	if (!op || op->peer != &p) {
		drops_.unknown++;
		return;
	}
	EFA_DBG(EpData, "%s refused an operation: %s", addr_to_string(p.raw).c_str(), fi_strerror(int(h.err)));
	op->window = 0;
	fail(op, int(h.err), uint32_t(EfaStatus::TARGET_REFUSED));
}

void Ep::send_ctl(Ctl c)
{
	/* Keep the order of answers: nothing overtakes what already waits. */
	if (!ctl_pending.empty() || !try_ctl(c))
		ctl_pending.push_back(std::move(c));
}

/* The owed answers in order, until one finds no transmit buffer; an EXT_ERROR waiting for
 * its peer's HANDSHAKE stays where it is without holding back answers to other peers. */
void Ep::send_pending_ctl()
{
	for (auto it = ctl_pending.begin(); it != ctl_pending.end();) {
		if (waits_handshake(*it)) {
			++it;
			continue;
		}
		if (!try_ctl(*it))
			return;
		it = ctl_pending.erase(it);
	}
}

bool Ep::try_ctl(Ctl &c)
{
	Peer &p = *c.peer;
	if (waits_handshake(c))
		return false;
	if (c.type == Type::ExtError) {
		/* Only a peer of ours takes it, which its HANDSHAKE says (it answers ours). */
		if (!p.ext || p.dead || p.released) {
			if (!p.ext && !p.dead && !p.released)
				EFA_WARN(EpData, "refused an operation of %s (%s); it does not take our EXT_ERROR (not "
					 "this provider), so its operation will not end: check its keys, bounds and "
					 "access flags", addr_to_string(p.raw).c_str(), fi_strerror(int(c.err)));
			return true;
		}
	}
	Pkt *pkt = tx_pkt(p, nullptr);
	if (!pkt)
		return false;
	v4::Writer w(pkt->buf, pkt->cap);
	switch (c.type) {
	case Type::Receipt: {
		v4::Receipt *h = w.header<v4::Receipt>(Type::Receipt, v4::kFlagConnId);
		h->send_id = c.a;
		h->msg_id = c.b;
		h->connid = qkey;
		break;
	}
	case Type::ExtWriteData: {
		v4::ExtWriteData *h = w.header<v4::ExtWriteData>(Type::ExtWriteData, v4::kFlagConnId);
		h->connid = qkey;
		h->cq_data = c.data;
		h->length = c.len;
		break;
	}
	case Type::ExtError: {
		v4::ExtError *h = w.header<v4::ExtError>(Type::ExtError, v4::kFlagConnId);
		h->connid = qkey;
		h->op_id = c.a;
		h->err = c.err;
		break;
	}
	default: {
		v4::AtomRsp *h = w.header<v4::AtomRsp>(Type::AtomRsp, v4::kFlagConnId);
		h->connid = qkey;
		h->recv_id = c.a;
		h->seg_length = c.payload.size();
		w.bytes(c.payload.data(), c.payload.size());
		break;
	}
	}
	pkt->len = uint32_t(w.size());
	post(pkt);
	return true;
}

} // namespace efa::rdm
