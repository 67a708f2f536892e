/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The emulated RMA family (docs/protocol.md section 9): WRITE_REQ and READ_REQ, for
 * RMA the devices cannot do themselves. Built here by the Sender from its operation;
 * their send completion is the generic one (Sender::pkt_sent); at the target they are
 * checked against the domain's keys (target.cpp) and answered: a write becomes a
 * message into the target buffer (Receiver::start_write, then DATA under CTS windows
 * and a RECEIPT), a read is answered with READRSP packets (pkt_data.cpp), a refusal
 * with ERROR (pkt_ctl.cpp).
 */
#include "rdm/ep.h"

#include "efa_errno.h"
#include "log.h"

#include <algorithm>

namespace efa::rdm {

/* ------------------------------------------------------------------ building */

void Sender::post_write_req(TxOp &op, size_t room)
{
	Peer &p = *op.peer;
	const bool data = op.flags & FI_REMOTE_CQ_DATA;
	const RmaIov riov{op.rma[0].addr, op.len, op.rma[0].key};
	op.proto = Proto::EmuWrite;
	op.need_receipt = true;
	const size_t first = std::min<uint64_t>(op.len, room);
	Pkt *pkt = tx_pkt(p, &op);
	PktWriter w(pkt->buf, pkt->cap);
	WriteReqHdr *h = w.header<WriteReqHdr>(PktType::WriteReq, cfg_.qkey, req_flags(p) | (data ? kFlagCqData : 0));
	h->iov_count = 1;
	h->seg_len = uint32_t(first);
	h->msg_len = op.len;
	h->send_id = op.id;
	raw_addr(w, p);
	if (data)
		w.cq_data(op.data);
	w.bytes(&riov, sizeof riov);
	iov_to_buf(op.iov, op.iov_count, 0, w.reserve(first), first);
	op.sent = first;
	pkt->len = uint32_t(w.size());
	port_.tx_post(pkt);
}

void Sender::post_read_req(TxOp &op)
{
	Peer &p = *op.peer;
	const RmaIov riov{op.rma[0].addr, op.len, op.rma[0].key};
	op.proto = Proto::EmuRead;
	Pkt *pkt = tx_pkt(p, &op);
	PktWriter w(pkt->buf, pkt->cap);
	ReadReqHdr *h = w.header<ReadReqHdr>(PktType::ReadReq, cfg_.qkey, req_flags(p));
	h->iov_count = 1;
	h->recv_id = op.id;
	h->msg_len = op.len;
	h->window = op.len ? op.len : 1;
	raw_addr(w, p);
	w.bytes(&riov, sizeof riov);
	op.sent = op.len;
	pkt->len = uint32_t(w.size());
	port_.tx_post(pkt);
}

/* ------------------------------------------------------------------ at the target */

void Ep::handle_write_req(Peer &p, const Parsed &pk)
{
	const WriteReqHdr &h = pk.as<WriteReqHdr>();
	iovec dst[kMaxRmaIov];
	if (int err = check_rma(pk.iov, pk.iov_count, FI_REMOTE_WRITE, dst)) {
		send_ctl(Ctl{&p, PktType::Error, h.send_id, 0, uint32_t(err), {}});
		return;
	}
	rx.start_write(p, pk, dst, pk.iov_count);
}

void Ep::handle_read_req(Peer &p, const Parsed &pk)
{
	const ReadReqHdr &h = pk.as<ReadReqHdr>();
	iovec src[kMaxRmaIov];
	int err = check_rma(pk.iov, pk.iov_count, FI_REMOTE_READ, src);
	if (err || !tx.respond_read(p, h.recv_id, h.msg_len, src, pk.iov_count))
		send_ctl(Ctl{&p, PktType::Error, h.recv_id, 0, uint32_t(err ? err : FI_EAGAIN), {}});
}

void Receiver::start_write(Peer &p, const Parsed &pk, const iovec *dst, size_t count)
{
	const WriteReqHdr &h = pk.as<WriteReqHdr>();
	/* A write is one operation, however many packets carry it. */
	MsgRx *m = msgs_.get();
	m->peer = &p;
	link(p, *m);
	m->src = p.addr;
	m->type = PktType::WriteReq;
	m->msg_len = h.msg_len;
	m->send_id = h.send_id;
	m->has_data = pk.has_cq_data;
	m->data = pk.cq_data & 0xffffffffu;
	m->dc = true; /* the initiator completes on our RECEIPT */
	m->bound = true;
	m->completion = false;
	std::copy(dst, dst + count, m->dst);
	m->dst_count = count;
	m->cap = h.msg_len;
	m->granted = h.seg_len;
	segment(*m, 0, pk.payload, pk.payload_len);
	advance(m);
}

} // namespace efa::rdm
