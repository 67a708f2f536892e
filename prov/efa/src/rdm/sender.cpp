/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The Sender (sender.h): the life of a send operation (docs/protocol.md section 5):
 * the checks, protocol selection, the first burst, and the completion or failure of
 * every transmit operation. The packets are built by family: the RTMs in pkt_rtm.cpp,
 * CTSDATA / READRSP in pkt_data.cpp, the RTWs and RTRs in pkt_rma.cpp, the RTAs in
 * pkt_atomic.cpp; the answers are taken in pkt_ctl.cpp and those files. RMA and
 * atomic operations start in rma.cpp. The device's verdict on each packet (RNR,
 * EXT_VOID runs, peer gone) is the endpoint's (peer.cpp), which reports it here.
 */
#include "rdm/sender.h"

#include "rdm/attrs.h"

#include "efa_errno.h"
#include "info.h"
#include "log.h"

#include <algorithm>
#include <cstring>

namespace efa::rdm {

ssize_t bad_send_iovs(size_t count)
{
	EFA_WARN_ONCE(EpData, "%zu iovs: more than tx_attr->iov_limit (%zu), or none given; split the send", count,
		      kRdmIovLimit);
	return -FI_EINVAL;
}

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

ssize_t Sender::inject_too_long(uint64_t len, const char *instead) const
{
	EFA_WARN_ONCE(EpData, "inject of %lu bytes: more than tx_attr->inject_size (%zu); use %s", (unsigned long)len,
		      cfg_.inject_size, instead);
	return -FI_EMSGSIZE;
}

Peer *Sender::call_peer(bool inject, uint64_t len, const char *instead, fi_addr_t dest, bool new_id, ssize_t &err)
{
	if (inject && len > cfg_.inject_size) {
		err = inject_too_long(len, instead);
		return nullptr;
	}
	return port_.tx_peer(dest, new_id, err);
}

ssize_t Sender::send_op(const SendArgs &a)
{
	uint64_t len = 0;
	if (ssize_t r = send_iovs(a, len))
		return r;
	const bool inject = a.flags & FI_INJECT;
	ssize_t err = 0;
	Peer *p = call_peer(inject, len, "fi_send", a.dest, true, err);
	if (!p)
		return err;

	const bool data = a.flags & FI_REMOTE_CQ_DATA;
	const size_t opt = req_opt_len(!p->hs_got, data);
	const uint16_t kind = uint16_t(v4::kReqMsg | (a.tagged ? v4::kReqTagged : 0));
	/* FI_RM_DISABLED: no MEDIUM, whose segments could not be refused one by one; a
	 * message beyond one packet starts with one REQ (protocol.md section 7). */
	/* The software device's thresholds between our endpoints; upstream's toward its
	 * provider, which is what that provider uses itself. */
	const size_t max_medium = p->ext ? cfg_.max_medium : cfg_.max_medium_foreign;
	const size_t min_read = p->ext ? cfg_.min_read : cfg_.min_read_foreign;
	const SendLimits lim{cfg_.mtu, opt, cfg_.rm_enabled ? max_medium : 0, min_read,
			     longread_ok(*p, len, a.count, min_read)};
	const size_t medium_seg = medium_segment(lim);
	Proto proto = select_send(len, lim);
	size_t npkts = first_burst(len, lim);
	if (!p->hs_sent)
		npkts++;
	/* Everything the first burst needs, or nothing: a message id is never spent on a
	 * message that cannot go out. */
	if (port_.tx_avail() < npkts)
		return -FI_EAGAIN;
	const uint16_t flags = req_flags(*p, data, kind);
	TxOp *op = ops_.get();
	if (!op)
		return -FI_EAGAIN;
	if (!p->hs_sent)
		port_.tx_handshake(*p);

	op->start(a.tagged ? TxKind::Tagged : TxKind::Msg, p, a.dest, a.context, a.flags,
		  FI_SEND | (a.tagged ? FI_TAGGED : FI_MSG), !inject && completion(a.flags));
	op->proto = proto;
	op->set_iov(a.iov, a.desc, a.count, len);
	op->tag = a.tag;
	op->data = a.data;
	op->msg_id = p->next_tx_id++;
	op->need_receipt = a.flags & FI_DELIVERY_COMPLETE;
	/* The read-based protocol, unless the buffer cannot be registered: then long-CTS
	 * with the same message id (nothing was sent yet). */
	if (proto == Proto::LongRead) {
		if (!longread_send(*op, flags)) {
			counts.longread++;
			return 0;
		}
		proto = op->proto = Proto::LongCts;
	}
	/* The RECEIPT of a delivery-complete message names its send id (long-CTS takes one
	 * anyway; long-read completes on EOR, which names it too). */
	if (op->need_receipt && (proto == Proto::Eager || proto == Proto::Medium))
		op->id = ids_.add(op);

	switch (proto) {
	case Proto::Eager:
		counts.eager++;
		post_eager(*op, flags);
		break;
	case Proto::Medium:
		counts.medium++;
		post_medium(*op, flags, medium_seg);
		break;
	default:
		counts.longcts++;
		post_longcts(*op, flags, cfg_.mtu - kLongCtsHdrMax - opt);
		break;
	}
	return 0;
}

void Sender::fail(TxOp *op, int err, uint32_t prov_errno)
{
	if (!op->err) {
		op->err = err;
		op->prov_errno = prov_errno;
	}
	finish(op);
}

void Sender::finish(TxOp *op)
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
	/* A device write with CQ data to a peer of ours is in place: its CQ data follows in
	 * a packet (rma.cpp). */
	if (op->notice && !op->err)
		port_.tx_write_data(*op->peer, op->data, op->len);
	op->notice = false;
	if (op->on_list())
		pending_.unlink(op);
	if (op->id)
		ids_.remove(op->id);
	complete(*op);
	ops_.put(op);
}

void Sender::complete(TxOp &op)
{
	if (op.responder) {
		port_.tx_count(kCntrRemoteRead, !op.err);
		return;
	}
	CntrIdx ci = kCntrSend;
	if (op.kind == TxKind::Read || (op.kind == TxKind::Atomic && op.result_count))
		ci = kCntrRead;
	else if (op.kind == TxKind::Write || op.kind == TxKind::Atomic)
		ci = kCntrWrite;
	port_.tx_count(ci, !op.err);
	if (!op.err) {
		if (op.completion) {
			fi_cq_tagged_entry e{};
			e.op_context = op.context;
			e.flags = op.cq_flags;
			port_.tx_complete(e);
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
		port_.tx_error(op.context, op.cq_flags, op.err, op.prov_errno, text, op.len, op.data,
			     op.tag);
	else
		EFA_WARN(EpData, "an operation without a context failed: %s", text);
}

/* ------------------------------------------------------------------ set-up, peers, progress */

void Sender::configure(const TxConfig &c)
{
	cfg_ = c;
	inject_eager_ = std::min<uint64_t>(c.inject_size, c.mtu > kEagerHdrMax + kReqOptMax ? eager_max(c.mtu, kReqOptMax) : 0);
	ops_.set_cap(c.size);
}

void Sender::peer_failed(Peer &p, int err, uint32_t status)
{
	/* Operations waiting for an answer of the peer; one with work on the device ends
	 * when that comes back (the device fails it too). */
	std::vector<TxOp *> ops;
	ids_.for_each([&](TxOp *op) {
		if (op->peer == &p)
			ops.push_back(op);
	});
	for (TxOp *op = pending_.front(); op; op = IList<TxOp>::next(op))
		if (op->peer == &p)
			ops.push_back(op);
	std::sort(ops.begin(), ops.end());
	ops.erase(std::unique(ops.begin(), ops.end()), ops.end());
	for (TxOp *op : ops) {
		op->window = 0;
		fail(op, err, status);
	}
}

void Sender::mark_waiting()
{
	ids_.for_each([](TxOp *op) {
		if (!op->err && !op->responder)
			op->peer->waiting = true;
	});
}

void Sender::pump_pending()
{
	for (TxOp *op = pending_.front(); op;) {
		TxOp *next = IList<TxOp>::next(op);
		pump(*op);
		op = next;
	}
}

} // namespace efa::rdm
