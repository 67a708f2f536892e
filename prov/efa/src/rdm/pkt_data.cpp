/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The data family (docs/protocol.md sections 5 and 8): CTSDATA, the
 * rest of a long-CTS message or emulated write under the receiver's clear-to-send
 * windows, and READRSP, the first packet of an emulated read's answer (whose rest is
 * CTSDATA too). Built here by the Sender (pump: as much as the window and the free
 * buffers allow); their send completion is the generic one; CTSDATA is placed by the
 * Receiver, or, naming one of the Sender's ids, by the Sender whose read it answers.
 */
#include "rdm/ep.h"

#include "efa_errno.h"
#include "log.h"

#include <algorithm>

namespace efa::rdm {

void Sender::pump(TxOp &op)
{
	op.inflight++; /* held while posting (see post_medium) */
	/* A responder's READRSP goes first, also for an empty read (its requester waits
	 * for it). */
	while (!op.err && ((op.window && op.sent < op.len) || (op.responder && !op.rsp_sent))) {
		Pkt *pkt = tx_pkt(*op.peer, &op);
		if (!pkt)
			break;
		v4::Writer w(pkt->buf, pkt->cap);
		size_t n;
		if (op.responder && !op.rsp_sent) {
			n = std::min<uint64_t>({cfg_.mtu - kReadRspHdr, op.window, op.len - op.sent});
			v4::ReadRsp *h = w.header<v4::ReadRsp>(Type::ReadRsp, v4::kFlagConnId);
			h->connid = cfg_.qkey;
			h->recv_id = op.peer_id;
			h->send_id = op.id;
			h->seg_length = n;
			op.rsp_sent = true;
		} else {
			n = std::min<uint64_t>({cfg_.mtu - kCtsDataHdr, op.window, op.len - op.sent});
			v4::CtsData *h = w.header<v4::CtsData>(Type::CtsData, v4::kFlagConnId);
			h->recv_id = op.peer_id;
			h->seg_length = n;
			h->seg_offset = op.sent;
			w.u32(cfg_.qkey);
			w.u32(0);
		}
		payload(pkt, op, op.sent, n, w);
		pkt->len = uint32_t(w.size());
		op.sent += n;
		op.window -= n;
		port_.tx_post_more(pkt);
	}
	port_.tx_ring(); /* the window's packets behind one doorbell */
	const bool more = op.window && op.sent < op.len && !op.err;
	if (more && !op.on_list())
		pending_.push_back(&op);
	else if (!more && op.on_list())
		pending_.unlink(&op);
	release(op);
}

/* The responder of an emulated read: READRSP, then CTSDATA, pumped like a long
 * message's under the requester's window. */
bool Sender::respond_read(Peer &p, uint32_t recv_id, uint64_t len, uint64_t window, const iovec *src, size_t count)
{
	TxOp *op = ops_.get();
	if (!op)
		return false;
	op->kind = TxKind::Read;
	op->proto = Proto::EmuRead;
	op->responder = true;
	op->peer = &p;
	op->addr = p.addr;
	/* No descriptors: the region the requester's key names is copied into the
	 * packets (Sender::payload must not read a descriptor left by an earlier use). */
	op->set_iov(src, nullptr, count, len);
	op->peer_id = recv_id;
	op->window = window;
	op->id = ids_.add(op); /* its requester's CTS names it */
	pump(*op);
	return true;
}

void Receiver::handle_data(Peer &p, const Parsed &pk)
{
	const v4::CtsData h = pk.as<v4::CtsData>();
	MsgRx *m = ids_.find(h.recv_id);
	if (!m || m->peer != &p) {
		drops_.unknown++;
		return;
	}
	if (h.seg_offset > m->granted || pk.payload_len > m->granted - h.seg_offset ||
	    m->received + pk.payload_len > m->msg_len) {
		drops_.malformed++;
		EFA_WARN(EpData, "CTSDATA at %lu+%zu outside the window granted to %s: dropped",
			 (unsigned long)h.seg_offset, pk.payload_len, addr_to_string(p.raw).c_str());
		return;
	}
	place(*m, pk);
	advance(m);
}

/* The data of our emulated read: a READRSP (the first bytes, and the responder's id for
 * the CTS that would ask for more) or a CTSDATA (at its offset). */
void Sender::read_data(Peer &p, const Parsed &pk, uint32_t recv_id)
{
	TxOp *op = ids_.find(recv_id);
	if (!op || op->peer != &p || op->kind != TxKind::Read || op->responder || op->proto != Proto::EmuRead) {
		drops_.unknown++;
		return;
	}
	const uint64_t off = data_offset(pk);
	if (off > op->len || pk.payload_len > op->len - off || op->done + pk.payload_len > op->len) {
		drops_.malformed++;
		return;
	}
	if (pk.type == Type::ReadRsp)
		op->peer_id = pk.as<v4::ReadRsp>().send_id;
	buf_to_iov(op->iov, op->iov_count, off, pk.payload, pk.payload_len);
	op->done += pk.payload_len;
	finish(op);
}

void Sender::handle_read_rsp(Peer &p, const Parsed &pk) { read_data(p, pk, pk.as<v4::ReadRsp>().recv_id); }

void Sender::handle_read_data(Peer &p, const Parsed &pk) { read_data(p, pk, pk.as<v4::CtsData>().recv_id); }

} // namespace efa::rdm
