/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Queue pairs of the software EFA device: SRD creation (through efadv), the state
 * machine, the ibv_qp_ex work-request builders, efadv_qp processing hints, receive
 * posting and the legacy ibv_post_send.
 *
 * A QP owns one UDP socket bound to <device address>:<device port base + QPN>; the
 * kernel's exclusive bind is what keeps QPNs unique among the processes sharing a
 * device. Work requests are built between wr_start() and wr_complete() under
 * Qp::send_lock; wr_complete() posts the whole batch or none of it, as rdma-core does.
 */
#include "sim.h"

#include <arpa/inet.h>
#include <netinet/udp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>

namespace efasim {

struct WrDesc {
	uint64_t wr_id;
	unsigned flags;
	uint8_t op;
	uint8_t nsge;
	uint8_t hints;
	bool is_inline;
	bool has_addr;
	uint32_t rkey;
	uint64_t raddr;
	uint32_t imm;
	Ah *ah;
	uint32_t rqpn;
	uint32_t rqkey;
	uint32_t inline_len;
	Sge sge[2];
	uint8_t inline_buf[128];
};

namespace {

std::atomic<uint32_t> g_qp_handles{1};

Qp *qp_of(ibv_qp_ex *x) { return Qp::from(x); }

WrDesc *cur(Qp *qp)
{
	if (qp->batch->empty()) {
		qp->session_err = qp->session_err ? qp->session_err : EINVAL; /* setter before opcode */
		return nullptr;
	}
	return &qp->batch->back();
}

void begin(ibv_qp_ex *x, uint8_t op, uint64_t ops_flag)
{
	Qp *qp = qp_of(x);
	if (!(qp->send_ops & ops_flag)) {
		qp->session_err = qp->session_err ? qp->session_err : EOPNOTSUPP;
		return;
	}
	if (qp->batch->size() >= qp->sq.size()) {
		qp->session_err = qp->session_err ? qp->session_err : ENOMEM;
		return;
	}
	WrDesc d{};
	d.wr_id = x->wr_id;
	d.flags = x->wr_flags;
	d.op = op;
	qp->batch->push_back(d);
}

void wr_start(ibv_qp_ex *x)
{
	Qp *qp = qp_of(x);
	qp->send_lock.lock();
	qp->batch->clear();
	qp->session_err = 0;
}

void wr_send(ibv_qp_ex *x) { begin(x, OP_SEND, IBV_QP_EX_WITH_SEND); }

void wr_send_imm(ibv_qp_ex *x, __be32 imm)
{
	begin(x, OP_SEND_IMM, IBV_QP_EX_WITH_SEND_WITH_IMM);
	if (WrDesc *d = cur(qp_of(x)); d && d->op == OP_SEND_IMM)
		d->imm = imm;
}

void rdma(ibv_qp_ex *x, uint8_t op, uint64_t flag, uint32_t rkey, uint64_t raddr, __be32 imm)
{
	size_t before = qp_of(x)->batch->size();
	begin(x, op, flag);
	if (qp_of(x)->batch->size() == before)
		return;
	WrDesc *d = cur(qp_of(x));
	d->rkey = rkey;
	d->raddr = raddr;
	d->imm = imm;
}

void wr_rdma_read(ibv_qp_ex *x, uint32_t rkey, uint64_t raddr) { rdma(x, OP_READ, IBV_QP_EX_WITH_RDMA_READ, rkey, raddr, 0); }
void wr_rdma_write(ibv_qp_ex *x, uint32_t rkey, uint64_t raddr) { rdma(x, OP_WRITE, IBV_QP_EX_WITH_RDMA_WRITE, rkey, raddr, 0); }
void wr_rdma_write_imm(ibv_qp_ex *x, uint32_t rkey, uint64_t raddr, __be32 imm)
{
	rdma(x, OP_WRITE_IMM, IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM, rkey, raddr, imm);
}

void set_sge_list(ibv_qp_ex *x, size_t n, const ibv_sge *list)
{
	Qp *qp = qp_of(x);
	WrDesc *d = cur(qp);
	if (!d)
		return;
	if (n > qp->cap.max_send_sge || n > 2) {
		qp->session_err = qp->session_err ? qp->session_err : EINVAL;
		return;
	}
	d->is_inline = false;
	d->nsge = uint8_t(n);
	for (size_t i = 0; i < n; i++)
		d->sge[i] = Sge{list[i].addr, list[i].length, list[i].lkey};
}

void wr_set_sge(ibv_qp_ex *x, uint32_t lkey, uint64_t addr, uint32_t length)
{
	ibv_sge s{addr, length, lkey};
	set_sge_list(x, 1, &s);
}

void wr_set_sge_list(ibv_qp_ex *x, size_t n, const ibv_sge *list) { set_sge_list(x, n, list); }

void set_inline(ibv_qp_ex *x, size_t n, const ibv_data_buf *bufs)
{
	Qp *qp = qp_of(x);
	WrDesc *d = cur(qp);
	if (!d)
		return;
	size_t total = 0;
	for (size_t i = 0; i < n; i++)
		total += bufs[i].length;
	const bool write = d->op == OP_WRITE || d->op == OP_WRITE_IMM;
	if (total > qp->cap.max_inline_data || total > sizeof d->inline_buf || d->op == OP_READ ||
	    (write && !(qp->efa_flags & EFADV_QP_FLAGS_INLINE_WRITE))) {
		qp->session_err = qp->session_err ? qp->session_err : EINVAL;
		return;
	}
	d->is_inline = true;
	d->inline_len = uint32_t(total);
	size_t off = 0;
	for (size_t i = 0; i < n; i++) {
		std::memcpy(d->inline_buf + off, bufs[i].addr, bufs[i].length);
		off += bufs[i].length;
	}
}

void wr_set_inline_data(ibv_qp_ex *x, void *addr, size_t length)
{
	ibv_data_buf b{addr, length};
	set_inline(x, 1, &b);
}

void wr_set_inline_data_list(ibv_qp_ex *x, size_t n, const ibv_data_buf *bufs) { set_inline(x, n, bufs); }

void wr_set_ud_addr(ibv_qp_ex *x, ibv_ah *ah, uint32_t rqpn, uint32_t rqkey)
{
	WrDesc *d = cur(qp_of(x));
	if (!d)
		return;
	d->ah = reinterpret_cast<Ah *>(ah);
	d->rqpn = rqpn;
	d->rqkey = rqkey;
	d->has_addr = ah != nullptr;
}

void wr_unsupported(Qp *qp) { qp->session_err = qp->session_err ? qp->session_err : EOPNOTSUPP; }

void wr_set_processing_hints(efadv_qp *dv, uint32_t hints)
{
	Qp *qp = Qp::from_dv(dv);
	/* rdma-core has no setter on a QP created without the wr_flag (calling it would
	 * crash): refuse the batch instead. */
	if (!(qp->dv_wr_flags & EFADV_WR_EX_WITH_PROCESSING_HINTS)) {
		qp->session_err = qp->session_err ? qp->session_err : EINVAL;
		return;
	}
	/* Hint bits this device does not know are ignored, as rdma-core passes them on and
	 * the device ignores them. */
	if (WrDesc *d = cur(qp))
		d->hints = uint8_t(hints & EFADV_WR_PROCESSING_HINT_BURST_PPS_SENSITIVE);
}

/* Starts one work request (Runtime::lock held). Local errors complete at once. */
void commit(Runtime *rt, Qp *qp, const WrDesc &d)
{
	const Config &c = config();
	const uint32_t slot = qp->sq_free.back();
	qp->sq_free.pop_back();
	SendOp &op = qp->sq[slot];
	const uint16_t gen = op.gen;
	op = SendOp{};
	op.gen = gen;
	op.slot = slot;
	op.owner = qp;
	op.in_use = true;
	op.local = true;
	op.op = d.op;
	op.wr_id = d.wr_id;
	op.signaled = qp->sq_sig_all || (d.flags & IBV_SEND_SIGNALED);
	op.rkey = d.rkey;
	op.raddr = d.raddr;
	op.imm = d.imm;
	op.rqkey = d.rqkey;
	op.hints = d.hints;
	op.is_inline = d.is_inline;
	op.nsge = d.nsge;
	uint64_t len = 0;
	if (d.is_inline) {
		std::memcpy(op.inline_buf, d.inline_buf, d.inline_len);
		len = d.inline_len;
	} else {
		for (unsigned i = 0; i < d.nsge; i++) {
			op.sge[i] = d.sge[i];
			len += d.sge[i].length;
		}
	}
	op.len = len;
	if (d.hints)
		rt->stats.hinted_wrs++;
	if (qp->sl)
		rt->stats.sl_nonzero_wrs++;

	const bool is_rdma = d.op == OP_READ || d.op == OP_WRITE || d.op == OP_WRITE_IMM;
	uint8_t status = EFA_OK;
	if (!d.has_addr || reinterpret_cast<Pd *>(d.ah->ah.pd) != qp->pd)
		status = EFA_LOCAL_INVALID_AH;
	else if ((!is_rdma && len > c.mtu) || (is_rdma && len > c.max_rdma_size))
		status = EFA_LOCAL_BAD_LENGTH;
	else if (!d.is_inline)
		for (unsigned i = 0; i < d.nsge && status == EFA_OK; i++)
			if (!sge_valid(rt, qp->pd, d.sge[i], d.op == OP_READ ? IBV_ACCESS_LOCAL_WRITE : 0))
				status = EFA_LOCAL_INVALID_LKEY;
	if (qp->ud) {
		/* Unreliable datagram: on the wire at once, complete at once (ud.cpp). */
		if (status == EFA_OK)
			ud_transmit(rt, qp, op, d.ah->gid, d.rqpn);
		op.status = status;
		rt->complete_send(&op);
		return;
	}
	Peer *p = nullptr;
	if (status == EFA_OK && !(p = rt->peer_for(qp, d.ah->gid, d.rqpn, true)))
		status = EFA_LOCAL_INVALID_AH;
	if (status != EFA_OK) {
		op.status = status;
		rt->complete_send(&op);
		return;
	}
	op.pkts_total = 1;
	if (d.op == OP_WRITE || d.op == OP_WRITE_IMM)
		rt->plan_write(p, &op);
	if (d.op == OP_READ)
		op.bytes_to_recv = len;
	rt->enqueue(p, &op);
}

int wr_complete(ibv_qp_ex *x)
{
	Qp *qp = qp_of(x);
	int err = qp->session_err;
	if (!err && qp->state() != IBV_QPS_RTS)
		err = EINVAL;
	if (!err && !qp->batch->empty()) {
		std::lock_guard<std::mutex> g(qp->rt->lock);
		TxScope doorbell(qp->rt, qp->batch->size() > 1); /* the batch's datagrams leave together */
		if (qp->sq_free.size() < qp->batch->size()) {
			err = ENOMEM; /* send queue full: nothing of the batch is posted */
		} else {
			for (const WrDesc &d : *qp->batch)
				commit(qp->rt, qp, d);
		}
	}
	qp->batch->clear();
	qp->session_err = 0;
	qp->send_lock.unlock();
	return err;
}

void wr_abort(ibv_qp_ex *x)
{
	Qp *qp = qp_of(x);
	qp->batch->clear();
	qp->session_err = 0;
	qp->send_lock.unlock();
}

uint32_t roundup_pow2(uint32_t v)
{
	uint32_t r = 1;
	while (r < v)
		r <<= 1;
	return r;
}

int open_socket(Runtime *rt, uint32_t &qpn_out)
{
	const Config &c = config();
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* Deep buffers absorb bursts of a whole window; privileged callers get more. */
	int sz = 8 << 20;
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof sz))
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof sz);
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof sz))
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof sz);
	/* Datagrams a peer sent in one segmentation-offload buffer (Runtime::TxBatch) arrive
	 * as that buffer, which drain cuts; without the option the kernel cuts it first. */
	if (c.gso) {
		int one = 1;
		setsockopt(fd, SOL_UDP, UDP_GRO, &one, sizeof one);
	}
	/* Start at a varying QPN so that a new process rarely reuses a recent one. */
	static std::atomic<uint32_t> spread{uint32_t(getpid()) * 2654435761u};
	uint32_t start = spread.fetch_add(7919) % c.max_qp;
	/* A test that restarts a process on a dead one's QPN asks for it (EFASIM_FIRST_QPN). */
	static std::atomic<bool> first{true};
	if (c.first_qpn && c.first_qpn <= c.max_qp && first.exchange(false))
		start = c.first_qpn - 1;
	for (uint32_t i = 0; i < c.max_qp; i++) {
		const uint32_t qpn = 1 + (start + i) % c.max_qp;
		sockaddr_in sa{};
		sa.sin_family = AF_INET;
		sa.sin_addr = rt->addr;
		sa.sin_port = htons(uint16_t(rt->port_base + qpn));
		if (bind(fd, reinterpret_cast<sockaddr *>(&sa), sizeof sa) == 0) {
			qpn_out = qpn;
			return fd;
		}
		if (errno != EADDRINUSE && errno != EACCES) {
			int err = errno;
			close(fd);
			SIM_WARN("efasim%d: cannot bind %s:%u: %s (check EFASIM_ADDR)", rt->index,
				 inet_ntoa(rt->addr), rt->port_base + qpn, strerror(err));
			return -err;
		}
	}
	close(fd);
	return -ENOSPC; /* every QPN of the device is in use on this host */
}

} // namespace

int qp_open_socket(Runtime *rt, uint32_t &qpn_out) { return open_socket(rt, qpn_out); }

/* The work-request batch and the ibv_qp_ex builders (and the efadv_qp hint setter) of
 * every QP type: an op the QP was not created for fails the batch (EOPNOTSUPP) in
 * begin(). */
void qp_set_wr_ops(Qp *qp)
{
	if (!qp->batch)
		qp->batch = new std::vector<WrDesc>();
	ibv_qp_ex &x = qp->qpx;
	x.comp_mask = 0;
	x.wr_atomic_cmp_swp = [](ibv_qp_ex *q, uint32_t, uint64_t, uint64_t, uint64_t) { wr_unsupported(qp_of(q)); };
	x.wr_atomic_fetch_add = [](ibv_qp_ex *q, uint32_t, uint64_t, uint64_t) { wr_unsupported(qp_of(q)); };
	x.wr_bind_mw = [](ibv_qp_ex *q, ibv_mw *, uint32_t, const ibv_mw_bind_info *) { wr_unsupported(qp_of(q)); };
	x.wr_local_inv = [](ibv_qp_ex *q, uint32_t) { wr_unsupported(qp_of(q)); };
	x.wr_rdma_read = wr_rdma_read;
	x.wr_rdma_write = wr_rdma_write;
	x.wr_rdma_write_imm = wr_rdma_write_imm;
	x.wr_send = wr_send;
	x.wr_send_imm = wr_send_imm;
	x.wr_send_inv = [](ibv_qp_ex *q, uint32_t) { wr_unsupported(qp_of(q)); };
	x.wr_send_tso = [](ibv_qp_ex *q, void *, uint16_t, uint16_t) { wr_unsupported(qp_of(q)); };
	x.wr_set_ud_addr = wr_set_ud_addr;
	x.wr_set_xrc_srqn = [](ibv_qp_ex *q, uint32_t) { wr_unsupported(qp_of(q)); };
	x.wr_set_inline_data = wr_set_inline_data;
	x.wr_set_inline_data_list = wr_set_inline_data_list;
	x.wr_set_sge = wr_set_sge;
	x.wr_set_sge_list = wr_set_sge_list;
	x.wr_start = wr_start;
	x.wr_complete = wr_complete;
	x.wr_abort = wr_abort;
	x.wr_atomic_write = [](ibv_qp_ex *q, uint32_t, uint64_t, const void *) { wr_unsupported(qp_of(q)); };
	qp->dvqp.comp_mask = 0;
	qp->dvqp.wr_set_processing_hints = wr_set_processing_hints;
}

Qp *Qp::from_dv(efadv_qp *q) { return reinterpret_cast<Qp *>(reinterpret_cast<uint8_t *>(q) - offsetof(Qp, dvqp)); }

/* Creates an SRD QP; `efa` carries the efadv attributes. Returns null with errno. */
Qp *create_srd_qp(ibv_context *c, ibv_qp_init_attr_ex *attr, const efadv_qp_init_attr_cur &efa)
{
	const Config &cfg = config();
	const Profile &prof = *cfg.profile;
	auto fail = [](int e) -> Qp * {
		errno = e;
		return nullptr;
	};
	if (!c || !attr)
		return fail(EINVAL);
	if (attr->comp_mask & ~uint32_t(IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS))
		return fail(EOPNOTSUPP);
	if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd || attr->pd->context != c)
		return fail(EINVAL);
	if (attr->qp_type != IBV_QPT_DRIVER || !attr->send_cq || !attr->recv_cq || attr->srq)
		return fail(EINVAL);
	if (attr->send_cq->context != c || attr->recv_cq->context != c)
		return fail(EINVAL);
	efadv_device_attr_cur dev;
	fill_efadv_attr(dev);
	const uint32_t inline_max = dev.inline_buf_size_ex;
	const ibv_qp_cap &req = attr->cap;

	uint64_t ops = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM;
	if (prof.device_caps & EFADV_DEVICE_ATTR_CAPS_RDMA_READ)
		ops |= IBV_QP_EX_WITH_RDMA_READ;
	if (prof.device_caps & EFADV_DEVICE_ATTR_CAPS_RDMA_WRITE)
		ops |= IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM;
	const bool has_ex = attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	if (has_ex && (attr->send_ops_flags & ~ops))
		return fail(EOPNOTSUPP);

	const uint16_t known_flags = EFADV_QP_FLAGS_UNSOLICITED_WRITE_RECV | EFADV_QP_FLAGS_INLINE_WRITE;
	if (efa.flags & ~known_flags)
		return fail(EOPNOTSUPP);
	if ((efa.flags & EFADV_QP_FLAGS_UNSOLICITED_WRITE_RECV) &&
	    !(prof.device_caps & EFADV_DEVICE_ATTR_CAPS_UNSOLICITED_WRITE_RECV))
		return fail(EOPNOTSUPP);
	/* Inline RDMA write comes with RDMA write, whatever the inline size (with a
	 * 32-byte inline the writes are just as short). */
	if ((efa.flags & EFADV_QP_FLAGS_INLINE_WRITE) && !(prof.device_caps & EFADV_DEVICE_ATTR_CAPS_RDMA_WRITE))
		return fail(EOPNOTSUPP);
	if (efa.sl && (!prof.service_levels || efa.sl > 15))
		return fail(EOPNOTSUPP);
	/* Processing hints: every generation (sim.h, Profile). */
	if (efa.wr_flags & ~uint64_t(EFADV_WR_EX_WITH_PROCESSING_HINTS))
		return fail(EOPNOTSUPP);

	/* Limits come after the features, as in rdma-core; the queue depths depend on the
	 * entries the features need (max_sq_depth, max_rq_depth). */
	const bool inline_write = efa.flags & EFADV_QP_FLAGS_INLINE_WRITE;
	const uint32_t sq_limit = max_sq_depth(prof, inline_write, req.max_inline_data);
	const uint32_t rq_limit = max_rq_depth(prof, req.max_recv_sge);
	if (req.max_send_wr > sq_limit || req.max_recv_wr > rq_limit || req.max_send_sge > dev.max_sq_sge ||
	    req.max_recv_sge > dev.max_rq_sge || req.max_inline_data > inline_max)
		return fail(EINVAL);

	Context *ctx = Context::from(c);
	Runtime *rt = ctx->rt;
	auto *qp = new (std::nothrow) Qp();
	if (!qp)
		return fail(ENOMEM);
	uint32_t qpn = 0;
	int fd = open_socket(rt, qpn);
	if (fd < 0) {
		delete qp;
		return fail(-fd);
	}
	qp->batch = new std::vector<WrDesc>();
	qp->ctx = ctx;
	qp->rt = rt;
	qp->pd = reinterpret_cast<Pd *>(attr->pd);
	qp->scq = Cq::from(attr->send_cq);
	qp->rcq = Cq::from(attr->recv_cq);
	qp->qpn = qpn;
	qp->gen = next_qp_gen();
	qp->fd = fd;
	qp->sl = efa.sl;
	qp->efa_flags = efa.flags;
	qp->dv_wr_flags = efa.wr_flags;
	qp->send_ops = has_ex ? attr->send_ops_flags : ops;
	qp->has_qp_ex = has_ex;
	qp->driver_srd = true;
	qp->sq_sig_all = attr->sq_sig_all;
	qp->rnr_retry = 7;

	/* The queues actually created: at least what was asked, rounded as a device would. */
	qp->cap.max_send_wr = std::min(roundup_pow2(std::max(req.max_send_wr, 1u)), sq_limit);
	qp->cap.max_recv_wr = std::min(roundup_pow2(std::max(req.max_recv_wr, 1u)), rq_limit);
	qp->cap.max_send_sge = dev.max_sq_sge;
	qp->cap.max_recv_sge = dev.max_rq_sge;
	qp->cap.max_inline_data = std::max<uint32_t>(req.max_inline_data, dev.inline_buf_size);
	if (qp->cap.max_inline_data > dev.inline_buf_size)
		qp->cap.max_inline_data = inline_max;
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
	b.handle = g_qp_handles++;
	b.qp_num = qpn;
	b.state = IBV_QPS_RESET;
	b.qp_type = IBV_QPT_DRIVER;
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
	SIM_DEBUG("efasim%d: QP %u created (flags %#x, sl %u, wr_flags %#lx)", rt->index, qpn, efa.flags, efa.sl,
		  (unsigned long)efa.wr_flags);
	return qp;
}

namespace ops {

ibv_qp *create_qp_ex(ibv_context *c, ibv_qp_init_attr_ex *attr)
{
	/* As rdma-core's efa_create_qp_ex: UD only; SRD QPs come from efadv_create_qp_ex(). */
	if (!attr || attr->qp_type != IBV_QPT_UD) {
		errno = EOPNOTSUPP;
		return nullptr;
	}
	Qp *qp = create_ud_qp(c, attr);
	return qp ? &qp->qpx.qp_base : nullptr;
}

int post_recv(ibv_qp *q, ibv_recv_wr *wr, ibv_recv_wr **bad)
{
	Qp *qp = Qp::from(q);
	std::lock_guard<std::mutex> g(qp->rt->lock);
	for (; wr; wr = wr->next) {
		int err = 0;
		if (qp->state() == IBV_QPS_RESET)
			err = EINVAL;
		else if (wr->num_sge < 0 || uint32_t(wr->num_sge) > qp->cap.max_recv_sge)
			err = EINVAL;
		else if (qp->rq_count == qp->rq.size())
			err = ENOMEM;
		if (err) {
			if (bad)
				*bad = wr;
			return err;
		}
		if (qp->state() == IBV_QPS_ERR) {
			Cqe e{};
			e.wr_id = wr->wr_id;
			e.status = EFA_FLUSHED;
			e.opcode = IBV_WC_RECV;
			qp->rt->push_cqe(qp, qp->rcq, e);
			continue;
		}
		RecvWr &r = qp->rq[(qp->rq_head + qp->rq_count) % qp->rq.size()];
		r.wr_id = wr->wr_id;
		r.nsge = uint32_t(wr->num_sge);
		for (int i = 0; i < wr->num_sge; i++)
			r.sge[i] = Sge{wr->sg_list[i].addr, wr->sg_list[i].length, wr->sg_list[i].lkey};
		qp->rq_count++;
	}
	return 0;
}

int post_send(ibv_qp *q, ibv_send_wr *wr, ibv_send_wr **bad)
{
	Qp *qp = Qp::from(q);
	ibv_qp_ex *x = &qp->qpx;
	for (; wr; wr = wr->next) {
		wr_start(x);
		x->wr_id = wr->wr_id;
		x->wr_flags = unsigned(wr->send_flags);
		if (wr->opcode == IBV_WR_SEND)
			begin(x, OP_SEND, IBV_QP_EX_WITH_SEND);
		else if (wr->opcode == IBV_WR_SEND_WITH_IMM) {
			begin(x, OP_SEND_IMM, IBV_QP_EX_WITH_SEND_WITH_IMM);
			if (WrDesc *d = cur(qp))
				d->imm = wr->imm_data;
		} else {
			qp->session_err = EINVAL; /* RDMA needs the extended API on SRD */
		}
		if (wr->send_flags & IBV_SEND_INLINE) {
			ibv_data_buf bufs[2];
			const int n = std::min(wr->num_sge, 2);
			for (int i = 0; i < n; i++)
				bufs[i] = {reinterpret_cast<void *>(wr->sg_list[i].addr), wr->sg_list[i].length};
			if (wr->num_sge > 2)
				qp->session_err = EINVAL;
			else
				set_inline(x, size_t(n), bufs);
		} else if (wr->num_sge >= 0) {
			set_sge_list(x, size_t(wr->num_sge), wr->sg_list);
		}
		wr_set_ud_addr(x, wr->wr.ud.ah, wr->wr.ud.remote_qpn, wr->wr.ud.remote_qkey);
		if (int err = wr_complete(x)) {
			if (bad)
				*bad = wr;
			return err;
		}
	}
	return 0;
}

} // namespace ops

} // namespace efasim

using namespace efasim;

EFASIM_EXPORT ibv_qp_ex *ibv_qp_to_qp_ex(ibv_qp *q)
{
	if (!q)
		return nullptr;
	Qp *qp = Qp::from(q);
	return qp->has_qp_ex ? &qp->qpx : nullptr;
}

EFASIM_EXPORT ibv_qp *ibv_create_qp(ibv_pd *pd, ibv_qp_init_attr *attr)
{
	/* As rdma-core's efa_create_qp: UD only (SRD QPs come from efadv_create_qp_ex()),
	 * without the extended send API. */
	if (!pd || !attr || attr->qp_type != IBV_QPT_UD) {
		errno = !pd || !attr ? EINVAL : EOPNOTSUPP;
		return nullptr;
	}
	ibv_qp_init_attr_ex ex{};
	std::memcpy(&ex, attr, sizeof *attr);
	ex.comp_mask = IBV_QP_INIT_ATTR_PD;
	ex.pd = pd;
	Qp *qp = create_ud_qp(pd->context, &ex);
	if (!qp)
		return nullptr;
	std::memcpy(attr, &ex, sizeof *attr);
	return &qp->qpx.qp_base;
}

EFASIM_EXPORT int ibv_modify_qp(ibv_qp *q, ibv_qp_attr *attr, int mask)
{
	if (!q || !attr)
		return EINVAL;
	Qp *qp = Qp::from(q);
	if (qp->ud)
		return ud_modify_qp(qp, attr, mask); /* the UD state table (ud.cpp) */
	Runtime *rt = qp->rt;
	std::lock_guard<std::mutex> g(rt->lock);
	const ibv_qp_state cur = qp->state();
	if ((mask & IBV_QP_CUR_STATE) && attr->cur_qp_state != cur)
		return EINVAL;
	const ibv_qp_state next = (mask & IBV_QP_STATE) ? attr->qp_state : cur;
	const int known = IBV_QP_STATE | IBV_QP_CUR_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY |
			  IBV_QP_SQ_PSN | IBV_QP_RNR_RETRY;
	if (mask & ~known)
		return EINVAL;
	/* Attributes each transition requires and allows (SRD: facts, "QP state sequence"). */
	int need = 0, allow = IBV_QP_STATE | IBV_QP_CUR_STATE;
	if (next == IBV_QPS_RESET || next == IBV_QPS_ERR) {
		/* always allowed, from any state */
	} else if (cur == IBV_QPS_RESET && next == IBV_QPS_INIT) {
		need = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY;
		allow |= need;
	} else if (cur == IBV_QPS_INIT && next == IBV_QPS_INIT) {
		allow |= IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY;
	} else if (cur == IBV_QPS_INIT && next == IBV_QPS_RTR) {
		allow |= IBV_QP_QKEY;
	} else if (cur == IBV_QPS_RTR && next == IBV_QPS_RTS) {
		need = IBV_QP_SQ_PSN;
		allow |= IBV_QP_SQ_PSN | IBV_QP_QKEY | IBV_QP_RNR_RETRY;
	} else if (cur == IBV_QPS_RTS && next == IBV_QPS_RTS) {
		allow |= IBV_QP_QKEY | IBV_QP_RNR_RETRY;
	} else {
		return EINVAL;
	}
	if ((mask & need) != need || (mask & ~allow))
		return EINVAL;
	if ((mask & IBV_QP_PORT) && attr->port_num != 1)
		return EINVAL;
	if ((mask & IBV_QP_PKEY_INDEX) && attr->pkey_index != 0)
		return EINVAL;
	if ((mask & IBV_QP_QKEY) && (attr->qkey & 0x80000000u))
		return EPERM; /* privileged QKEYs are not granted to applications */
	if ((mask & IBV_QP_RNR_RETRY) &&
	    (attr->rnr_retry > 7 || !(config().profile->device_caps & EFADV_DEVICE_ATTR_CAPS_RNR_RETRY)))
		return EINVAL;

	if (mask & IBV_QP_QKEY)
		qp->qkey = attr->qkey;
	if (mask & IBV_QP_SQ_PSN)
		qp->sq_psn = attr->sq_psn;
	if (mask & IBV_QP_RNR_RETRY)
		qp->rnr_retry = attr->rnr_retry;
	if (next == IBV_QPS_ERR && cur != IBV_QPS_ERR) {
		q->state = next;
		rt->flush_qp(qp);
	} else if (next == IBV_QPS_RESET && cur != IBV_QPS_RESET) {
		qp->quiet = true; /* reset discards work without completions */
		rt->flush_qp(qp);
		qp->quiet = false;
		qp->qkey = 0;
	}
	q->state = next;
	return 0;
}

EFASIM_EXPORT int ibv_query_qp(ibv_qp *q, ibv_qp_attr *attr, int mask, ibv_qp_init_attr *init)
{
	(void)mask;
	if (!q || !attr || !init)
		return EINVAL;
	Qp *qp = Qp::from(q);
	std::lock_guard<std::mutex> g(qp->rt->lock);
	std::memset(attr, 0, sizeof *attr);
	attr->qp_state = qp->state();
	attr->cur_qp_state = qp->state();
	attr->qkey = qp->qkey;
	attr->sq_psn = qp->sq_psn;
	attr->port_num = 1;
	attr->pkey_index = 0;
	attr->rnr_retry = qp->rnr_retry;
	attr->cap = qp->cap;
	std::memset(init, 0, sizeof *init);
	init->qp_context = q->qp_context;
	init->send_cq = q->send_cq;
	init->recv_cq = q->recv_cq;
	init->cap = qp->cap;
	init->qp_type = q->qp_type;
	init->sq_sig_all = qp->sq_sig_all;
	return 0;
}

EFASIM_EXPORT int ibv_destroy_qp(ibv_qp *q)
{
	if (!q)
		return EINVAL;
	Qp *qp = Qp::from(q);
	Runtime *rt = qp->rt;
	{
		std::lock_guard<std::mutex> g(rt->lock);
		/* What was received is acknowledged before the QP goes: a device acknowledges
		 * what it delivered, whatever its QP does next. */
		for (auto &[k, p] : qp->peers)
			if (p->ack_pending)
				rt->send_ack(p);
		qp->destroying = true;
		qp->quiet = true;
		rt->flush_qp(qp);
		rt->destroy_peers(qp);
		rt->qps.erase(qp->qpn);
		for (Cq *cq : {qp->scq, qp->rcq}) {
			auto &v = cq->qps;
			const size_t before = v.size();
			v.erase(std::remove(v.begin(), v.end(), qp), v.end());
			if (v.size() == before)
				continue; /* one CQ for both queues: done already */
			cq->live_qps--;
			std::lock_guard<std::mutex> d(cq->dead_lock);
			cq->dead_gens.push_back(qp->gen);
			cq->ndead.store(uint32_t(cq->dead_gens.size()), std::memory_order_release);
		}
		for (auto it = rt->held.begin(); it != rt->held.end();)
			it = it->fd == qp->fd ? rt->held.erase(it) : it + 1;
		rt->unregister_qp_fd(qp);
	}
	close(qp->fd);
	pthread_mutex_destroy(&q->mutex);
	pthread_cond_destroy(&q->cond);
	delete qp->batch;
	delete qp;
	return 0;
}
