/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The receiving side of messages (docs/protocol.md sections 8 and 10): posted receives
 * and unexpected messages, their matching, placing data, reassembly, FI_PEEK / FI_CLAIM
 * / FI_DISCARD, FI_MULTI_RECV, fi_cancel, and the completion of a message. Packets
 * reach it from arrival.cpp; the CTS and RECEIPT it sends are built in pkt_ctl.cpp.
 */
#include "rdm/ep.h"

#include "efa_errno.h"
#include "info.h"
#include "log.h"

#include <algorithm>
#include <cstring>

namespace efa::rdm {

namespace {

uint64_t rx_flags(const MsgRx &m)
{
	return FI_RECV | (m.tagged ? FI_TAGGED : FI_MSG) | (m.has_data ? FI_REMOTE_CQ_DATA : 0);
}

} // namespace

ssize_t Ep::recv(const RecvArgs &a)
{
	if (!enabled) {
		EFA_WARN_ONCE(EpData, "a receive before fi_enable: bind an AV and CQs, call fi_enable, then post");
		return -FI_EOPBADSTATE;
	}
	if (!rx_cq)
		return -FI_ENOCQ;
	if (a.flags & ~kRecvFlags) {
		EFA_WARN_ONCE(EpData, "fi_%srecvmsg: flags %#lx are not receive flags; drop them", a.tagged ? "t" : "",
			      (unsigned long)(a.flags & ~kRecvFlags));
		return -FI_EINVAL;
	}
	if (a.count > kRdmIovLimit || (a.count && !a.iov)) {
		EFA_WARN_ONCE(EpData, "%zu iovs: more than rx_attr->iov_limit (%zu); post fewer", a.count, kRdmIovLimit);
		return -FI_EINVAL;
	}
	if (a.flags & (FI_PEEK | FI_CLAIM))
		return peek(a);
	const bool multi = a.flags & FI_MULTI_RECV;
	if (multi && a.count != 1) {
		EFA_DBG(EpData, "FI_MULTI_RECV takes one buffer (%zu iovs given)", a.count);
		return -FI_EINVAL;
	}
	RxOp *r = rxops.get();
	if (!r)
		return -FI_EAGAIN;
	r->start(a.tagged, a.context, a.flags, rx_completion(a.flags), a.iov, a.count, iov_total(a.iov, a.count));
	r->src = directed ? a.src : FI_ADDR_UNSPEC;
	if (r->src != FI_ADDR_UNSPEC)
		adopt_pending(); /* a sender met before it was inserted may be r->src now */
	r->tag = a.tag;
	r->ignore = a.ignore;
	r->multi = multi;
	/* Messages that arrived first, oldest first. */
	while (MsgRx *m = match.find_unexpected(r->tagged, r->src, r->tag, r->ignore)) {
		match.remove_unexpected(m->tagged, m);
		bind_msg(*m, r);
		advance_msg(m);
		if (!multi || r->released)
			return 0;
	}
	match.post(r->tagged, r);
	return 0;
}

/* FI_PEEK (optionally with FI_CLAIM or FI_DISCARD), and FI_CLAIM of a peeked message. */
ssize_t Ep::peek(const RecvArgs &a)
{
	const bool tagged = a.tagged;
	if ((a.flags & FI_CLAIM) && !(a.flags & FI_PEEK)) {
		auto it = claimed.find(a.context);
		if (it == claimed.end()) {
			EFA_DBG(EpData, "FI_CLAIM: no message was claimed with this context (peek with FI_CLAIM first)");
			return -FI_EINVAL;
		}
		MsgRx *m = it->second;
		claimed.erase(it);
		m->claimed = false;
		if (a.flags & FI_DISCARD) {
			m->discard = true;
			m->bound = true;
			m->context = a.context;
			m->completion = rx_completion(a.flags);
			drain_held(*m);
			advance_msg(m);
			return 0;
		}
		RxOp *r = rxops.get();
		if (!r)
			return -FI_EAGAIN;
		r->start(tagged, a.context, a.flags, rx_completion(a.flags), a.iov, a.count, iov_total(a.iov, a.count));
		bind_msg(*m, r);
		advance_msg(m);
		return 0;
	}
	const fi_addr_t src = directed ? a.src : FI_ADDR_UNSPEC;
	if (src != FI_ADDR_UNSPEC)
		adopt_pending();
	MsgRx *m = match.find_unexpected(tagged, src, a.tag, a.ignore);
	const uint64_t flags = FI_RECV | (tagged ? FI_TAGGED : FI_MSG);
	if (!m) {
		report_error(rx_cq, a.context, flags, FI_ENOMSG, 0, "no message matches the peek", 0, 0, nullptr, 0,
			     a.tag);
		return 0;
	}
	fi_cq_tagged_entry e{};
	e.op_context = a.context;
	e.flags = rx_flags(*m);
	e.len = m->msg_len;
	e.data = m->data;
	e.tag = m->tag;
	rx_cq->push(e, m->src);
	if (a.flags & (FI_CLAIM | FI_DISCARD))
		match.remove_unexpected(m->tagged, m);
	if (a.flags & FI_CLAIM) {
		m->claimed = true;
		claimed[a.context] = m;
	} else if (a.flags & FI_DISCARD) {
		m->discard = true;
		m->bound = true;
		m->completion = false; /* the peek's completion reports it */
		drain_held(*m);
		advance_msg(m);
	}
	return 0;
}

int Ep::cancel(void *context)
{
	for (bool tagged : {false, true}) {
		RxOp *r = match.posted(tagged).find([&](const RxOp &x) { return x.context == context; });
		if (!r)
			continue;
		match.unpost(tagged, r);
		r->released = true;
		if (r->multi && r->msgs)
			return 0; /* its messages in progress complete it */
		report_error(rx_cq, context, FI_RECV | (tagged ? FI_TAGGED : FI_MSG), FI_ECANCELED, 0,
			     "receive cancelled (fi_cancel)", 0, 0, r->iov_count ? r->iov[0].iov_base : nullptr, 0, r->tag);
		rxops.put(r);
		return 0;
	}
	return -FI_ENOENT;
}

/* ------------------------------------------------------------------ messages */

void Ep::start_msg(Peer &p, Pkt *pkt, const Parsed &pk)
{
	const RtmHdr &h = pk.as<RtmHdr>();
	if (pk.base->flags & kFlagVoid) {
		/* Abandoned messages (FI_ENORX at their sender): this id and the next tag - 1
		 * are consumed, nothing is delivered. */
		p.rob.skip(uint32_t(h.tag - 1), [this](Pkt *c) {
			dropped_dup++;
			io.free_copy(c);
		});
		return;
	}
	MsgRx *m = msgs.get();
	m->peer = &p;
	link_msg(p, *m);
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
	RxOp *r = match.find_posted(m->tagged, m->src, m->tag);

	if (!r) {
		m->held.push_back(io.copy_of(*pkt));
		match.add_unexpected(m->tagged, m);
		return;
	}
	if (!r->multi)
		match.unpost(r->tagged, r);
	bind_msg(*m, r);
	place(*m, pk);
	advance_msg(m);
}

void Ep::route_segment(Peer &p, const Pkt &pkt, const Parsed &pk)
{
	if (pk.type != PktType::MediumMsg && pk.type != PktType::MediumTag) {
		dropped_dup++;
		return;
	}
	MsgLink *l = active_msg(p, pk.as<RtmHdr>().msg_id);
	if (!l) {
		dropped_dup++;
		return;
	}
	add_segment(*l->m, pkt, pk);
}

void Ep::add_segment(MsgRx &m, const Pkt &pkt, const Parsed &pk)
{
	if (!take_segment(m, pk)) {
		/* A segment already taken: counting its bytes twice would complete the message
		 * while another segment is missing. */
		dropped_dup++;
		return;
	}
	if (!m.bound) {
		m.held.push_back(io.copy_of(pkt)); /* not matched yet */
		return;
	}
	place(m, pk);
	advance_msg(&m);
}

bool Ep::take_segment(MsgRx &m, const Parsed &pk)
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

void Ep::place(MsgRx &m, const Parsed &pk)
{
	uint64_t off = 0;
	if (pk.type == PktType::MediumMsg || pk.type == PktType::MediumTag)
		off = pk.as<MediumHdr>().seg_off;
	else if (pk.type == PktType::Data)
		off = pk.as<DataHdr>().seg_off;
	msg_segment(m, off, pk.payload, pk.payload_len);
}

void Ep::msg_segment(MsgRx &m, uint64_t off, const uint8_t *data, size_t len)
{
	if (m.received + len > m.msg_len || off + len > m.msg_len) {
		/* More bytes than the message has: a duplicate or a faulty peer. */
		dropped_malformed++;
		return;
	}
	if (!m.discard && off < m.cap)
		buf_to_iov(m.dst, m.dst_count, off, data, std::min<uint64_t>(len, m.cap - off));
	m.received += len;
}

void Ep::bind_msg(MsgRx &m, RxOp *r)
{
	m.bound = true;
	m.context = r->context;
	m.completion = r->completion;
	if (r->multi) {
		const uint64_t take = std::min(m.msg_len, r->cap - r->used);
		m.dst[0] = iovec{static_cast<uint8_t *>(r->iov[0].iov_base) + r->used, take};
		m.dst_count = 1;
		m.cap = take;
		m.rx = r;
		r->used += take;
		r->msgs++;
		if (r->cap - r->used < min_multi_recv && !r->released) {
			r->released = true;
			if (r->on_list())
				match.unpost(r->tagged, r);
		}
	} else {
		std::copy(r->iov, r->iov + r->iov_count, m.dst);
		m.dst_count = r->iov_count;
		m.cap = r->cap;
		rxops.put(r);
	}
	drain_held(m);
}

/* Places what arrived before the match (or counts it, for a discarded message). */
void Ep::drain_held(MsgRx &m)
{
	while (Pkt *c = m.held.pop_front()) {
		Parsed pk;
		if (parse(c->buf, c->len, pk) == ParseError::None)
			place(m, pk);
		io.free_copy(c);
	}
}

void Ep::advance_msg(MsgRx *m)
{
	if (m->claimed)
		return;
	if (m->type == PktType::LongReadMsg || m->type == PktType::LongReadTag) {
		/* The data moves by RDMA read once the message has a buffer. */
		if (m->bound && !m->rd_posted && !m->owes_reads && !m->owes_eor)
			longread_start(*m);
		return;
	}
	const bool long_cts =
		m->type == PktType::LongCtsMsg || m->type == PktType::LongCtsTag || m->type == PktType::WriteReq;
	if (long_cts && m->received >= m->granted && m->granted < m->msg_len)
		send_cts(*m);
	if (m->received >= m->msg_len)
		finish_msg(m);
}

void Ep::handle_data(Peer &p, const Parsed &pk)
{
	const DataHdr &h = pk.as<DataHdr>();
	MsgRx *m = rx_ids.find(h.recv_id);
	if (!m || m->peer != &p) {
		dropped_unknown++;
		return;
	}
	if (h.seg_off + h.seg_len > m->granted || m->received + h.seg_len > m->msg_len) {
		dropped_malformed++;
		EFA_WARN(EpData, "DATA at %lu+%u outside the window granted to %s: dropped", (unsigned long)h.seg_off,
			 h.seg_len, addr_to_string(p.raw).c_str());
		return;
	}
	place(*m, pk);
	advance_msg(m);
}

void Ep::finish_msg(MsgRx *m)
{
	if (m->dc) {
		Pkt *pkt = tx_pkt(*m->peer, nullptr);
		if (!pkt) {
			m->owes_receipt = true;
			if (!m->on_list())
				rx_pending.push_back(m);
			return;
		}
		m->owes_receipt = false;
		PktWriter w(pkt->buf, pkt->cap);
		ReceiptHdr *h = w.header<ReceiptHdr>(PktType::Receipt, qkey);
		h->send_id = m->send_id;
		h->msg_id = m->msg_id;
		pkt->len = uint32_t(w.size());
		post(pkt);
	}
	complete_rx(*m);
	if (m->has_id)
		rx_ids.remove(m->id);
	if (m->alink.on_list())
		m->peer->active.unlink(&m->alink);
	if (m->on_list())
		rx_pending.unlink(m);
	if (m->plink.on_list())
		m->peer->msgs.unlink(&m->plink);
	msgs.put(m);
}

void Ep::complete_rx(MsgRx &m)
{
	if (m.err) {
		/* A read-based message whose reads failed, or a message whose sender failed or
		 * was removed from the AV before it was whole (liveness.cpp). */
		char text[kMaxErrData];
		snprintf(text, sizeof text, "a message of %lu bytes from %s failed after %lu bytes: %s",
			 (unsigned long)m.msg_len, addr_to_string(m.peer->raw).c_str(), (unsigned long)m.received,
			 m.prov_errno ? efa_status_msg(m.prov_errno) : fi_strerror(m.err));
		if (m.type == PktType::WriteReq) {
			count(kCntrRemoteWrite, false);
			return;
		}
		count(kCntrRecv, false);
		if (m.rx && --m.rx->msgs == 0 && m.rx->released)
			rxops.put(m.rx);
		if (m.context)
			report_error(rx_cq, m.context, rx_flags(m), m.err, m.prov_errno, text, 0, 0, nullptr, m.data,
				     m.tag);
		return;
	}
	if (m.type == PktType::WriteReq) {
		/* The target of an emulated write: an event only with remote CQ data. */
		count(kCntrRemoteWrite, true);
		if (m.has_data && rx_cq) {
			fi_cq_tagged_entry e{};
			e.flags = FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA;
			e.data = m.data;
			rx_cq->push(e, m.src);
		}
		return;
	}
	uint64_t flags = rx_flags(m);
	RxOp *r = m.rx;
	if (r) {
		/* The last message of a released multi-receive buffer says so. */
		if (--r->msgs == 0 && r->released) {
			flags |= FI_MULTI_RECV;
			rxops.put(r);
		}
	}
	void *buf = m.dst_count ? m.dst[0].iov_base : nullptr;
	const bool trunc = !m.discard && m.msg_len > m.cap;
	count(kCntrRecv, !trunc);
	if (trunc) {
		char text[kMaxErrData];
		snprintf(text, sizeof text, "message of %lu bytes truncated to the %lu-byte receive buffer",
			 (unsigned long)m.msg_len, (unsigned long)m.cap);
		if (m.context)
			report_error(rx_cq, m.context, flags, FI_ETRUNC, 0, text, m.cap, m.msg_len - m.cap, buf, m.data,
				     m.tag);
		else
			EFA_WARN(EpData, "%s (receive without a context)", text);
		return;
	}
	if (!m.completion && !(flags & FI_MULTI_RECV))
		return;
	fi_cq_tagged_entry e{};
	e.op_context = m.context;
	e.flags = flags;
	e.len = m.discard ? 0 : m.msg_len;
	e.buf = m.discard ? nullptr : buf;
	e.data = m.data;
	e.tag = m.tag;
	rx_cq->push(e, m.src);
}

} // namespace efa::rdm
