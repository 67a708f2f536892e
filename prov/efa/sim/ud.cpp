/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Unreliable datagram (UD) queue pairs of the software EFA device, as rdma-core's EFA
 * provider (providers/efa/verbs.c) and the EFA kernel driver define them:
 *
 *  - created with ibv_create_qp / ibv_create_qp_ex and qp_type IBV_QPT_UD (the only type
 *    plain verbs create on EFA); send ops SEND and SEND_WITH_IMM only; inline data up to
 *    the device's basic inline size; efadv_create_qp_ex and efadv_create_driver_qp make
 *    SRD QPs only (qp_type must be IBV_QPT_DRIVER there);
 *  - the InfiniBand state table for UD (ib_modify_qp_is_ok): RESET -> INIT needs the
 *    pkey index, port and QKEY; INIT -> RTR may change the pkey index and QKEY; RTR ->
 *    RTS needs the send PSN and may change the QKEY; no RNR retry (an EINVAL);
 *  - a send is one datagram: addressed by AH + remote QPN + remote QKEY, at most the
 *    MTU (longer: LOCAL_ERROR_BAD_LENGTH), and complete as soon as it is on the wire,
 *    whether or not anybody receives it. Nothing is acknowledged or retransmitted:
 *    what the network (or EFASIM_LOSS) drops is gone; datagrams in flight together
 *    overtake each other (they are spread over EFASIM_PATHS like SRD's);
 *  - a receive gets the 40-byte global route header (GRH) first, then the payload, and
 *    a completion of 40 + payload bytes; a datagram with the wrong QKEY, for a QP not in
 *    RTR/RTS, or finding no posted receive is dropped without a trace at the sender; a
 *    receive buffer too short for it completes with LOCAL_ERROR_BAD_LENGTH.
 *
 * The work-request builders, receive posting and destruction are shared with SRD QPs
 * (qp.cpp); commit() hands a UD work request to ud_transmit() here.
 */
#include "sim.h"

#include <arpa/inet.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>

namespace efasim {

namespace {

std::atomic<uint32_t> g_ud_handles{0x40000000};

/* The global route header a UD receive starts with (struct ibv_grh's layout). */
struct Grh {
	uint32_t version_tclass_flow; /* network order: IPv6 version 6 in the top nibble */
	uint16_t paylen;	      /* network order */
	uint8_t next_hdr;
	uint8_t hop_limit;
	uint8_t sgid[16];
	uint8_t dgid[16];
};
static_assert(sizeof(Grh) == 40, "the GRH is 40 bytes");

uint32_t roundup_pow2(uint32_t v)
{
	uint32_t r = 1;
	while (r < v)
		r <<= 1;
	return r;
}

/* Copies `len` bytes into the receive's buffers at offset `off`; false if a buffer is
 * not (or no longer) registered for local write. */
bool scatter(Runtime *rt, Pd *pd, const RecvWr &wr, uint64_t off, const uint8_t *src, uint64_t len)
{
	for (unsigned i = 0; i < wr.nsge && len; i++) {
		const Sge &s = wr.sge[i];
		if (off >= s.length) {
			off -= s.length;
			continue;
		}
		if (!sge_valid(rt, pd, s, IBV_ACCESS_LOCAL_WRITE))
			return false;
		const uint64_t take = std::min<uint64_t>(s.length - off, len);
		std::memcpy(reinterpret_cast<void *>(s.addr + off), src, take);
		src += take;
		len -= take;
		off = 0;
	}
	return len == 0;
}

/*
 * Whether `cur` -> `next` with `mask` is a legal UD transition (the InfiniBand table the
 * EFA kernel driver applies to UD QPs). RESET and ERR are reachable from every state but
 * RESET -> ERR; the send-queue-drain states are not modelled.
 */
bool ud_transition_ok(ibv_qp_state cur, ibv_qp_state next, int mask)
{
	int need = 0, allow = 0;
	if ((mask & IBV_QP_CUR_STATE) && cur != IBV_QPS_RTR && cur != IBV_QPS_RTS)
		return false;
	if (next == IBV_QPS_RESET) {
		/* from any state */
	} else if (next == IBV_QPS_ERR) {
		if (cur == IBV_QPS_RESET)
			return false;
	} else if (cur == IBV_QPS_RESET && next == IBV_QPS_INIT) {
		need = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY;
	} else if (cur == IBV_QPS_INIT && next == IBV_QPS_INIT) {
		allow = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY;
	} else if (cur == IBV_QPS_INIT && next == IBV_QPS_RTR) {
		allow = IBV_QP_PKEY_INDEX | IBV_QP_QKEY;
	} else if (cur == IBV_QPS_RTR && next == IBV_QPS_RTS) {
		need = IBV_QP_SQ_PSN;
		allow = IBV_QP_CUR_STATE | IBV_QP_QKEY;
	} else if (cur == IBV_QPS_RTS && next == IBV_QPS_RTS) {
		allow = IBV_QP_CUR_STATE | IBV_QP_QKEY;
	} else {
		return false;
	}
	return (mask & need) == need && !(mask & ~(need | allow | IBV_QP_STATE));
}

} // namespace

Qp *create_ud_qp(ibv_context *c, ibv_qp_init_attr_ex *attr)
{
	auto fail = [](int e) -> Qp * {
		errno = e;
		return nullptr;
	};
	if (!Context::checked(c) || !attr)
		return fail(EINVAL);
	/* efa_check_qp_attr, in rdma-core's order. */
	if (attr->comp_mask & ~uint32_t(IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS))
		return fail(EOPNOTSUPP);
	if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd || attr->pd->context != c)
		return fail(EINVAL);
	const uint64_t ud_ops = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM;
	const bool has_ex = attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	if (has_ex && (attr->send_ops_flags & ~ud_ops))
		return fail(EOPNOTSUPP); /* no RDMA on UD */
	if (!attr->send_cq || !attr->recv_cq || attr->srq)
		return fail(EINVAL);
	if (attr->send_cq->context != c || attr->recv_cq->context != c)
		return fail(EINVAL);
	/* efa_check_qp_limits, and the kernel's inline check (no wide inline on UD). */
	efadv_device_attr_cur dev;
	fill_efadv_attr(dev);
	const ibv_qp_cap &req = attr->cap;
	if (req.max_send_sge > dev.max_sq_sge || req.max_recv_sge > dev.max_rq_sge || req.max_send_wr > dev.max_sq_wr ||
	    req.max_recv_wr > dev.max_rq_wr || req.max_inline_data > dev.inline_buf_size)
		return fail(EINVAL);

	Context *ctx = Context::from(c);
	Runtime *rt = ctx->rt;
	auto *qp = new (std::nothrow) Qp();
	if (!qp)
		return fail(ENOMEM);
	uint32_t qpn = 0;
	int fd = qp_open_socket(rt, qpn);
	if (fd < 0) {
		delete qp;
		return fail(-fd);
	}
	qp->ctx = ctx;
	qp->rt = rt;
	qp->pd = reinterpret_cast<Pd *>(attr->pd);
	qp->scq = Cq::from(attr->send_cq);
	qp->rcq = Cq::from(attr->recv_cq);
	qp->qpn = qpn;
	qp->gen = next_qp_gen();
	qp->fd = fd;
	qp->send_ops = has_ex ? attr->send_ops_flags : ud_ops;
	qp->has_qp_ex = has_ex;
	qp->driver_srd = false;
	qp->ud = true;
	qp->sq_sig_all = attr->sq_sig_all;
	qp->rnr_retry = 0;

	qp->cap.max_send_wr = std::min(roundup_pow2(std::max(req.max_send_wr, 1u)), dev.max_sq_wr);
	qp->cap.max_recv_wr = std::min(roundup_pow2(std::max(req.max_recv_wr, 1u)), dev.max_rq_wr);
	qp->cap.max_send_sge = dev.max_sq_sge;
	qp->cap.max_recv_sge = dev.max_rq_sge;
	qp->cap.max_inline_data = dev.inline_buf_size;
	attr->cap = qp->cap;
	qp->sq.resize(qp->cap.max_send_wr);
	for (uint32_t i = qp->cap.max_send_wr; i > 0; i--)
		qp->sq_free.push_back(i - 1);
	qp->rq.resize(qp->cap.max_recv_wr);

	ibv_qp &b = qp->qpx.qp_base;
	b.context = c;
	b.qp_context = attr->qp_context;
	b.pd = attr->pd;
	b.send_cq = attr->send_cq;
	b.recv_cq = attr->recv_cq;
	b.srq = nullptr;
	b.handle = g_ud_handles++;
	b.qp_num = qpn;
	b.state = IBV_QPS_RESET;
	b.qp_type = IBV_QPT_UD;
	pthread_mutex_init(&b.mutex, nullptr);
	pthread_cond_init(&b.cond, nullptr);
	qp_set_wr_ops(qp);

	{
		std::lock_guard<std::mutex> g(rt->lock);
		rt->qps[qpn] = qp;
		qp->scq->qps.push_back(qp);
		qp->scq->live_qps++;
		if (qp->rcq != qp->scq) {
			qp->rcq->qps.push_back(qp);
			qp->rcq->live_qps++;
		}
	}
	rt->register_qp_fd(qp);
	SIM_DEBUG("efasim%d: UD QP %u created", rt->index, qpn);
	return qp;
}

int ud_modify_qp(Qp *qp, ibv_qp_attr *attr, int mask)
{
	Runtime *rt = qp->rt;
	std::lock_guard<std::mutex> g(rt->lock);
	/* The EFA kernel driver: unknown attributes are EOPNOTSUPP; then the state table
	 * (EINVAL); then port and pkey index, which cannot change (EOPNOTSUPP). */
	const int known = IBV_QP_STATE | IBV_QP_CUR_STATE | IBV_QP_EN_SQD_ASYNC_NOTIFY | IBV_QP_PKEY_INDEX |
			  IBV_QP_PORT | IBV_QP_QKEY | IBV_QP_SQ_PSN | IBV_QP_RNR_RETRY;
	if (mask & ~known)
		return EOPNOTSUPP;
	const ibv_qp_state cur = (mask & IBV_QP_CUR_STATE) ? attr->cur_qp_state : qp->state();
	const ibv_qp_state next = (mask & IBV_QP_STATE) ? attr->qp_state : cur;
	if ((mask & IBV_QP_CUR_STATE) && attr->cur_qp_state != qp->state())
		return EINVAL; /* the QP is not where the caller believes */
	if (!ud_transition_ok(cur, next, mask))
		return EINVAL;
	if ((mask & IBV_QP_PORT) && attr->port_num != 1)
		return EOPNOTSUPP;
	if ((mask & IBV_QP_PKEY_INDEX) && attr->pkey_index != 0)
		return EOPNOTSUPP;
	if ((mask & IBV_QP_QKEY) && (attr->qkey & 0x80000000u))
		return EPERM; /* privileged QKEYs are not granted to applications (as SRD QPs) */

	if (mask & IBV_QP_QKEY)
		qp->qkey = attr->qkey;
	if (mask & IBV_QP_SQ_PSN)
		qp->sq_psn = attr->sq_psn;
	ibv_qp &q = qp->qpx.qp_base;
	if (next == IBV_QPS_ERR && cur != IBV_QPS_ERR) {
		q.state = next;
		rt->flush_qp(qp); /* posted receives complete FLUSHED */
	} else if (next == IBV_QPS_RESET && cur != IBV_QPS_RESET) {
		qp->quiet = true; /* reset discards posted receives without completions */
		rt->flush_qp(qp);
		qp->quiet = false;
		qp->qkey = 0;
	}
	q.state = next;
	return 0;
}

void ud_transmit(Runtime *rt, Qp *qp, const SendOp &op, const Gid &dgid, uint32_t rqpn)
{
	rt->stats.ud_sent++;
	sockaddr_in to;
	if (!gid_to_sockaddr(dgid, rqpn, to))
		return; /* names no QP any device could have: the datagram goes nowhere */
	WireHdr h{};
	h.magic = kWireMagic;
	h.version = kWireVersion;
	h.type = PKT_UD_SEND;
	h.flags = op.op == OP_SEND_IMM ? PF_IMM : 0;
	h.path = uint8_t(qp->ud_path_rr++ % config().paths);
	h.src_qpn = uint16_t(qp->qpn);
	h.dst_qpn = uint16_t(rqpn);
	h.qkey = op.rqkey;
	std::memcpy(h.src_gid, rt->gid.raw, 16);
	h.body_len = uint32_t(sizeof(SendBody) + op.len);
	SendBody b{};
	b.msg_len = uint32_t(op.len);
	b.imm = op.imm;
	b.sl = qp->sl;
	iovec iov[2 + 2];
	int n = 0;
	iov[n++] = {&h, sizeof h};
	iov[n++] = {&b, sizeof b};
	if (op.is_inline) {
		if (op.len)
			iov[n++] = {const_cast<uint8_t *>(op.inline_buf), size_t(op.len)};
	} else {
		/* commit() validated the keys under the same lock: the buffers are registered. */
		for (unsigned i = 0; i < op.nsge; i++)
			if (op.sge[i].length)
				iov[n++] = {reinterpret_cast<void *>(op.sge[i].addr), op.sge[i].length};
	}
	rt->xmit(qp, to, iov, n);
}

void ud_receive(Runtime *rt, Qp *qp, const Parsed &pk, const Gid &sgid)
{
	const WireHdr *h = pk.hdr;
	const ibv_qp_state st = qp->state();
	if (!qp->ud || h->type != PKT_UD_SEND || (st != IBV_QPS_RTR && st != IBV_QPS_RTS)) {
		rt->stats.ud_dropped++; /* SRD traffic for a UD QP, UD for SRD, or a QP not ready */
		return;
	}
	if (h->qkey != qp->qkey) {
		rt->stats.qkey_drops++;
		return;
	}
	if (!qp->rq_count) {
		rt->stats.ud_no_recv++; /* no receive posted: dropped, nobody is told */
		return;
	}
	const auto *body = reinterpret_cast<const SendBody *>(pk.body); /* check_body()ed */
	const RecvWr wr = qp->rq[qp->rq_head];
	qp->rq_head = (qp->rq_head + 1) % uint32_t(qp->rq.size());
	qp->rq_count--;

	Cqe e{};
	e.wr_id = wr.wr_id;
	e.opcode = IBV_WC_RECV;
	e.byte_len = uint32_t(sizeof(Grh) + body->msg_len);
	e.src_qp = h->src_qpn;
	e.sl = body->sl;
	uint16_t ahn;
	if (rt->pd_has_ah(qp->pd, sgid, &ahn)) {
		e.slid = ahn;
	} else {
		e.slid = 0xffff;
		e.has_sgid = 1;
		e.sgid = sgid;
	}
	if (h->flags & PF_IMM) {
		e.imm = body->imm;
		e.wc_flags = IBV_WC_WITH_IMM;
	}
	uint64_t cap = 0;
	for (unsigned i = 0; i < wr.nsge; i++)
		cap += wr.sge[i].length;
	if (e.byte_len > cap) {
		e.status = EFA_LOCAL_BAD_LENGTH;
	} else {
		Grh grh{};
		grh.version_tclass_flow = htonl(6u << 28);
		grh.paylen = htons(uint16_t(body->msg_len));
		grh.next_hdr = 0x1b; /* an InfiniBand transport header follows */
		grh.hop_limit = 1;
		std::memcpy(grh.sgid, sgid.raw, 16);
		std::memcpy(grh.dgid, rt->gid.raw, 16);
		if (!scatter(rt, qp->pd, wr, 0, reinterpret_cast<const uint8_t *>(&grh), sizeof grh) ||
		    !scatter(rt, qp->pd, wr, sizeof grh, pk.payload, pk.payload_len))
			e.status = EFA_LOCAL_INVALID_LKEY;
	}
	rt->stats.ud_received++;
	rt->push_cqe(qp, qp->rcq, e);
}

} // namespace efasim
