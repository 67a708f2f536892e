/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The control packet family (docs/protocol.md sections 4, 5, 9, 10 and 12.2): for each
 * type, how it is built and sent, and what its arrival does.
 *
 *  - HANDSHAKE: what an endpoint announces (features, MTU, reorder window); the protocol
 *    probe that asks a peer not known to speak this protocol, and its answer.
 *  - CTS: a long-CTS receiver's window grants.
 *  - EOR: the end of a read-based message's RDMA reads.
 *  - RECEIPT: delivery complete.
 *  - WRITE_DATA, ERROR, ATOMRSP: target answers, queued (send_ctl) when no transmit
 *    buffer is free and sent by progress.
 */
#include "rdm/ep.h"

#include "efa_errno.h"
#include "log.h"

#include <cstring>

namespace efa::rdm {

/* ------------------------------------------------------------------ HANDSHAKE and the protocol probe */

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
	pkt->len = uint32_t(write_handshake(pkt->buf, pkt->cap, own_handshake()));
	post(pkt);
	return true;
}

ssize_t Ep::ask_protocol(Peer &p)
{
	const uint64_t now = now_ns();
	if (!p.asked_at) {
		Pkt *pkt = tx_pkt(p, nullptr);
		if (!pkt)
			return -FI_EAGAIN;
		pkt->len = uint32_t(write_probe(pkt->buf, pkt->cap, self_addr()));
		p.asked_at = now;
		EFA_INFO(EpData, "%s (fi_addr %lu): its address does not say it speaks this provider's RDM protocol "
			 "(names from fi_getname do; text and node/service addresses and other providers' names "
			 "do not): asking it first; work to it waits for the answer",
			 addr_to_string(p.raw).c_str(), (unsigned long)p.addr);
		post(pkt);
	} else if (!p.asked_warned && now - p.asked_at > kAskWarnNs) {
		p.asked_warned = true;
		EFA_WARN(EpData, "%s (fi_addr %lu) has not said which RDM protocol it speaks %lu s after we asked: "
			 "sends, RMA and atomics to it return -FI_EAGAIN until it does. It answers once its "
			 "endpoint is enabled and progressed; insert the name its fi_getname returns to skip "
			 "the question",
			 addr_to_string(p.raw).c_str(), (unsigned long)p.addr, (unsigned long)(kAskWarnNs / 1000000000));
	}
	return -FI_EAGAIN;
}

void Ep::handle_probe(const RawAddr &from, const verbs::Wc &wc)
{
	Peer *p = peer_from_src(wc, from.qkey, &from, "protocol probe");
	if (!p || p->foreign || p->replaced || p->released)
		return;
	p->speaks_ours = true;
	peer_heard(*p);
	/* The answer: a HANDSHAKE of ours, also when one went out before (the asker waits
	 * for a packet of ours that comes after its question). */
	send_handshake(*p);
}

void Ep::handle_handshake(Peer &p, const Parsed &pk)
{
	HandshakeInfo hs;
	const ParseError e = decode_handshake(pk, hs);
	if (e != ParseError::None) {
		/* Not trusted: the peer stays without features (baseline protocols only). */
		drops.malformed++;
		if (!warned_malformed) {
			warned_malformed = true;
			EFA_WARN(EpData, "malformed HANDSHAKE from %s: %s; dropped (peers must run the same protocol "
				 "version; further malformed packets are counted, not logged)",
				 addr_to_string(p.raw).c_str(), parse_error_str(e));
		}
		return;
	}
	p.hs_got = true;
	p.features = hs.features;
	p.max_payload = hs.max_payload;
	p.rx_window = hs.rx_window;
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
	PktWriter w(pkt->buf, pkt->cap);
	CtsHdr *h = w.header<CtsHdr>(PktType::Cts, cfg_.qkey);
	h->send_id = m.send_id;
	h->recv_id = m.id;
	h->window = window;
	pkt->len = uint32_t(w.size());
	m.granted += window;
	port_.rx_post(pkt);
	return true;
}

void Sender::handle_cts(Peer &p, const Parsed &pk)
{
	const CtsHdr &h = pk.as<CtsHdr>();
	TxOp *op = ids_.find(h.send_id);
	if (!op || op->peer != &p || op->err) {
		drops_.unknown++;
		return;
	}
	op->peer_id = h.recv_id;
	op->window += h.window;
	pump(*op);
}

/* ------------------------------------------------------------------ EOR */

bool Receiver::send_eor(MsgRx &m)
{
	Pkt *pkt = port_.rx_tx_pkt(*m.peer);
	if (!pkt) {
		m.owes_eor = true;
		owe(m);
		return false;
	}
	m.owes_eor = false;
	PktWriter w(pkt->buf, pkt->cap);
	EorHdr *h = w.header<EorHdr>(PktType::Eor, cfg_.qkey);
	h->send_id = m.send_id;
	pkt->len = uint32_t(w.size());
	port_.rx_post(pkt);
	return true;
}

void Sender::handle_eor(Peer &p, const Parsed &pk)
{
	TxOp *op = ids_.find(pk.as<EorHdr>().send_id);
	if (!op || op->peer != &p || op->proto != Proto::LongRead || op->got_receipt) {
		drops_.unknown++;
		return;
	}
	op->got_receipt = true;
	finish(op);
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
	PktWriter w(pkt->buf, pkt->cap);
	ReceiptHdr *h = w.header<ReceiptHdr>(PktType::Receipt, cfg_.qkey);
	h->send_id = m.send_id;
	h->msg_id = m.msg_id;
	pkt->len = uint32_t(w.size());
	port_.rx_post(pkt);
	return true;
}

void Sender::handle_receipt(Peer &p, const Parsed &pk)
{
	/* Requests with an id (long-CTS messages, emulated RMA, atomics) are answered by it;
	 * one-packet messages by their message id. */
	const ReceiptHdr &h = pk.as<ReceiptHdr>();
	TxOp *op = nullptr;
	if (h.send_id) {
		op = ids_.find(h.send_id);
		if (op && (op->peer != &p || !op->need_receipt || op->got_receipt))
			op = nullptr;
	} else {
		if (TxLink *l = p.receipts.find([&](const TxLink &t) { return t.op->msg_id == h.msg_id; })) {
			op = l->op;
			p.receipts.unlink(l);
		}
	}
	if (!op) {
		drops_.unknown++;
		return;
	}
	op->got_receipt = true;
	finish(op);
}

/* ------------------------------------------------------------------ target answers: WRITE_DATA, ERROR, ATOMRSP */

/* The remote CQ data of a device write from p (protocol.md section 9): it arrived in one
 * of our receive packets, which hold a CQ entry each, so no peer can overrun the CQ. */
void Ep::handle_write_data(Peer &p, const Parsed &pk)
{
	count(kCntrRemoteWrite, true);
	if (!rx_cq)
		return;
	fi_cq_tagged_entry e{};
	e.flags = FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA;
	e.data = pk.cq_data & 0xffffffffu; /* cq_data_size is 4 */
	e.len = size_t(pk.as<WriteDataHdr>().len);
	rx_cq->push(e, p.addr);
}

void Sender::handle_error(Peer &p, const Parsed &pk)
{
	const ErrorHdr &h = pk.as<ErrorHdr>();
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

bool Ep::try_ctl(Ctl &c)
{
	Pkt *pkt = tx_pkt(*c.peer, nullptr);
	if (!pkt)
		return false;
	PktWriter w(pkt->buf, pkt->cap);
	switch (c.type) {
	case PktType::Receipt: {
		ReceiptHdr *h = w.header<ReceiptHdr>(PktType::Receipt, qkey);
		h->send_id = c.a;
		h->msg_id = c.b;
		break;
	}
	case PktType::WriteData: {
		WriteDataHdr *h = w.header<WriteDataHdr>(PktType::WriteData, qkey, kFlagCqData);
		h->len = c.len;
		w.cq_data(c.data);
		break;
	}
	case PktType::Error: {
		ErrorHdr *h = w.header<ErrorHdr>(PktType::Error, qkey);
		h->op_id = c.a;
		h->msg_id = c.b;
		h->err = c.err;
		break;
	}
	default: {
		RspHdr *h = w.header<RspHdr>(PktType::AtomRsp, qkey);
		h->recv_id = c.a;
		h->seg_len = uint32_t(c.payload.size());
		w.bytes(c.payload.data(), c.payload.size());
		break;
	}
	}
	pkt->len = uint32_t(w.size());
	post(pkt);
	return true;
}

} // namespace efa::rdm
