/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The emulated RMA family (docs/protocol.md section 8): the RTWs (EAGER_RTW,
 * LONGCTS_RTW, with and without delivery complete; LONGREAD_RTW taken, not sent) and the
 * RTRs (SHORT_RTR, LONGCTS_RTR), for RMA the devices cannot do themselves. Built here by
 * the Sender from its operation; their send completion is the generic one
 * (Sender::pkt_sent); at the target they are checked against the domain's keys
 * (target.cpp) and answered: a write becomes a message into the target buffer
 * (Receiver::start_write, then CTSDATA under CTS windows, or our RDMA reads, and a
 * RECEIPT or EOR when asked), a read is answered with READRSP and CTSDATA
 * (pkt_data.cpp), a refusal with EXT_ERROR to a peer of ours (pkt_ctl.cpp).
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
	const uint16_t flags = req_flags(p, data, v4::kReqRma);
	const RmaIov riov{op.rma[0].addr, op.len, op.rma[0].key};
	op.proto = Proto::EmuWrite;
	op.need_receipt = write_dc(p, op.flags);
	const bool dc = op.need_receipt;
	const size_t first = std::min<uint64_t>(op.len, room);
	Pkt *pkt = tx_pkt(p, &op);
	v4::Writer w(pkt->buf, pkt->cap);
	if (op.len <= room && dc) {
		v4::DcEagerRtw *h = w.header<v4::DcEagerRtw>(Type::DcEagerRtw, flags);
		h->rma_iov_count = 1;
		h->send_id = op.id;
	} else if (op.len <= room) {
		w.header<v4::EagerRtw>(Type::EagerRtw, flags)->rma_iov_count = 1;
	} else {
		v4::LongCtsRtw *h = w.header<v4::LongCtsRtw>(dc ? Type::DcLongCtsRtw : Type::LongCtsRtw, flags);
		h->rma_iov_count = 1;
		h->msg_length = op.len;
		h->send_id = op.id;
		h->credit_request = uint32_t(cfg_.credits);
	}
	w.iovs(&riov, 1);
	req_opts(w, p, flags, op.data);
	iov_to_buf(op.iov, op.iov_count, 0, w.reserve(first), first);
	op.sent = first;
	pkt->len = uint32_t(w.size());
	port_.tx_post(pkt);
}

void Sender::post_read_req(TxOp &op)
{
	Peer &p = *op.peer;
	const uint16_t flags = req_flags(p, false, v4::kReqRma);
	const RmaIov riov{op.rma[0].addr, op.len, op.rma[0].key};
	op.proto = Proto::EmuRead;
	/* Short: the whole answer fits one READRSP. Long: the window is the whole read
	 * (rma() keeps it below 2 GiB, which upstream's window arithmetic takes), so the
	 * responder never waits for a CTS. */
	const bool is_short = op.len <= cfg_.mtu - kReadRspHdr;
	Pkt *pkt = tx_pkt(p, &op);
	v4::Writer w(pkt->buf, pkt->cap);
	v4::Rtr *h = w.header<v4::Rtr>(is_short ? Type::ShortRtr : Type::LongCtsRtr, flags);
	h->rma_iov_count = 1;
	h->msg_length = op.len;
	h->recv_id = op.id;
	h->recv_length = uint32_t(op.len); /* the window: all of it (SHORT_RTR too, as upstream) */
	w.iovs(&riov, 1);
	req_opts(w, p, flags, 0);
	op.sent = op.len;
	pkt->len = uint32_t(w.size());
	port_.tx_post(pkt);
}

/* ------------------------------------------------------------------ at the target */

namespace {

/* The initiator's id an RTW's answer names (0: it asks for none). */
uint32_t rtw_send_id(const Parsed &pk)
{
	switch (pk.type) {
	case Type::DcEagerRtw: return pk.as<v4::DcEagerRtw>().send_id;
	case Type::LongCtsRtw:
	case Type::DcLongCtsRtw: return pk.as<v4::LongCtsRtw>().send_id;
	case Type::LongReadRtw: return pk.as<v4::LongReadRtw>().send_id;
	default: return 0;
	}
}

} // namespace

void Ep::handle_write_req(Peer &p, const Parsed &pk)
{
	const uint32_t send_id = rtw_send_id(pk);
	iovec dst[kMaxRmaIov];
	uint64_t total = 0;
	int err = check_rma(pk, FI_REMOTE_WRITE, dst, total);
	uint64_t len = pk.payload_len;
	if (pk.type == Type::LongCtsRtw || pk.type == Type::DcLongCtsRtw)
		len = pk.as<v4::LongCtsRtw>().msg_length;
	else if (pk.type == Type::LongReadRtw)
		len = pk.as<v4::LongReadRtw>().msg_length;
	if (!err && len > total) {
		EFA_WARN(EpData, "an emulated write of %lu bytes from %s into remote iovs of %lu bytes: refused",
			 (unsigned long)len, addr_to_string(p.raw).c_str(), (unsigned long)total);
		err = FI_EINVAL;
	}
	if (err) {
		count(kCntrRemoteWrite, false);
		if (send_id)
			send_ctl(Ctl{&p, Type::ExtError, send_id, 0, uint32_t(err), {}});
		return;
	}
	rx.start_write(p, pk, dst, pk.rma_iov_count);
}

void Ep::handle_read_req(Peer &p, const Parsed &pk)
{
	const v4::Rtr h = pk.as<v4::Rtr>();
	iovec src[kMaxRmaIov];
	uint64_t total = 0;
	int err = check_rma(pk, FI_REMOTE_READ, src, total);
	if (!err && h.msg_length > total)
		err = FI_EINVAL;
	const uint64_t window = pk.type == Type::ShortRtr ? h.msg_length : h.recv_length;
	if (!err && !tx.respond_read(p, h.recv_id, h.msg_length, window, src, pk.rma_iov_count))
		err = FI_EAGAIN;
	if (err)
		send_ctl(Ctl{&p, Type::ExtError, h.recv_id, 0, uint32_t(err), {}});
}

void Receiver::start_write(Peer &p, const Parsed &pk, const iovec *dst, size_t count)
{
	/* A write is one operation, however many packets carry it. */
	MsgRx *m = msgs_.get();
	m->peer = &p;
	link(p, *m);
	m->src = p.addr;
	m->write = true;
	m->has_data = pk.has_cq_data;
	m->data = pk.cq_data & 0xffffffffu;
	m->dc = pk.info.dc; /* the initiator completes on our RECEIPT */
	m->bound = true;
	m->completion = false;
	std::copy(dst, dst + count, m->dst);
	m->dst_count = count;
	switch (pk.type) {
	case Type::DcEagerRtw: m->send_id = pk.as<v4::DcEagerRtw>().send_id; [[fallthrough]];
	case Type::EagerRtw:
		m->kind = RxKind::Eager;
		m->msg_len = pk.payload_len;
		break;
	case Type::LongReadRtw: {
		const v4::LongReadRtw h = pk.as<v4::LongReadRtw>();
		start_long(*m, RxKind::LongRead, h.msg_length, h.send_id, pk);
		break;
	}
	default: { /* LONGCTS_RTW, with or without delivery complete */
		const v4::LongCtsRtw h = pk.as<v4::LongCtsRtw>();
		start_long(*m, RxKind::LongCts, h.msg_length, h.send_id, pk);
		break;
	}
	}
	m->cap = m->msg_len;
	if (m->kind != RxKind::LongRead)
		segment(*m, 0, pk.payload, pk.payload_len);
	advance(m);
}

} // namespace efa::rdm
