/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The data family (docs/protocol.md sections 8 and 9): DATA, the rest of a long-CTS
 * message or emulated write under the receiver's clear-to-send windows, and READRSP,
 * the target's answer to an emulated read (the same layout). Built here by the Sender
 * (pump: as much as the window and the free buffers allow); their send completion is
 * the generic one; DATA is placed by the Receiver, READRSP by the Sender that asked.
 */
#include "rdm/ep.h"

#include "efa_errno.h"
#include "log.h"

#include <algorithm>

namespace efa::rdm {

void Sender::pump(TxOp &op)
{
	const size_t seg_max = cfg_.mtu - sizeof(DataHdr);
	op.inflight++; /* held while posting (see post_medium) */
	while (op.window && op.sent < op.len && !op.err) {
		Pkt *pkt = tx_pkt(*op.peer, &op);
		if (!pkt)
			break;
		const size_t n = std::min<uint64_t>({seg_max, op.window, op.len - op.sent});
		PktWriter w(pkt->buf, pkt->cap);
		/* DATA and READRSP share their layout: the target of an emulated read answers
		 * with the latter. */
		static_assert(sizeof(DataHdr) == sizeof(ReadRspHdr));
		DataHdr *h = w.header<DataHdr>(op.responder ? PktType::ReadRsp : PktType::Data, cfg_.qkey);
		h->recv_id = op.peer_id;
		h->seg_len = uint32_t(n);
		h->seg_off = op.sent;
		iov_to_buf(op.iov, op.iov_count, op.sent, w.reserve(n), n);
		pkt->len = uint32_t(w.size());
		op.sent += n;
		op.window -= n;
		port_.tx_post(pkt);
	}
	const bool more = op.window && op.sent < op.len && !op.err;
	if (more && !op.on_list())
		pending_.push_back(&op);
	else if (!more && op.on_list())
		pending_.unlink(&op);
	release(op);
}

/* The target of an emulated read: READRSP packets, pumped like a long message's DATA. */
bool Sender::respond_read(Peer &p, uint32_t recv_id, uint64_t len, const iovec *src, size_t count)
{
	TxOp *op = ops_.get();
	if (!op)
		return false;
	op->kind = TxKind::Read;
	op->proto = Proto::EmuRead;
	op->responder = true;
	op->peer = &p;
	op->addr = p.addr;
	std::copy(src, src + count, op->iov);
	op->iov_count = count;
	op->len = len;
	op->peer_id = recv_id;
	op->window = len;
	if (!op->len)
		finish(op);
	else
		pump(*op);
	return true;
}

void Receiver::handle_data(Peer &p, const Parsed &pk)
{
	const DataHdr &h = pk.as<DataHdr>();
	MsgRx *m = ids_.find(h.recv_id);
	if (!m || m->peer != &p) {
		drops_.unknown++;
		return;
	}
	if (h.seg_off + h.seg_len > m->granted || m->received + h.seg_len > m->msg_len) {
		drops_.malformed++;
		EFA_WARN(EpData, "DATA at %lu+%u outside the window granted to %s: dropped", (unsigned long)h.seg_off,
			 h.seg_len, addr_to_string(p.raw).c_str());
		return;
	}
	place(*m, pk);
	advance(m);
}

void Sender::handle_read_rsp(Peer &p, const Parsed &pk)
{
	const ReadRspHdr &h = pk.as<ReadRspHdr>();
	TxOp *op = ids_.find(h.recv_id);
	if (!op || op->peer != &p || op->kind != TxKind::Read || op->responder) {
		drops_.unknown++;
		return;
	}
	if (h.seg_off + h.seg_len > op->len || op->done + h.seg_len > op->len) {
		drops_.malformed++;
		return;
	}
	buf_to_iov(op->iov, op->iov_count, h.seg_off, pk.payload, h.seg_len);
	op->done += h.seg_len;
	finish(op);
}

} // namespace efa::rdm
