/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The life of a send operation (docs/protocol.md section 8): protocol selection, the
 * EAGER, MEDIUM and LONGCTS requests, DATA under clear-to-send windows, the device's
 * verdict on each packet (RNR, peer gone), VOID runs (FI_RM_DISABLED), and the
 * completion or failure of transmit operations. Control packets: pkt_ctl.cpp.
 */
#include "rdm/ep.h"

#include "efa_errno.h"
#include "info.h"
#include "log.h"

#include <algorithm>
#include <cstring>

namespace efa::rdm {

uint64_t iov_total(const iovec *iov, size_t count)
{
	uint64_t n = 0;
	for (size_t i = 0; i < count; i++)
		n += iov[i].iov_len;
	return n;
}

namespace {

/* Copies len bytes between buf and the iov list from byte off of the list, either way. */
size_t iov_copy(const iovec *iov, size_t count, uint64_t off, uint8_t *buf, size_t len, bool to_iov)
{
	size_t done = 0;
	for (size_t i = 0; i < count && done < len; i++) {
		if (off >= iov[i].iov_len) {
			off -= iov[i].iov_len;
			continue;
		}
		const size_t n = std::min<size_t>(iov[i].iov_len - off, len - done);
		uint8_t *at = static_cast<uint8_t *>(iov[i].iov_base) + off;
		if (to_iov)
			std::memcpy(at, buf + done, n);
		else
			std::memcpy(buf + done, at, n);
		done += n;
		off = 0;
	}
	return done;
}

} // namespace

size_t iov_to_buf(const iovec *iov, size_t count, uint64_t off, void *dst, size_t len)
{
	return iov_copy(iov, count, off, static_cast<uint8_t *>(dst), len, false);
}

size_t buf_to_iov(const iovec *iov, size_t count, uint64_t off, const void *src, size_t len)
{
	return iov_copy(iov, count, off, static_cast<uint8_t *>(const_cast<void *>(src)), len, true);
}

namespace {

/* Optional header bytes of a REQ to `p`. */
size_t opt_len(const Peer &p, bool data) { return (p.hs_got ? 0 : sizeof(RawAddr)) + (data ? kCqDataLen : 0); }

} // namespace

ssize_t Ep::send(const SendArgs &a)
{
	if (ssize_t r = check_start(a.tagged ? "fi_tsendmsg" : "fi_sendmsg", a.flags, kSendFlags))
		return r;
	if (a.count > kRdmIovLimit || (a.count && !a.iov)) {
		EFA_WARN_ONCE(EpData, "%zu iovs: more than tx_attr->iov_limit (%zu); split the send", a.count,
			      kRdmIovLimit);
		return -FI_EINVAL;
	}
	const uint64_t len = iov_total(a.iov, a.count);
	const bool inject = a.flags & FI_INJECT;
	if (inject && len > inject_size) {
		EFA_WARN_ONCE(EpData, "inject of %lu bytes: more than tx_attr->inject_size (%zu); use fi_send",
			      (unsigned long)len, inject_size);
		return -FI_EMSGSIZE;
	}
	ssize_t err = 0;
	Peer *p = tx_peer(a.dest, true, err);
	if (!p)
		return err;

	const bool data = a.flags & FI_REMOTE_CQ_DATA;
	const size_t opt = opt_len(*p, data);
	/* FI_RM_DISABLED: no MEDIUM, whose segments could not be refused one by one; a
	 * message beyond one packet starts with one REQ (protocol.md section 11). */
	const SendLimits lim{mtu, opt, rm_enabled ? max_medium : 0, min_read, longread_ok(*p, len, a.count)};
	const size_t medium_seg = medium_segment(lim);
	Proto proto = select_send(len, lim);
	size_t npkts = first_burst(len, lim);
	if (!p->hs_sent)
		npkts++;
	/* Everything the first burst needs, or nothing: a message id is never spent on a
	 * message that cannot go out. */
	if (io.tx_avail() < npkts)
		return -FI_EAGAIN;
	TxOp *op = txops.get();
	if (!op)
		return -FI_EAGAIN;
	if (!p->hs_sent)
		send_handshake(*p);

	op->start(a.tagged ? TxKind::Tagged : TxKind::Msg, p, a.dest, a.context, a.flags,
		  FI_SEND | (a.tagged ? FI_TAGGED : FI_MSG), !inject && tx_completion(a.flags));
	op->proto = proto;
	op->set_iov(a.iov, a.desc, a.count, len);
	op->tag = a.tag;
	op->data = a.data;
	op->msg_id = p->next_tx_id++;
	op->need_receipt = a.flags & FI_DELIVERY_COMPLETE;
	const uint16_t flags = req_flags(*p) | (data ? kFlagCqData : 0) | (op->need_receipt ? kFlagDeliveryComplete : 0);
	/* The read-based protocol, unless the buffer cannot be registered: then long-CTS
	 * with the same message id (nothing was sent yet). */
	if (proto == Proto::LongRead) {
		if (!longread_send(*op, flags))
			return 0;
		proto = op->proto = Proto::LongCts;
	}
	/* The RECEIPT of an eager or medium message names it by message id; long-CTS has
	 * a send id, long-read completes on EOR (also by send id). */
	if (op->need_receipt && (proto == Proto::Eager || proto == Proto::Medium)) {
		op->rlink.op = op;
		p->receipts.push_back(&op->rlink);
	}

	auto begin = [&](PktWriter &w, Pkt *pkt) {
		(void)pkt;
		write_raw_addr(w, *p);
		if (data)
			w.cq_data(a.data);
	};
	switch (proto) {
	case Proto::Eager: {
		Pkt *pkt = tx_pkt(*p, op);
		PktWriter w(pkt->buf, pkt->cap);
		w.rtm<EagerHdr>(PktType::EagerMsg, a.tagged, qkey, flags, op->msg_id, uint32_t(len), a.tag);
		begin(w, pkt);
		iov_to_buf(a.iov, a.count, 0, w.reserve(len), len);
		pkt->len = uint32_t(w.size());
		op->sent = len;
		post(pkt);
		break;
	}
	case Proto::Medium:
		for (uint64_t off = 0; off < len; off += medium_seg) {
			const size_t n = std::min<uint64_t>(medium_seg, len - off);
			Pkt *pkt = tx_pkt(*p, op);
			PktWriter w(pkt->buf, pkt->cap);
			MediumHdr *h = w.rtm<MediumHdr>(PktType::MediumMsg, a.tagged, qkey, flags, op->msg_id, uint32_t(n),
							a.tag);
			h->msg_len = len;
			h->seg_off = off;
			begin(w, pkt);
			iov_to_buf(a.iov, a.count, off, w.reserve(n), n);
			pkt->len = uint32_t(w.size());
			op->sent += n;
			post(pkt);
		}
		break;
	default: {
		op->id = tx_ids.add(op);
		const size_t first = std::min<uint64_t>(len, mtu - sizeof(LongCtsHdr) - opt);
		Pkt *pkt = tx_pkt(*p, op);
		PktWriter w(pkt->buf, pkt->cap);
		LongCtsHdr *h = w.rtm<LongCtsHdr>(PktType::LongCtsMsg, a.tagged, qkey, flags, op->msg_id,
						  uint32_t(first), a.tag);
		h->msg_len = len;
		h->send_id = op->id;
		h->credits = uint32_t(credits);
		begin(w, pkt);
		iov_to_buf(a.iov, a.count, 0, w.reserve(first), first);
		pkt->len = uint32_t(w.size());
		op->sent = first;
		post(pkt);
		break;
	}
	}
	return 0;
}

void Ep::pump(TxOp &op)
{
	const size_t seg_max = mtu - sizeof(DataHdr);
	while (op.window && op.sent < op.len && !op.err) {
		Pkt *pkt = tx_pkt(*op.peer, &op);
		if (!pkt)
			break;
		const size_t n = std::min<uint64_t>({seg_max, op.window, op.len - op.sent});
		PktWriter w(pkt->buf, pkt->cap);
		/* DATA and READRSP share their layout: the target of an emulated read answers
		 * with the latter. */
		static_assert(sizeof(DataHdr) == sizeof(ReadRspHdr));
		DataHdr *h = w.header<DataHdr>(op.responder ? PktType::ReadRsp : PktType::Data, qkey);
		h->recv_id = op.peer_id;
		h->seg_len = uint32_t(n);
		h->seg_off = op.sent;
		iov_to_buf(op.iov, op.iov_count, op.sent, w.reserve(n), n);
		pkt->len = uint32_t(w.size());
		op.sent += n;
		op.window -= n;
		post(pkt);
	}
	const bool more = op.window && op.sent < op.len && !op.err;
	if (more && !op.on_list())
		tx_pending.push_back(&op);
	else if (!more && op.on_list())
		tx_pending.unlink(&op);
}

void Ep::tx_done(Pkt *pkt, const verbs::Wc &wc)
{
	Peer *p = pkt->peer;
	const uint32_t status = wc.ok() ? 0 : wc.vendor_err;
	/* The device gave up on the peer: everything waiting on it fails (liveness.cpp). */
	const bool gone = status == uint32_t(EfaStatus::LOCAL_ERROR_UNRESP_REMOTE) ||
			  status == uint32_t(EfaStatus::LOCAL_ERROR_UNREACH_REMOTE) ||
			  status == uint32_t(EfaStatus::REMOTE_ERROR_BAD_DEST_QPN);
	if (pkt->msg) {
		if (!status)
			peer_heard(*p);
		rx.read_done(pkt, wc.ok(), wc.vendor_err);
		if (gone)
			peer_unresponsive(*p, status);
		return;
	}
	if (pkt->probe)
		p->probe_out = false;
	TxOp *op = pkt->op;
	if (wc.ok()) {
		p->backoff_us = 0;
		peer_heard(*p); /* acknowledged by its device */
		if (pkt == p->void_pkt) {
			void_next(*p, pkt);
			return;
		}
		io.put_tx(pkt);
		if (op) {
			op->inflight--;
			finish_tx(op);
		}
		return;
	}
	if (status == uint32_t(EfaStatus::REMOTE_ERROR_RNR) && !p->dead && !p->released) {
		const PktType type = PktType(pkt->buf[0]);
		const bool first = is_req(type) && (type != PktType::MediumMsg && type != PktType::MediumTag);
		if (pkt == p->void_pkt) {
			/* The VOID itself found no buffer: it absorbs the runs refused since, and
			 * is resent after the backoff. */
			EagerHdr *v = reinterpret_cast<EagerHdr *>(pkt->buf);
			while (!p->voids.empty() && p->voids.front().first == v->rtm.msg_id + uint32_t(v->rtm.tag) &&
			       v->rtm.tag + p->voids.front().second <= kMaxVoidRun) {
				v->rtm.tag += p->voids.front().second;
				p->voids.pop_front();
			}
			io.on_rnr(pkt, now_ns());
			return;
		}
		if (rm_enabled || !op || !first) {
			io.on_rnr(pkt, now_ns());
			return;
		}
		/* FI_RM_DISABLED: the operation fails with FI_ENORX now, whatever the peer's
		 * software does; its message id still has to reach the peer, in a VOID run
		 * (protocol.md section 11). */
		op->inflight--;
		fail_tx(op, FI_ENORX, status);
		pkt->op = nullptr;
		void_ids(*p, pkt, reinterpret_cast<RtmHdr *>(pkt->buf)->msg_id);
		return;
	}
	if (pkt == p->void_pkt) {
		p->void_pkt = nullptr;
		p->voids.clear();
	}
	if (op) {
		op->inflight--;
		if (p->released)
			fail_tx(op, FI_ECANCELED, uint32_t(EfaStatus::PEER_REMOVED));
		else
			fail_tx(op, efa_status_to_fi(status), status);
	} else if (PktType(pkt->buf[0]) != PktType::Handshake && !gone && !p->released) {
		EFA_WARN(EpData, "a %s packet to %s failed: %s", pkt_type_name(PktType(pkt->buf[0])),
			 addr_to_string(p->raw).c_str(), efa_status_msg(status));
	}
	io.put_tx(pkt);
	if (gone)
		peer_unresponsive(*p, status);
}

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

void Ep::fail_tx(TxOp *op, int err, uint32_t prov_errno)
{
	if (!op->err) {
		op->err = err;
		op->prov_errno = prov_errno;
	}
	finish_tx(op);
}

void Ep::finish_tx(TxOp *op)
{
	if (op->inflight)
		return;
	if (!op->err) {
		if (op->sent < op->len)
			return; /* a long message waits for its next window */
		if (op->need_receipt && !op->got_receipt)
			return;
		if ((op->kind == TxKind::Read || op->proto == Proto::EmuAtomic) && !op->responder && op->done < op->len)
			return; /* the response is still on its way */
	}
	/* A device write with CQ data is in place at the target: its CQ data follows in a
	 * packet, which lands in one of the target's receive packets (protocol.md
	 * section 9). */
	if (op->notice && !op->err)
		send_ctl(Ctl{op->peer, PktType::WriteData, 0, 0, 0, {}, op->data, op->len});
	op->notice = false;
	if (op->on_list())
		tx_pending.unlink(op);
	if (op->id)
		tx_ids.remove(op->id);
	/* Whatever ended it (its RECEIPT, an error), an operation leaves the receipt list. */
	if (op->rlink.on_list())
		op->peer->receipts.unlink(&op->rlink);
	complete_tx(*op);
	txops.put(op);
}

void Ep::complete_tx(TxOp &op)
{
	if (op.responder) {
		count(kCntrRemoteRead, !op.err);
		return;
	}
	CntrIdx ci = kCntrSend;
	if (op.kind == TxKind::Read || (op.kind == TxKind::Atomic && op.result_count))
		ci = kCntrRead;
	else if (op.kind == TxKind::Write || op.kind == TxKind::Atomic)
		ci = kCntrWrite;
	count(ci, !op.err);
	if (!op.err) {
		if (op.completion) {
			fi_cq_tagged_entry e{};
			e.op_context = op.context;
			e.flags = op.cq_flags;
			tx_cq->push(e, FI_ADDR_NOTAVAIL);
		}
		return;
	}
	char text[kMaxErrData];
	snprintf(text, sizeof text, "%s (EFA status %u, peer %s)",
		 op.prov_errno ? efa_status_msg(op.prov_errno) : fi_strerror(op.err), op.prov_errno,
		 addr_to_string(op.peer->raw).c_str());
	/* An operation that asked for a completion gets its error entry, whatever its
	 * context (NULL is a valid one: without the entry the caller waits forever). One
	 * that asked for none (inject, selective completion) and has no context to name
	 * is only logged. */
	if (op.context || op.completion)
		report_error(tx_cq, op.context, op.cq_flags, op.err, op.prov_errno, text, op.len, 0, nullptr, op.data,
			     op.tag);
	else
		EFA_WARN(EpData, "an operation without a context failed: %s", text);
}

void Ep::report_error(Cq *cq, void *context, uint64_t flags, int err, uint32_t prov_errno, const std::string &text,
		      uint64_t len, uint64_t olen, void *buf, uint64_t data, uint64_t tag)
{
	fi_cq_err_entry e{};
	e.op_context = context;
	e.flags = flags;
	e.len = len;
	e.buf = buf;
	e.data = data;
	e.tag = tag;
	e.olen = olen;
	e.err = err;
	e.prov_errno = int(prov_errno);
	/* Expected outcomes (cancel, truncation, peek misses, FI_ENORX) are the
	 * application's to report; the log keeps each one for debugging. */
	EFA_INFO(EpData, "error completion (%s, flags %#lx, tag %#lx, len %lu): %s", fi_strerror(err),
		 (unsigned long)flags, (unsigned long)tag, (unsigned long)len, text.c_str());
	cq->push_error(e, text);
}

} // namespace efa::rdm
