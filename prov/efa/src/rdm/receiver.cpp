/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The Receiver (receiver.h): receives, matching, messages, the reads of read-based
 * messages, and their completion. The packets that start a message are taken in
 * pkt_rtm.cpp, DATA in pkt_data.cpp, emulated writes in pkt_rma.cpp; the control
 * packets it sends are built in pkt_ctl.cpp.
 */
#include "rdm/receiver.h"

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

/* Bytes the receiver reads: what fits its buffer (none when discarded). */
uint64_t read_len(const MsgRx &m) { return m.discard ? 0 : std::min(m.msg_len, m.cap); }

} // namespace

void Receiver::configure(const RxConfig &c)
{
	cfg_ = c;
	match_.set_directed(c.directed);
	rxops_.set_cap(c.size);
}

ssize_t Receiver::recv_general(const RecvArgs &a)
{
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
	RxOp *r = new_rxop(a, cfg_.directed ? a.src : FI_ADDR_UNSPEC, multi);
	if (!r)
		return -FI_EAGAIN;
	if (r->src != FI_ADDR_UNSPEC)
		port_.rx_adopt_pending(); /* a sender met before it was inserted may be r->src now */
	/* Messages that arrived first, oldest first. */
	while (MsgRx *m = match_.find_unexpected(r->tagged, r->src, r->tag, r->ignore)) {
		match_.remove_unexpected(m->tagged, m);
		bind(*m, r);
		advance(m);
		if (!multi || r->released)
			return 0;
	}
	match_.post(r->tagged, r);
	return 0;
}

/* FI_PEEK (optionally with FI_CLAIM or FI_DISCARD), and FI_CLAIM of a peeked message. */
ssize_t Receiver::peek(const RecvArgs &a)
{
	const bool tagged = a.tagged;
	if ((a.flags & FI_CLAIM) && !(a.flags & FI_PEEK)) {
		auto it = claimed_.find(a.context);
		if (it == claimed_.end()) {
			EFA_DBG(EpData, "FI_CLAIM: no message was claimed with this context (peek with FI_CLAIM first)");
			return -FI_EINVAL;
		}
		MsgRx *m = it->second;
		claimed_.erase(it);
		m->claimed = false;
		if (a.flags & FI_DISCARD) {
			m->discard = true;
			m->bound = true;
			m->context = a.context;
			m->completion = completion(a.flags);
			drain_held(*m);
			advance(m);
			return 0;
		}
		RxOp *r = rxops_.get();
		if (!r)
			return -FI_EAGAIN;
		r->start(tagged, a.context, a.flags, completion(a.flags), a.iov, a.count, iov_total(a.iov, a.count));
		bind(*m, r);
		advance(m);
		return 0;
	}
	const fi_addr_t src = cfg_.directed ? a.src : FI_ADDR_UNSPEC;
	if (src != FI_ADDR_UNSPEC)
		port_.rx_adopt_pending();
	MsgRx *m = match_.find_unexpected(tagged, src, a.tag, a.ignore);
	const uint64_t flags = FI_RECV | (tagged ? FI_TAGGED : FI_MSG);
	if (!m) {
		port_.rx_error(a.context, flags, FI_ENOMSG, 0, "no message matches the peek", 0, 0, nullptr, 0,
			     a.tag);
		return 0;
	}
	fi_cq_tagged_entry e{};
	e.op_context = a.context;
	e.flags = rx_flags(*m);
	e.len = m->msg_len;
	e.data = m->data;
	e.tag = m->tag;
	port_.rx_complete(e, m->src);
	if (a.flags & (FI_CLAIM | FI_DISCARD))
		match_.remove_unexpected(m->tagged, m);
	if (a.flags & FI_CLAIM) {
		m->claimed = true;
		claimed_[a.context] = m;
	} else if (a.flags & FI_DISCARD) {
		m->discard = true;
		m->bound = true;
		m->completion = false; /* the peek's completion reports it */
		drain_held(*m);
		advance(m);
	}
	return 0;
}

int Receiver::cancel(void *context)
{
	for (bool tagged : {false, true}) {
		RxOp *r = match_.posted(tagged).find([&](const RxOp &x) { return x.context == context; });
		if (!r)
			continue;
		match_.unpost(tagged, r);
		r->released = true;
		if (r->multi && r->msgs)
			return 0; /* its messages in progress complete it */
		port_.rx_error(context, FI_RECV | (tagged ? FI_TAGGED : FI_MSG), FI_ECANCELED, 0,
			     "receive cancelled (fi_cancel)", 0, 0, r->iov_count ? r->iov[0].iov_base : nullptr, 0, r->tag);
		rxops_.put(r);
		return 0;
	}
	return -FI_ENOENT;
}

/* ------------------------------------------------------------------ messages */

void Receiver::place(MsgRx &m, const Parsed &pk)
{
	segment(m, data_offset(pk), pk.payload, pk.payload_len);
}

void Receiver::segment(MsgRx &m, uint64_t off, const uint8_t *data, size_t len)
{
	if (m.received + len > m.msg_len || off + len > m.msg_len) {
		/* More bytes than the message has: a duplicate or a faulty peer. */
		drops_.malformed++;
		return;
	}
	if (!m.discard && off < m.cap)
		buf_to_iov(m.dst, m.dst_count, off, data, std::min<uint64_t>(len, m.cap - off));
	m.received += len;
}

void Receiver::bind(MsgRx &m, RxOp *r)
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
		if (r->cap - r->used < cfg_.min_multi_recv && !r->released) {
			r->released = true;
			if (r->on_list())
				match_.unpost(r->tagged, r);
		}
	} else {
		std::copy(r->iov, r->iov + r->iov_count, m.dst);
		m.dst_count = r->iov_count;
		m.cap = r->cap;
		rxops_.put(r);
	}
	drain_held(m);
}

/* Places what arrived before the match (or counts it, for a discarded message). */
void Receiver::drain_held(MsgRx &m)
{
	while (Pkt *c = m.held.pop_front()) {
		Parsed pk;
		if (v4::parse(c->buf, c->len, pk) == v4::Error::None)
			place(m, pk);
		port_.rx_free_copy(c);
	}
}

void Receiver::advance(MsgRx *m)
{
	if (m->claimed)
		return;
	if (m->kind == RxKind::Shm) {
		/* Pulled: its bytes are ours; being pulled: the pull's end delivers it. */
		if (m->bound && !m->shm_sent && !m->pulling)
			m->shm_buf || m->err ? shm_deliver(*m) : shm_start(*m);
		return;
	}
	if (m->kind == RxKind::LongRead) {
		/* The data moves by RDMA read once the message has a buffer; a runting one's
		 * first bytes come in packets too, and may arrive after the reads are done. */
		if (!m->bound)
			return;
		if (!m->rd_started && !m->owes_reads && !m->owes_eor)
			read_start(*m);
		else if (m->reads_over && !m->owes_eor)
			read_end(*m);
		return;
	}
	if (m->kind == RxKind::LongCts && m->received >= m->granted && m->granted < m->msg_len)
		send_cts(*m);
	if (m->received >= m->msg_len)
		finish(m);
}

void Receiver::finish(MsgRx *m)
{
	if (m->dc && !send_receipt(*m))
		return; /* owed: progress() finishes it */
	complete(*m);
	if (m->has_id)
		ids_.remove(m->id);
	if (m->alink.on_list())
		m->peer->active.unlink(&m->alink);
	if (m->on_list())
		pending_.unlink(m);
	if (m->plink.on_list())
		m->peer->msgs.unlink(&m->plink);
	msgs_.put(m);
}

void Receiver::complete(MsgRx &m)
{
	if (m.err) {
		/* A read-based message whose reads failed, or a message whose sender failed or
		 * was removed from the AV before it was whole (liveness.cpp). */
		char text[kMaxErrData];
		snprintf(text, sizeof text, "a message of %lu bytes from %s failed after %lu bytes: %s",
			 (unsigned long)m.msg_len, m.peer ? addr_to_string(m.peer->raw).c_str() : "a same-host peer (shm)",
			 (unsigned long)m.received,
			 m.prov_errno ? efa_status_msg(m.prov_errno) : fi_strerror(m.err));
		if (m.write) {
			port_.rx_count(true, false);
			return;
		}
		port_.rx_count(false, false);
		if (m.rx && --m.rx->msgs == 0 && m.rx->released)
			rxops_.put(m.rx);
		if (m.context)
			port_.rx_error(m.context, rx_flags(m), m.err, m.prov_errno, text, 0, 0, nullptr, m.data,
				     m.tag);
		return;
	}
	if (m.write) {
		/* The target of an emulated write: an event only with remote CQ data. */
		port_.rx_count(true, true);
		if (m.has_data) {
			fi_cq_tagged_entry e{};
			e.flags = FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA;
			e.data = m.data;
			port_.rx_complete(e, m.src);
		}
		return;
	}
	uint64_t flags = rx_flags(m);
	RxOp *r = m.rx;
	if (r) {
		/* The last message of a released multi-receive buffer says so. */
		if (--r->msgs == 0 && r->released) {
			flags |= FI_MULTI_RECV;
			rxops_.put(r);
		}
	}
	deliver(Delivered{m.context, m.completion || (flags & FI_MULTI_RECV), flags, m.discard ? 0 : m.msg_len,
			  m.cap, m.discard || !m.dst_count ? nullptr : m.dst[0].iov_base, m.data, m.tag, m.src});
}

void Receiver::deliver(const Delivered &d)
{
	const bool trunc = d.len > d.cap;
	port_.rx_count(false, !trunc);
	if (trunc) {
		char text[kMaxErrData];
		snprintf(text, sizeof text, "message of %lu bytes truncated to the %lu-byte receive buffer",
			 (unsigned long)d.len, (unsigned long)d.cap);
		if (d.context)
			port_.rx_error(d.context, d.flags, FI_ETRUNC, 0, text, d.cap, d.len - d.cap, d.buf, d.data, d.tag);
		else
			EFA_WARN(EpData, "%s (receive without a context)", text);
		return;
	}
	if (!d.completion)
		return;
	fi_cq_tagged_entry e{};
	e.op_context = d.context;
	e.flags = d.flags;
	e.len = d.len;
	e.buf = d.buf;
	e.data = d.data;
	e.tag = d.tag;
	port_.rx_complete(e, d.src);
}

/* ------------------------------------------------------------------ emulated writes */

/* ------------------------------------------------------------------ peers */

void Receiver::adopted(Peer &p)
{
	/* Its messages waiting for a receive now come from its fi_addr: a receive directed
	 * at it takes them (and FI_SOURCE reports it). */
	for (int t = 0; t < 2; t++)
		for (MsgRx *m = match_.unexpected(t != 0).front(); m; m = IList<MsgRx>::next(m))
			if (m->peer == &p)
				m->src = p.addr;
}

void Receiver::shm_resolved(fi_addr_t shm_src, fi_addr_t src)
{
	for (int t = 0; t < 2; t++)
		for (MsgRx *m = match_.unexpected(t != 0).front(); m; m = IList<MsgRx>::next(m))
			if (m->kind == RxKind::Shm && m->src == FI_ADDR_NOTAVAIL && m->shm_src == shm_src)
				m->src = src;
}

void Receiver::peer_failed(Peer &p, int err, uint32_t status)
{
	/* A whole one not yet received stays for the application, unless the peer was
	 * removed; the rest can never finish. */
	for (MsgLink *l = p.msgs.front(); l;) {
		MsgLink *next = IList<MsgLink>::next(l);
		MsgRx &m = *l->m;
		l = next;
		if (!m.bound) {
			bool whole = m.kind == RxKind::Eager;
			if (m.kind == RxKind::Medium) {
				uint64_t got = 0;
				for (Pkt *c = m.held.front(); c; c = IList<Pkt>::next(c)) {
					Parsed pk;
					if (v4::parse(c->buf, c->len, pk) == v4::Error::None)
						got += pk.payload_len;
				}
				whole = got >= m.msg_len;
			}
			if (whole && !p.released)
				continue;
			if (m.claimed) {
				for (auto it = claimed_.begin(); it != claimed_.end(); ++it)
					if (it->second == &m) {
						claimed_.erase(it);
						break;
					}
			} else if (m.on_list()) {
				match_.remove_unexpected(m.tagged, &m);
			}
			while (Pkt *c = m.held.pop_front())
				port_.rx_free_copy(c);
			if (m.has_id)
				ids_.remove(m.id);
			if (m.alink.on_list())
				p.active.unlink(&m.alink);
			p.msgs.unlink(&m.plink);
			EFA_DBG(EpData, "an unreceived message of %lu bytes from %s is dropped", (unsigned long)m.msg_len,
				addr_to_string(p.raw).c_str());
			msgs_.put(&m);
			continue;
		}
		if (m.rd_posted > m.rd_done) {
			/* RDMA reads on the device: the last one to come back finishes it. */
			if (!m.err) {
				m.err = err;
				m.prov_errno = status;
			}
			continue;
		}
		const bool read_based = m.kind == RxKind::LongRead;
		const bool whole = read_based ? m.rd_posted && m.rd_done == m.rd_posted && !m.owes_reads
					      : m.received >= m.msg_len;
		if (!whole && !m.err) {
			m.err = err;
			m.prov_errno = status;
		}
		m.dc = false; /* nobody to send a RECEIPT or EOR to */
		m.owes_cts = m.owes_receipt = m.owes_reads = m.owes_eor = false;
		if (m.on_list())
			pending_.unlink(&m);
		finish(&m);
	}
}

void Receiver::send_owed()
{
	/* Messages owing a control packet; one that still cannot send goes to the back. */
	for (size_t n = pending_.size(); n--;) {
		MsgRx *m = pending_.pop_front();
		if (m->owes_cts)
			send_cts(*m);
		else if (m->owes_receipt)
			finish(m);
		else if (m->owes_reads)
			read_pump(*m);
		else if (m->owes_eor && send_eor(*m))
			finish(m);
	}
}

/* ------------------------------------------------------------------ read-based messages: the reads, then EOR */

void Receiver::read_start(MsgRx &m)
{
	m.rd_started = true;
	const uint64_t want = read_len(m);
	/* A runting message's first bytes come in packets: the reads start after them. */
	const uint64_t from = std::min(m.runt, want);
	m.rd_posted = m.rd_done = from;
	uint64_t left = want;
	for (size_t i = 0; i < m.dst_count && left; i++) {
		const size_t len = std::min<uint64_t>(m.dst[i].iov_len, left);
		left -= len;
		if (!len)
			continue;
		if (int r = port_.rx_reg(m.dst[i].iov_base, len, m.reg[i])) {
			EFA_WARN(EpData, "registering a receive buffer for a read-based message failed: %s",
				 fi_strerror(-r));
			m.err = FI_EIO;
			m.prov_errno = uint32_t(EfaStatus::REGISTRATION_FAILED);
			break;
		}
	}
	if (m.err || want <= from) {
		read_end(m);
		return;
	}
	read_pump(m);
}

/* The reads are done (or failed, or there were none): once the runt is in too, the
 * message is whole and the sender gets its EOR (a runting sender waits for one only when
 * it had bytes beyond the runt to be read). */
void Receiver::read_end(MsgRx &m)
{
	m.reads_over = true;
	if (m.runt_got < m.runt && !m.err)
		return; /* advance() comes back with the rest of the runt */
	m.received = m.msg_len;
	if (m.runt && m.msg_len <= m.runt) {
		finish(&m);
		return;
	}
	if (send_eor(m))
		finish(&m);
}

void Receiver::read_pump(MsgRx &m)
{
	const uint64_t want = read_len(m);
	const uint64_t seg = cfg_.max_read;
	m.owes_reads = false;
	while (m.rd_posted < want) {
		/* The next piece: within one remote iov, one local iov and one work request. */
		uint64_t roff = m.rd_posted, loff = m.rd_posted;
		uint32_t ri = 0;
		size_t li = 0;
		while (ri < m.rd_count && roff >= m.rd[ri].len)
			roff -= m.rd[ri++].len;
		while (li < m.dst_count && loff >= m.dst[li].iov_len)
			loff -= m.dst[li++].iov_len;
		if (ri == m.rd_count || li == m.dst_count)
			break;
		const uint64_t n = std::min({m.rd[ri].len - roff, m.dst[li].iov_len - loff, seg, want - m.rd_posted});
		Pkt *pkt = port_.rx_tx_pkt(*m.peer);
		if (!pkt) {
			m.owes_reads = true;
			owe(m);
			return;
		}
		pkt->msg = &m;
		pkt->len = uint32_t(n); /* the bytes this read brings, for accounting */
		uint8_t *dst = static_cast<uint8_t *>(m.dst[li].iov_base) + loff;
		if (int r = port_.rx_read(pkt, dst, uint32_t(n), m.reg[li], m.rd[ri].addr + roff, uint32_t(m.rd[ri].key))) {
			EFA_WARN(EpData, "posting an RDMA read failed: %s", fi_strerror(-r));
			port_.rx_put_tx(pkt);
			m.err = FI_EIO;
			m.prov_errno = uint32_t(EfaStatus::POST_FAILED);
			break;
		}
		m.rd_posted += n;
	}
	if (m.err && m.rd_done == m.rd_posted)
		read_end(m);
}

void Receiver::read_done(Pkt *pkt, bool ok, uint32_t status)
{
	MsgRx &m = *pkt->msg;
	m.rd_done += pkt->len;
	pkt->msg = nullptr;
	port_.rx_put_tx(pkt);
	if (!ok && !m.err) {
		EFA_WARN(EpData, "RDMA read of a message from %s failed: %s", addr_to_string(m.peer->raw).c_str(),
			 efa_status_msg(status));
		m.err = efa_status_to_fi(status);
		m.prov_errno = status;
	}
	if (m.rd_done < m.rd_posted || (m.rd_posted < read_len(m) && !m.err))
		return;
	read_end(m);
}

/* ------------------------------------------------------------------ same-host messages */

MsgRx *Receiver::shm_arrival(bool tagged, fi_addr_t src, uint64_t tag, uint64_t len, void *entry)
{
	MsgRx *m = msgs_.get();
	if (!m)
		return nullptr;
	m->kind = RxKind::Shm;
	m->tagged = tagged;
	m->src = src;
	m->tag = tag;
	m->msg_len = len;
	m->shm = entry;
	if (RxOp *r = match_.find_posted(tagged, src, tag)) {
		/* shm copies it as soon as we return: nothing to start later. */
		m->shm_sent = true;
		if (!r->multi)
			match_.unpost(tagged, r);
		else if (tagged)
			m->msg_len = r->cap - r->used; /* a tagged slice: what is left */
		bind(*m, r);
	}
	return m;
}

RxOp *Receiver::shm_take(bool tagged, fi_addr_t src, uint64_t tag, uint64_t len, size_t sink_room)
{
	/* From a sender not inserted yet, its FI_SOURCE may come later (shm_resolved). */
	if (src == FI_ADDR_NOTAVAIL)
		return nullptr;
	RxOp *r = match_.find_posted(tagged, src, tag);
	if (!r || r->multi || ((tagged || len > r->cap) && r->iov_count >= sink_room))
		return nullptr;
	match_.unpost(tagged, r);
	/* Unposted, it describes the message now: its source and tag for the completion. */
	r->src = src;
	r->tag = tag;
	r->shm_len = len;
	return r;
}

void Receiver::shm_taken_done(RxOp *r, uint64_t len, uint64_t data, bool has_data, int err)
{
	const uint64_t flags = FI_RECV | (r->tagged ? FI_TAGGED : FI_MSG) | (has_data ? FI_REMOTE_CQ_DATA : 0);
	void *buf = r->iov_count ? r->iov[0].iov_base : nullptr;
	if (err && err != FI_ETRUNC) {
		char text[kMaxErrData];
		snprintf(text, sizeof text, "a message from a same-host peer (shm) failed: %s", fi_strerror(err));
		port_.rx_count(false, false);
		port_.rx_error(r->context, flags, err, 0, text, 0, 0, nullptr, data, r->tag);
	} else {
		/* Truncation is not an error of the message: deliver() tells it from the length. */
		deliver(Delivered{r->context, r->completion, flags, len, r->cap, buf, data, r->tag, r->src});
	}
	rxops_.put(r);
}

void Receiver::shm_start(MsgRx &m)
{
	m.shm_sent = true;
	if (m.discard) {
		port_.rx_shm_discard(m);
		finish(&m);
		return;
	}
	if (int r = port_.rx_shm_start(m)) {
		m.err = -r;
		finish(&m);
	}
}

void Receiver::shm_record(MsgRx &m, uint64_t len, uint64_t data, bool has_data, int err)
{
	m.msg_len = len;
	m.data = data;
	m.has_data = has_data;
	if (err)
		m.err = err;
}

void Receiver::shm_pulled(MsgRx &m, uint64_t len, uint64_t data, bool has_data, int err)
{
	m.pulling = false;
	shm_record(m, len, data, has_data, err);
	if (m.bound && !m.shm_sent)
		shm_deliver(m);
}

void Receiver::shm_deliver(MsgRx &m)
{
	m.shm_sent = true;
	if (!m.err && !m.discard && m.shm_buf)
		buf_to_iov(m.dst, m.dst_count, 0, m.shm_buf.get(), std::min(m.msg_len, m.cap));
	m.received = m.msg_len;
	m.shm_buf.reset();
	finish(&m);
}

void Receiver::shm_done(MsgRx &m, uint64_t len, uint64_t olen, uint64_t data, bool has_data, int err)
{
	/* Truncation is not an error of the message: complete() tells it from the length. */
	shm_record(m, len + olen, data, has_data, err == FI_ETRUNC ? 0 : err);
	m.received = m.msg_len;
	finish(&m);
}

} // namespace efa::rdm
