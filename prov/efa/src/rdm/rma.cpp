/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * RMA and atomics, the initiator's side (docs/protocol.md section 8): device RDMA
 * where both devices have it, the peer's handshake is known and the local buffers
 * have descriptors; emulated by the RTWs / RTRs / RTAs otherwise. Emulated
 * writes and atomic writes to a peer of ours wait for the target's RECEIPT (or
 * EXT_ERROR), so that a refused remote address is reported as the operation's error;
 * to other v4 peers they complete when delivered, unless delivery complete is asked.
 */
#include "rdm/ep.h"
#include "rdm/sender.h"

#include "efa_errno.h"
#include "info.h"
#include "rdm/attrs.h"
#include "log.h"
#include "rdm/atomic_ops.h"
#include "rdm/entry.h"

#include <algorithm>
#include <cstring>

namespace efa::rdm {

/* ------------------------------------------------------------------ RMA */

bool Sender::device_rma_ok(const TxOp &op, bool write)
{
	const Peer &p = *op.peer;
	const uint64_t need = write ? v4::kExtraRdmaWrite : v4::kExtraRdmaRead;
	if (!cfg_.use_device_rdma || !p.hs_got || !(cfg_.features & need) || !(p.features & need))
		return false;
	/* A write with CQ data only where both QPs take unsolicited write receive: the
	 * specification (4.9) forbids a write with immediate data between QPs that differ,
	 * and to a QP without it the write would take a receive buffer, and could meet RNR
	 * with no packet to resend. Otherwise it is emulated (the CQ data in the REQ). */
	if (write && (op.flags & FI_REMOTE_CQ_DATA) &&
	    !(cfg_.features & p.features & v4::kExtraUnsolicitedWriteRecv))
		return false;
	/* With CQ data too: the last work request is a write with immediate data (v4), or,
	 * to a peer of ours whose QP takes unsolicited write receive, the data follows in
	 * EXT_WRITE_DATA (post_device_rma; protocol.md section 8). */
	return port_.tx_device_ok(op);
}

void Sender::post_device_rma(TxOp &op, bool write)
{
	const uint64_t seg = cfg_.max_rdma;
	/* A write with immediate data to a QP with unsolicited write receive takes an entry
	 * of its receive CQ that nothing reserved: a peer of ours gets the data in a packet,
	 * which lands in a receive buffer (their entries are reserved). */
	op.notice = write && (op.flags & FI_REMOTE_CQ_DATA) && op.peer->ext &&
		    (op.peer->features & v4::kExtraUnsolicitedWriteRecv);
	uint64_t off = 0;
	do {
		const uint64_t n = std::min(seg, op.len - off);
		Pkt *pkt = tx_pkt(*op.peer, &op); /* the work request's transmit credit */
		if (int r = port_.tx_rdma(pkt, op, write, off, n, op.rma[0].addr + off, uint32_t(op.rma[0].key))) {
			EFA_WARN(EpData, "posting an RDMA %s failed: %s", write ? "write" : "read", fi_strerror(-r));
			op.inflight--;
			port_.tx_put(pkt);
			op.err = FI_EIO;
			op.prov_errno = uint32_t(EfaStatus::POST_FAILED);
			break;
		}
		off += n;
	} while (off < op.len);
	op.sent = op.len;
	op.done = op.len;
}

ssize_t Sender::check_rma(const RmaArgs &a, uint64_t &len)
{
	if (a.count > kRdmIovLimit || (a.count && !a.iov) || a.rma_count != 1 || !a.rma) {
		EFA_WARN_ONCE(EpData,
			      "RMA with %zu iovs and %zu remote iovs: tx_attr->iov_limit is %zu and rma_iov_limit 1; "
			      "split the operation",
			      a.count, a.rma_count, kRdmIovLimit);
		return -FI_EINVAL;
	}
	len = iov_total(a.iov, a.count);
	if (len > a.rma[0].len) {
		EFA_WARN_ONCE(EpData, "RMA of %lu bytes to a remote iov of %lu bytes: the remote iov must cover the data",
			      (unsigned long)len, (unsigned long)a.rma[0].len);
		return -FI_EINVAL;
	}
	return 0;
}

ssize_t Sender::rma(const RmaArgs &a)
{
	uint64_t len = 0;
	if (ssize_t r = check_rma(a, len))
		return r;
	const bool inject = a.flags & FI_INJECT;
	ssize_t err = 0;
	Peer *p = call_peer(inject, len, "fi_write", a.dest, false, err);
	if (!p)
		return err;
	TxOp *op = ops_.get();
	if (!op)
		return -FI_EAGAIN;
	op->start(a.write ? TxKind::Write : TxKind::Read, p, a.dest, a.context, a.flags,
		  FI_RMA | (a.write ? FI_WRITE : FI_READ), !inject && completion(a.flags));
	op->set_iov(a.iov, a.desc, a.count, len);
	op->data = a.data;
	op->rma[0] = a.rma[0];
	op->rma_count = 1;

	const bool data = a.write && (a.flags & FI_REMOTE_CQ_DATA);
	const bool device = !inject && device_rma_ok(*op, a.write);
	if (!device && !a.write && len > INT32_MAX) {
		/* An emulated read asks for its whole length at once (LONGCTS_RTR's recv_length,
		 * which upstream's responder keeps in an int). */
		EFA_WARN_ONCE(EpData, "an emulated RMA read of %lu bytes: at most 2 GiB - 1 without device RDMA read; "
			      "split it", (unsigned long)len);
		ops_.put(op);
		return -FI_EMSGSIZE;
	}
	const size_t opt = req_opt_len(!p->hs_got, data);
	const size_t room = cfg_.mtu - sizeof(v4::LongCtsRtw) - opt - sizeof(RmaIov);
	const size_t seg = cfg_.max_rdma;
	size_t npkts = device ? std::max<size_t>(1, (len + seg - 1) / seg) : 1;
	if (!p->hs_sent)
		npkts++;
	if (port_.tx_avail() < npkts) {
		ops_.put(op);
		return -FI_EAGAIN;
	}
	if (!p->hs_sent)
		port_.tx_handshake(*p);
	op->id = ids_.add(op);
	if (device) {
		op->proto = Proto::DeviceRma;
		post_device_rma(*op, a.write);
		if (op->err && !op->inflight)
			finish(op);
		return 0;
	}

	if (a.write)
		post_write_req(*op, room);
	else
		post_read_req(*op);
	return 0;
}

/* ------------------------------------------------------------------ atomics */

ssize_t Sender::check_atomic(const AtomicArgs &a, size_t max_atomic, uint64_t &bytes)
{
	if (!atomic_valid(a.kind, a.op, a.dt)) {
		EFA_WARN_ONCE(EpData, "atomic op %d on datatype %d is not supported: ask fi_atomicvalid / "
			      "fi_query_atomic first", int(a.op), int(a.dt));
		return -FI_EOPNOTSUPP;
	}
	if (a.src_count > kRdmIovLimit || a.cmp_count > kRdmIovLimit || a.res_count > kRdmIovLimit ||
	    a.rma_count != 1 || !a.rma || !a.count) {
		EFA_WARN_ONCE(EpData, "an atomic of %zu elements with %zu/%zu/%zu iovs and %zu remote iovs: the count "
			      "must be at least 1, iovs at most %zu, remote iovs 1",
			      a.count, a.src_count, a.cmp_count, a.res_count, a.rma_count, kRdmIovLimit);
		return -FI_EINVAL;
	}
	const size_t dts = atomic_datatype_size(a.dt);
	bytes = uint64_t(a.count) * dts;
	const bool has_operand = a.op != FI_ATOMIC_READ;
	const bool compare = a.kind == AtomicKind::Compare;
	if (bytes > max_atomic || a.rma[0].count < a.count) {
		EFA_WARN_ONCE(EpData, "atomic of %zu elements: more than fi_atomicvalid's count or the remote buffer; "
			      "split it", a.count);
		return -FI_EINVAL;
	}
	auto ioc_total = [dts](const fi_ioc *v, size_t n) {
		uint64_t t = 0;
		for (size_t i = 0; i < n; i++)
			t += uint64_t(v[i].count) * dts;
		return t;
	};
	if ((has_operand && ioc_total(a.src, a.src_count) != bytes) || (compare && ioc_total(a.cmp, a.cmp_count) != bytes) ||
	    (a.kind != AtomicKind::Write && ioc_total(a.res, a.res_count) < bytes))
		return -FI_EINVAL;
	return 0;
}

ssize_t Sender::atomic(const AtomicArgs &a)
{
	uint64_t bytes = 0;
	if (ssize_t r = check_atomic(a, cfg_.max_atomic, bytes))
		return r;
	const size_t dts = atomic_datatype_size(a.dt);
	const bool inject = a.flags & FI_INJECT;
	ssize_t err = 0;
	Peer *p = port_.tx_peer(a.dest, true, err);
	if (!p)
		return err;
	if (port_.tx_avail() < (p->hs_sent ? 1u : 2u))
		return -FI_EAGAIN;
	TxOp *op = ops_.get();
	if (!op)
		return -FI_EAGAIN;
	if (!p->hs_sent)
		port_.tx_handshake(*p);
	op->start(TxKind::Atomic, p, a.dest, a.context, a.flags,
		  FI_ATOMIC | (a.kind == AtomicKind::Write ? FI_WRITE : FI_READ), !inject && completion(a.flags));
	op->proto = Proto::EmuAtomic;
	op->aop = a.op;
	op->adt = a.dt;
	if (a.kind == AtomicKind::Write) {
		op->need_receipt = write_dc(*p, a.flags);
	} else {
		for (size_t i = 0; i < a.res_count; i++)
			op->result[i] = iovec{a.res[i].addr, a.res[i].count * dts};
		op->result_count = a.res_count;
		op->len = bytes; /* the response to wait for */
	}
	op->sent = op->len;
	op->id = ids_.add(op);
	op->msg_id = p->next_tx_id++;

	post_atomic_req(*op, a);
	return 0;
}

/* ------------------------------------------------------------------ the endpoint's checks */

ssize_t Ep::rma(const RmaArgs &args)
{
	/* FI_INJECT and FI_REMOTE_CQ_DATA apply to writes (fi_rma(3)); a read ignores them,
	 * as efa-direct does. */
	RmaArgs a = args;
	if (!a.write)
		a.flags &= ~uint64_t(FI_INJECT | FI_REMOTE_CQ_DATA);
	if (ssize_t r = check_start(a.write ? "fi_writemsg" : "fi_readmsg", a.flags, kRmaFlags))
		return r;
	if (shm) {
		if (const fi_addr_t to = shm->route(a.dest); to != FI_ADDR_NOTAVAIL && shm->keys_known(to)) {
			uint64_t len = 0;
			if (ssize_t r = Sender::check_rma(a, len))
				return r;
			return shm->rma(a, len, to);
		}
	}
	return tx.rma(a);
}

ssize_t Ep::atomic(const AtomicArgs &a)
{
	if (ssize_t r = check_start("fi_atomicmsg", a.flags, kAtomicFlags))
		return r;
	if (shm) {
		/* An atomic shm does not have (long double complex) goes through the device. */
		const fi_addr_t to = shm->route(a.dest);
		if (to != FI_ADDR_NOTAVAIL && shm->keys_known(to) && shm->atomic_count(a.kind, a.dt, a.op)) {
			uint64_t bytes = 0;
			if (ssize_t r = Sender::check_atomic(a, tx.config().max_atomic, bytes))
				return r;
			return shm->atomic(a, to);
		}
	}
	return tx.atomic(a);
}

size_t max_atomic(const verbs::Device &dev, uint64_t caps)
{
	const size_t n = rdm_limits(dev).max_atomic;
	return ShmPath::wanted(caps) ? std::min(n, ShmPath::kMaxAtomic) : n;
}

/* ------------------------------------------------------------------ fi_rma / fi_atomic entry points */

namespace {

Ep *ep_of(fid_ep *f) { return fid_to<Ep>(&f->fid); }

constexpr uint64_t kTxDefaultMask = FI_COMPLETION | FI_DELIVERY_COMPLETE | FI_TRANSMIT_COMPLETE | FI_INJECT_COMPLETE;

uint64_t defaults(fid_ep *f)
{
	Ep *ep = ep_of(f);
	return ep ? ep->tx_op_flags & kTxDefaultMask : 0;
}

ssize_t do_rma(fid_ep *f, const RmaArgs &a)
{
	Ep *ep = ep_of(f);
	if (!ep)
		return -FI_EINVAL;
	std::lock_guard g(ep->lock);
	return ep->rma(a);
}

ssize_t rma_read(fid_ep *f, void *buf, size_t len, void *desc, fi_addr_t src, uint64_t addr, uint64_t key, void *ctx)
{
	iovec iov{buf, len};
	fi_rma_iov r{addr, len, key};
	return do_rma(f, RmaArgs{&iov, &desc, 1, src, &r, 1, 0, defaults(f), ctx, false});
}

ssize_t rma_readv(fid_ep *f, const iovec *iov, void **desc, size_t count, fi_addr_t src, uint64_t addr, uint64_t key,
		  void *ctx)
{
	fi_rma_iov r{addr, iov_total(iov, count), key};
	return do_rma(f, RmaArgs{iov, desc, count, src, &r, 1, 0, defaults(f), ctx, false});
}

ssize_t rma_readmsg(fid_ep *f, const fi_msg_rma *m, uint64_t flags)
{
	if (!m)
		return -FI_EINVAL;
	return do_rma(f, RmaArgs{m->msg_iov, m->desc, m->iov_count, m->addr, m->rma_iov, m->rma_iov_count, 0, flags,
				 m->context, false});
}

ssize_t rma_write(fid_ep *f, const void *buf, size_t len, void *desc, fi_addr_t dest, uint64_t addr, uint64_t key,
		  void *ctx)
{
	iovec iov{const_cast<void *>(buf), len};
	fi_rma_iov r{addr, len, key};
	return do_rma(f, RmaArgs{&iov, &desc, 1, dest, &r, 1, 0, defaults(f), ctx, true});
}

ssize_t rma_writev(fid_ep *f, const iovec *iov, void **desc, size_t count, fi_addr_t dest, uint64_t addr,
		   uint64_t key, void *ctx)
{
	fi_rma_iov r{addr, iov_total(iov, count), key};
	return do_rma(f, RmaArgs{iov, desc, count, dest, &r, 1, 0, defaults(f), ctx, true});
}

ssize_t rma_writemsg(fid_ep *f, const fi_msg_rma *m, uint64_t flags)
{
	if (!m)
		return -FI_EINVAL;
	return do_rma(f, RmaArgs{m->msg_iov, m->desc, m->iov_count, m->addr, m->rma_iov, m->rma_iov_count, m->data,
				 flags, m->context, true});
}

ssize_t rma_inject(fid_ep *f, const void *buf, size_t len, fi_addr_t dest, uint64_t addr, uint64_t key)
{
	iovec iov{const_cast<void *>(buf), len};
	fi_rma_iov r{addr, len, key};
	return do_rma(f, RmaArgs{&iov, nullptr, 1, dest, &r, 1, 0, FI_INJECT, nullptr, true});
}

ssize_t rma_writedata(fid_ep *f, const void *buf, size_t len, void *desc, uint64_t data, fi_addr_t dest,
		      uint64_t addr, uint64_t key, void *ctx)
{
	iovec iov{const_cast<void *>(buf), len};
	fi_rma_iov r{addr, len, key};
	return do_rma(f, RmaArgs{&iov, &desc, 1, dest, &r, 1, data, defaults(f) | FI_REMOTE_CQ_DATA, ctx, true});
}

ssize_t rma_injectdata(fid_ep *f, const void *buf, size_t len, uint64_t data, fi_addr_t dest, uint64_t addr,
		       uint64_t key)
{
	iovec iov{const_cast<void *>(buf), len};
	fi_rma_iov r{addr, len, key};
	return do_rma(f, RmaArgs{&iov, nullptr, 1, dest, &r, 1, data, FI_INJECT | FI_REMOTE_CQ_DATA, nullptr, true});
}

ssize_t do_atomic(fid_ep *f, const AtomicArgs &a)
{
	Ep *ep = ep_of(f);
	if (!ep)
		return -FI_EINVAL;
	std::lock_guard g(ep->lock);
	return ep->atomic(a);
}

size_t ioc_count(const fi_ioc *v, size_t n)
{
	size_t c = 0;
	for (size_t i = 0; i < n; i++)
		c += v[i].count;
	return c;
}

ssize_t at_write(fid_ep *f, const void *buf, size_t count, void *, fi_addr_t dest, uint64_t addr, uint64_t key,
		 fi_datatype dt, fi_op op, void *ctx)
{
	fi_ioc src{const_cast<void *>(buf), count};
	fi_rma_ioc r{addr, count, key};
	return do_atomic(f, AtomicArgs{AtomicKind::Write, &src, 1, nullptr, 0, nullptr, 0, count, dest, &r, 1, dt, op,
				       defaults(f), ctx});
}

ssize_t at_writev(fid_ep *f, const fi_ioc *iov, void **, size_t n, fi_addr_t dest, uint64_t addr, uint64_t key,
		  fi_datatype dt, fi_op op, void *ctx)
{
	const size_t count = ioc_count(iov, n);
	fi_rma_ioc r{addr, count, key};
	return do_atomic(f, AtomicArgs{AtomicKind::Write, iov, n, nullptr, 0, nullptr, 0, count, dest, &r, 1, dt, op,
				       defaults(f), ctx});
}

ssize_t at_writemsg(fid_ep *f, const fi_msg_atomic *m, uint64_t flags)
{
	if (!m)
		return -FI_EINVAL;
	return do_atomic(f, AtomicArgs{AtomicKind::Write, m->msg_iov, m->iov_count, nullptr, 0, nullptr, 0,
				       ioc_count(m->msg_iov, m->iov_count), m->addr, m->rma_iov, m->rma_iov_count,
				       m->datatype, m->op, flags, m->context});
}

ssize_t at_inject(fid_ep *f, const void *buf, size_t count, fi_addr_t dest, uint64_t addr, uint64_t key,
		  fi_datatype dt, fi_op op)
{
	fi_ioc src{const_cast<void *>(buf), count};
	fi_rma_ioc r{addr, count, key};
	return do_atomic(f, AtomicArgs{AtomicKind::Write, &src, 1, nullptr, 0, nullptr, 0, count, dest, &r, 1, dt, op,
				       FI_INJECT, nullptr});
}

ssize_t at_readwrite(fid_ep *f, const void *buf, size_t count, void *, void *result, void *, fi_addr_t dest,
		     uint64_t addr, uint64_t key, fi_datatype dt, fi_op op, void *ctx)
{
	fi_ioc src{const_cast<void *>(buf), count};
	fi_ioc res{result, count};
	fi_rma_ioc r{addr, count, key};
	return do_atomic(f, AtomicArgs{AtomicKind::Fetch, &src, buf ? 1u : 0u, nullptr, 0, &res, 1, count, dest, &r, 1,
				       dt, op, defaults(f), ctx});
}

ssize_t at_readwritev(fid_ep *f, const fi_ioc *iov, void **, size_t n, fi_ioc *resv, void **, size_t rn,
		      fi_addr_t dest, uint64_t addr, uint64_t key, fi_datatype dt, fi_op op, void *ctx)
{
	const size_t count = op == FI_ATOMIC_READ ? ioc_count(resv, rn) : ioc_count(iov, n);
	fi_rma_ioc r{addr, count, key};
	return do_atomic(f, AtomicArgs{AtomicKind::Fetch, iov, n, nullptr, 0, resv, rn, count, dest, &r, 1, dt, op,
				       defaults(f), ctx});
}

ssize_t at_readwritemsg(fid_ep *f, const fi_msg_atomic *m, fi_ioc *resv, void **, size_t rn, uint64_t flags)
{
	if (!m)
		return -FI_EINVAL;
	const size_t count = m->op == FI_ATOMIC_READ ? ioc_count(resv, rn) : ioc_count(m->msg_iov, m->iov_count);
	return do_atomic(f, AtomicArgs{AtomicKind::Fetch, m->msg_iov, m->iov_count, nullptr, 0, resv, rn, count,
				       m->addr, m->rma_iov, m->rma_iov_count, m->datatype, m->op, flags, m->context});
}

ssize_t at_compwrite(fid_ep *f, const void *buf, size_t count, void *, const void *compare, void *, void *result,
		     void *, fi_addr_t dest, uint64_t addr, uint64_t key, fi_datatype dt, fi_op op, void *ctx)
{
	fi_ioc src{const_cast<void *>(buf), count};
	fi_ioc cmp{const_cast<void *>(compare), count};
	fi_ioc res{result, count};
	fi_rma_ioc r{addr, count, key};
	return do_atomic(f, AtomicArgs{AtomicKind::Compare, &src, 1, &cmp, 1, &res, 1, count, dest, &r, 1, dt, op,
				       defaults(f), ctx});
}

ssize_t at_compwritev(fid_ep *f, const fi_ioc *iov, void **, size_t n, const fi_ioc *cmpv, void **, size_t cn,
		      fi_ioc *resv, void **, size_t rn, fi_addr_t dest, uint64_t addr, uint64_t key, fi_datatype dt,
		      fi_op op, void *ctx)
{
	const size_t count = ioc_count(iov, n);
	fi_rma_ioc r{addr, count, key};
	return do_atomic(f, AtomicArgs{AtomicKind::Compare, iov, n, cmpv, cn, resv, rn, count, dest, &r, 1, dt, op,
				       defaults(f), ctx});
}

ssize_t at_compwritemsg(fid_ep *f, const fi_msg_atomic *m, const fi_ioc *cmpv, void **, size_t cn, fi_ioc *resv,
			void **, size_t rn, uint64_t flags)
{
	if (!m)
		return -FI_EINVAL;
	return do_atomic(f, AtomicArgs{AtomicKind::Compare, m->msg_iov, m->iov_count, cmpv, cn, resv, rn,
				       ioc_count(m->msg_iov, m->iov_count), m->addr, m->rma_iov, m->rma_iov_count,
				       m->datatype, m->op, flags, m->context});
}

int valid(fid_ep *f, AtomicKind kind, fi_datatype dt, fi_op op, size_t *count)
{
	Ep *ep = ep_of(f);
	if (!ep || !count)
		return -FI_EINVAL;
	if (!atomic_valid(kind, op, dt))
		return -FI_EOPNOTSUPP;
	*count = max_atomic(*ep->dom->dev, ep->info->caps) / atomic_datatype_size(dt);
	return 0;
}

int at_writevalid(fid_ep *f, fi_datatype dt, fi_op op, size_t *count)
{
	return valid(f, AtomicKind::Write, dt, op, count);
}

int at_readwritevalid(fid_ep *f, fi_datatype dt, fi_op op, size_t *count)
{
	return valid(f, AtomicKind::Fetch, dt, op, count);
}

int at_compwritevalid(fid_ep *f, fi_datatype dt, fi_op op, size_t *count)
{
	return valid(f, AtomicKind::Compare, dt, op, count);
}

} // namespace

int query_atomic(const verbs::Device &dev, uint64_t caps, fi_datatype dt, fi_op op, fi_atomic_attr *attr,
		 uint64_t flags)
{
	if (!attr || (flags & ~uint64_t(FI_FETCH_ATOMIC | FI_COMPARE_ATOMIC)) ||
	    (flags & FI_FETCH_ATOMIC && flags & FI_COMPARE_ATOMIC))
		return -FI_EINVAL;
	const AtomicKind kind = flags & FI_COMPARE_ATOMIC ? AtomicKind::Compare
				: flags & FI_FETCH_ATOMIC ? AtomicKind::Fetch
							  : AtomicKind::Write;
	if (!atomic_valid(kind, op, dt))
		return -FI_EOPNOTSUPP;
	attr->size = atomic_datatype_size(dt);
	attr->count = max_atomic(dev, caps) / attr->size;
	return 0;
}

fi_ops_rma g_rma_ops = {
	.size = sizeof(fi_ops_rma),
	.read = rma_read,
	.readv = rma_readv,
	.readmsg = rma_readmsg,
	.write = rma_write,
	.writev = rma_writev,
	.writemsg = rma_writemsg,
	.inject = rma_inject,
	.writedata = rma_writedata,
	.injectdata = rma_injectdata,
};

fi_ops_atomic g_atomic_ops = {
	.size = sizeof(fi_ops_atomic),
	.write = at_write,
	.writev = at_writev,
	.writemsg = at_writemsg,
	.inject = at_inject,
	.readwrite = at_readwrite,
	.readwritev = at_readwritev,
	.readwritemsg = at_readwritemsg,
	.compwrite = at_compwrite,
	.compwritev = at_compwritev,
	.compwritemsg = at_compwritemsg,
	.writevalid = at_writevalid,
	.readwritevalid = at_readwritevalid,
	.compwritevalid = at_compwritevalid,
};

} // namespace efa::rdm
