/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The atomic family (docs/protocol.md section 9): ATOMIC_REQ, an ordered request with
 * its operands, applied by the target's software (atomic_ops.h) and answered with a
 * RECEIPT (writes) or ATOMRSP carrying the old values (fetch, compare), or ERROR.
 * Built here by the Sender; its send completion is the generic one; handled at the
 * target by the endpoint, and the answer taken back by the Sender.
 */
#include "rdm/ep.h"

#include "efa_errno.h"
#include "log.h"
#include "rdm/atomic_ops.h"

#include <algorithm>
#include <vector>

namespace efa::rdm {

void Sender::post_atomic_req(TxOp &op, const AtomicArgs &a)
{
	Peer &p = *op.peer;
	const size_t dts = atomic_datatype_size(a.dt);
	const uint64_t bytes = uint64_t(a.count) * dts;
	Pkt *pkt = tx_pkt(p, &op);
	PktWriter w(pkt->buf, pkt->cap);
	AtomicReqHdr *h = w.header<AtomicReqHdr>(PktType::AtomicReq, cfg_.qkey, req_flags(p));
	h->msg_id = op.msg_id;
	h->iov_count = 1;
	h->op = uint8_t(a.op);
	h->datatype = uint8_t(a.dt);
	h->kind = uint8_t(a.kind);
	h->recv_id = op.id;
	h->count = a.count;
	raw_addr(w, p);
	const RmaIov riov{a.rma[0].addr, bytes, a.rma[0].key};
	w.bytes(&riov, sizeof riov);
	auto gather = [&](const fi_ioc *v, size_t n) {
		for (size_t i = 0; i < n; i++)
			w.bytes(v[i].addr, v[i].count * dts);
	};
	if (a.op != FI_ATOMIC_READ)
		gather(a.src, a.src_count);
	if (a.kind == AtomicKind::Compare)
		gather(a.cmp, a.cmp_count);
	pkt->len = uint32_t(w.size());
	port_.tx_post(pkt);
}

/* ------------------------------------------------------------------ at the target */

void Ep::handle_atomic_req(Peer &p, const Parsed &pk)
{
	const AtomicReqHdr &h = pk.as<AtomicReqHdr>();
	const AtomicKind kind = AtomicKind(h.kind);
	const fi_op op = fi_op(h.op);
	const fi_datatype dt = fi_datatype(h.datatype);
	auto refuse = [&](int err) { send_ctl(Ctl{&p, PktType::Error, h.recv_id, h.msg_id, uint32_t(err), {}}); };
	if (!atomic_valid(kind, op, dt)) {
		refuse(FI_EOPNOTSUPP);
		return;
	}
	const size_t dts = atomic_datatype_size(dt);
	const uint64_t bytes = h.count * dts;
	const uint64_t operands = (op == FI_ATOMIC_READ ? 0 : bytes) * (kind == AtomicKind::Compare ? 2 : 1);
	if (h.count > mtu || pk.iov_count != 1 || pk.iov[0].len != bytes || pk.payload_len != operands) {
		drops.malformed++;
		refuse(FI_EINVAL);
		return;
	}
	/* Writes need FI_REMOTE_WRITE, fetches and compares also FI_REMOTE_READ, and a fetch
	 * of FI_ATOMIC_READ only FI_REMOTE_READ. */
	uint64_t access = kind == AtomicKind::Write ? FI_REMOTE_WRITE : FI_REMOTE_READ | FI_REMOTE_WRITE;
	if (op == FI_ATOMIC_READ)
		access = FI_REMOTE_READ;
	iovec target;
	if (int err = check_rma(pk.iov, 1, access, &target)) {
		refuse(err);
		return;
	}
	const uint8_t *operand = op == FI_ATOMIC_READ ? nullptr : pk.payload;
	const uint8_t *compare = kind == AtomicKind::Compare ? pk.payload + bytes : nullptr;
	std::vector<uint8_t> result(kind == AtomicKind::Write ? 0 : bytes);
	atomic_apply(kind, op, dt, target.iov_base, operand, compare, result.empty() ? nullptr : result.data(),
		     size_t(h.count));
	if (access & FI_REMOTE_WRITE)
		count(kCntrRemoteWrite, true);
	if (access & FI_REMOTE_READ)
		count(kCntrRemoteRead, true);
	if (kind == AtomicKind::Write)
		send_ctl(Ctl{&p, PktType::Receipt, h.recv_id, h.msg_id, 0, {}});
	else
		send_ctl(Ctl{&p, PktType::AtomRsp, h.recv_id, h.msg_id, 0, std::move(result)});
}

/* ------------------------------------------------------------------ the answer */

void Sender::handle_atom_rsp(Peer &p, const Parsed &pk)
{
	const RspHdr &h = pk.as<RspHdr>();
	TxOp *op = ids_.find(h.recv_id);
	if (!op || op->peer != &p || op->kind != TxKind::Atomic || h.seg_len != op->len || op->done) {
		drops_.unknown++;
		return;
	}
	buf_to_iov(op->result, op->result_count, 0, pk.payload, h.seg_len);
	op->done = op->len;
	finish(op);
}

} // namespace efa::rdm
