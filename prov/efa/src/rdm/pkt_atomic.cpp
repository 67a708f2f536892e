/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The atomic family (docs/protocol.md section 8): the RTAs (WRITE_RTA,
 * DC_WRITE_RTA, FETCH_RTA, COMPARE_RTA), ordered requests with their operands, applied
 * by the target's software (atomic_ops.h) and answered with a RECEIPT (DC_WRITE_RTA),
 * ATOMRSP carrying the old values (fetch, compare), or, to a peer of ours, EXT_ERROR.
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
	const uint16_t flags = req_flags(p, false, v4::kReqAtomic);
	Type t = a.kind == AtomicKind::Fetch ? Type::FetchRta : Type::CompareRta;
	if (a.kind == AtomicKind::Write)
		t = op.need_receipt ? Type::DcWriteRta : Type::WriteRta;
	Pkt *pkt = tx_pkt(p, &op);
	v4::Writer w(pkt->buf, pkt->cap);
	v4::Rta *h = w.header<v4::Rta>(t, flags);
	h->msg_id = op.msg_id;
	h->rma_iov_count = 1;
	h->atomic_datatype = uint32_t(a.dt);
	h->atomic_op = uint32_t(a.op);
	h->id = t == Type::WriteRta ? 0 : op.id; /* recv_id of the ATOMRSP, send_id of the RECEIPT */
	const RmaIov riov{a.rma[0].addr, bytes, a.rma[0].key};
	w.iovs(&riov, 1);
	req_opts(w, p, flags, 0);
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
	const v4::Rta h = pk.as<v4::Rta>();
	AtomicKind kind = AtomicKind::Write;
	if (pk.type == Type::FetchRta)
		kind = AtomicKind::Fetch;
	else if (pk.type == Type::CompareRta)
		kind = AtomicKind::Compare;
	/* The initiator's id: FETCH / COMPARE name the ATOMRSP, DC_WRITE the RECEIPT;
	 * WRITE_RTA asks for no answer. */
	const uint32_t id = pk.type == Type::WriteRta ? 0 : h.id;
	auto refuse = [&](int err) {
		count(kCntrRemoteWrite, false);
		if (id)
			send_ctl(Ctl{&p, Type::ExtError, id, 0, uint32_t(err), {}});
	};
	const fi_op op = fi_op(h.atomic_op);
	const fi_datatype dt = fi_datatype(h.atomic_datatype);
	if (!atomic_valid(kind, op, dt)) {
		EFA_WARN(EpData, "an atomic of op %u on datatype %u from %s is not supported: refused", h.atomic_op,
			 h.atomic_datatype, addr_to_string(p.raw).c_str());
		refuse(FI_EOPNOTSUPP);
		return;
	}
	/* Writes need FI_REMOTE_WRITE, fetches and compares also FI_REMOTE_READ, and a fetch
	 * of FI_ATOMIC_READ only FI_REMOTE_READ. */
	uint64_t access = kind == AtomicKind::Write ? FI_REMOTE_WRITE : FI_REMOTE_READ | FI_REMOTE_WRITE;
	if (op == FI_ATOMIC_READ)
		access = FI_REMOTE_READ;
	iovec target[kMaxRmaIov];
	uint64_t bytes = 0;
	if (int err = check_rma(pk, access, target, bytes)) {
		refuse(err);
		return;
	}
	/* The operands follow the headers: the values, then (compare) the values to compare
	 * with; a FI_ATOMIC_READ needs none (a peer may send some anyway). */
	const size_t dts = atomic_datatype_size(dt);
	const uint64_t operands = (op == FI_ATOMIC_READ ? 0 : bytes) * (kind == AtomicKind::Compare ? 2 : 1);
	if (pk.rma_iov_count != 1 || bytes % dts || bytes > mtu - sizeof(v4::AtomRsp) || pk.payload_len < operands) {
		drops.malformed++;
		EFA_WARN(EpData, "an atomic of %lu bytes on datatype %u from %s carries %zu bytes of operands: refused",
			 (unsigned long)bytes, h.atomic_datatype, addr_to_string(p.raw).c_str(), pk.payload_len);
		refuse(FI_EINVAL);
		return;
	}
	const uint8_t *operand = op == FI_ATOMIC_READ ? nullptr : pk.payload;
	const uint8_t *compare = kind == AtomicKind::Compare ? pk.payload + bytes : nullptr;
	std::vector<uint8_t> result(kind == AtomicKind::Write ? 0 : bytes);
	atomic_apply(kind, op, dt, target[0].iov_base, operand, compare, result.empty() ? nullptr : result.data(),
		     size_t(bytes / dts));
	if (access & FI_REMOTE_WRITE)
		count(kCntrRemoteWrite, true);
	if (access & FI_REMOTE_READ)
		count(kCntrRemoteRead, true);
	if (pk.type == Type::DcWriteRta)
		send_ctl(Ctl{&p, Type::Receipt, id, h.msg_id, 0, {}});
	else if (kind != AtomicKind::Write)
		send_ctl(Ctl{&p, Type::AtomRsp, id, 0, 0, std::move(result)});
}

/* ------------------------------------------------------------------ the answer */

void Sender::handle_atom_rsp(Peer &p, const Parsed &pk)
{
	const v4::AtomRsp h = pk.as<v4::AtomRsp>();
	TxOp *op = ids_.find(h.recv_id);
	if (!op || op->peer != &p || op->kind != TxKind::Atomic || pk.payload_len != op->len || op->done) {
		drops_.unknown++;
		return;
	}
	buf_to_iov(op->result, op->result_count, 0, pk.payload, pk.payload_len);
	op->done = op->len;
	finish(op);
}

} // namespace efa::rdm
