/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * efa-direct posting: one libfabric operation -> one work request.
 *
 * Checks, in order, each with its documented error: endpoint enabled (-FI_EOPBADSTATE),
 * iov counts (-FI_EINVAL), sizes (-FI_EMSGSIZE: MTU for sends, max_rdma_size for RMA,
 * inject_size for injects), destination in the AV (-FI_EINVAL), memory descriptors
 * (FI_MR_LOCAL: each non-empty iov needs the fi_mr_desc of an MR of this domain,
 * -FI_EINVAL), then resources: a CQ slot and an Op (-FI_EAGAIN when exhausted, the
 * back-pressure a client retries on).
 */
#include "direct/ep.h"

#include "log.h"

#include <cstring>

namespace efa::direct {

namespace {

/* Maps a posting failure of the device to the libfabric error. */
ssize_t post_error(int ret)
{
	switch (ret) {
	case -ENOMEM: return -FI_EAGAIN; /* send queue full */
	case -EINVAL: return -FI_EINVAL;
	case -EOPNOTSUPP: return -FI_EOPNOTSUPP;
	default: return ret;
	}
}

size_t total_len(const iovec *iov, size_t count)
{
	size_t n = 0;
	for (size_t i = 0; i < count; i++)
		n += iov[i].iov_len;
	return n;
}

/* Builds SGEs from iovs + descriptors. False if a non-empty iov lacks a valid desc. */
bool build_sges(const Ep &ep, const iovec *iov, void **desc, size_t count, verbs::Sge *sge, size_t &n)
{
	n = 0;
	for (size_t i = 0; i < count; i++) {
		if (!iov[i].iov_len)
			continue;
		Mr *mr = desc ? mr_from_desc(desc[i], ep.dom) : nullptr;
		const uintptr_t a = reinterpret_cast<uintptr_t>(iov[i].iov_base);
		if (!mr || a < mr->addr || a - mr->addr + iov[i].iov_len > mr->len)
			return false;
		sge[n++] = verbs::Sge{a, uint32_t(iov[i].iov_len), mr->vmr.lkey()};
	}
	return true;
}

} // namespace

ssize_t Ep::post_tx(OpKind kind, const iovec *iov, void **desc, size_t count, fi_addr_t dest, const fi_rma_iov *rma,
		    uint64_t data, void *context, uint64_t flags, bool completion)
{
	if (!enabled) {
		EFA_WARN_ONCE(EpData, "a transmit operation before fi_enable: bind an AV and CQs, call fi_enable, then post");
		return -FI_EOPBADSTATE;
	}
	if (!tx_cq)
		return -FI_EOPNOTSUPP; /* no CQ bound for FI_TRANSMIT */
	if (count > info->tx_attr->iov_limit || (count && !iov)) {
		EFA_WARN_ONCE(EpData, "%zu iovs: more than tx_attr->iov_limit (%zu); split the operation",
			      count, info->tx_attr->iov_limit);
		return -FI_EINVAL;
	}
	const bool is_rma = kind != OpKind::Send;
	if (is_rma && (!rma || !qp.features().rdma_read || (kind == OpKind::Write && !qp.features().rdma_write)))
		return -FI_EOPNOTSUPP;
	const size_t len = total_len(iov, count);
	const bool inject = flags & FI_INJECT;
	if (inject && len > inject_size) {
		EFA_WARN_ONCE(EpData, "inject of %zu bytes: more than tx_attr->inject_size (%zu); use fi_send/fi_write",
			      len, inject_size);
		return -FI_EMSGSIZE;
	}
	if (len > (is_rma ? max_rdma : mtu)) {
		if (is_rma)
			EFA_WARN_ONCE(EpData, "RMA of %zu bytes: more than ep_attr->max_msg_size (%zu); split it", len,
				      max_rdma);
		else
			EFA_WARN_ONCE(EpData,
				      "send of %zu bytes: an efa-direct message is one packet of at most the MTU (%zu; "
				      "max_msg_size %zu covers RMA); move larger data with fi_write/fi_read or use "
				      "the efa fabric",
				      len, mtu, info->ep_attr->max_msg_size);
		return -FI_EMSGSIZE;
	}
	if (is_rma && (rma->len < len || rma->key > UINT32_MAX)) {
		EFA_WARN_ONCE(EpData, "RMA of %zu bytes to a remote iov of %zu bytes, key %#lx: the remote iov must "
			      "cover the data and carry a key from fi_mr_key", len, size_t(rma->len),
			      (unsigned long)rma->key);
		return -FI_EINVAL;
	}
	const AvEntry *to = av->lookup(dest);
	if (!to) {
		Av::warn_unknown(dest);
		return -FI_EINVAL;
	}
	const verbs::Dest vdest{to->ah->ah.get(), to->addr.qpn, to->addr.qkey};

	verbs::Sge sge[2];
	size_t nsge = 0;
	if (!inject && !build_sges(*this, iov, desc, count, sge, nsge)) {
		EFA_WARN_ONCE(EpData, "a buffer without a memory descriptor that covers it: efa-direct requires "
			      "FI_MR_LOCAL; register the buffer with fi_mr_reg and pass its fi_mr_desc");
		return -FI_EINVAL;
	}

	std::lock_guard g(tx_lock);
	if (!tx_cq->reserve())
		return -FI_EAGAIN;
	Op *op = tx.get();
	if (!op) {
		tx_cq->release();
		return -FI_EAGAIN;
	}
	op->context = context;
	op->kind = kind;
	op->len = len;
	op->buf = count ? iov[0].iov_base : nullptr;
	op->data = data;
	op->addr = dest;
	op->completion = completion;
	op->cq_flags = kind == OpKind::Send ? FI_MSG | FI_SEND : kind == OpKind::Read ? FI_RMA | FI_READ : FI_RMA | FI_WRITE;

	uint32_t vflags = 0;
	if (flags & FI_MORE)
		vflags |= verbs::kMore;
	if (flags & FI_REMOTE_CQ_DATA)
		vflags |= verbs::kWithImm;
	if (flags & kFlagHighPps)
		vflags |= verbs::kHighPps;
	const uint64_t wr_id = reinterpret_cast<uint64_t>(op);
	const uint32_t imm = uint32_t(data);
	const verbs::QpFeatures &f = qp.features();
	int ret;
	if (inject && kind != OpKind::Read &&
	    (kind == OpKind::Send ? len <= f.max_inline : (f.inline_write && len <= f.max_inline))) {
		/* The device copies the data into the work request. */
		verbs::DataBuf bufs[2];
		for (size_t i = 0; i < count; i++)
			bufs[i] = verbs::DataBuf{iov[i].iov_base, iov[i].iov_len};
		ret = kind == OpKind::Send ? qp.send_inline(wr_id, vdest, {bufs, count}, imm, vflags)
					   : qp.write_inline(wr_id, vdest, {bufs, count}, uint32_t(rma->key), rma->addr, imm, vflags);
	} else {
		if (inject) {
			/* Copied into the Op's registered bounce slot: the caller's buffer is free now. */
			size_t off = 0;
			for (size_t i = 0; i < count; i++) {
				std::memcpy(op->bounce + off, iov[i].iov_base, iov[i].iov_len);
				off += iov[i].iov_len;
			}
			sge[0] = verbs::Sge{reinterpret_cast<uintptr_t>(op->bounce), uint32_t(len), bounce_mr.lkey()};
			nsge = len ? 1 : 0;
		}
		switch (kind) {
		case OpKind::Send: ret = qp.send(wr_id, vdest, {sge, nsge}, imm, vflags); break;
		case OpKind::Write:
			ret = qp.write(wr_id, vdest, {sge, nsge}, uint32_t(rma->key), rma->addr, imm, vflags);
			break;
		default: ret = qp.read(wr_id, vdest, {sge, nsge}, uint32_t(rma->key), rma->addr, vflags); break;
		}
	}
	if (ret) {
		tx.put(op);
		tx_cq->release();
		return post_error(ret);
	}
	return 0;
}

ssize_t Ep::post_rx(const iovec *iov, void **desc, size_t count, void *context, bool completion)
{
	if (!enabled) {
		EFA_WARN_ONCE(EpData, "a receive before fi_enable: bind an AV and CQs, call fi_enable, then post");
		return -FI_EOPBADSTATE;
	}
	if (!rx_cq)
		return -FI_EOPNOTSUPP; /* no CQ bound for FI_RECV */
	if (count > info->rx_attr->iov_limit || (count && !iov)) {
		EFA_WARN_ONCE(EpData, "%zu iovs: more than rx_attr->iov_limit (%zu); post fewer", count,
			      info->rx_attr->iov_limit);
		return -FI_EINVAL;
	}
	verbs::Sge sge[2];
	size_t nsge = 0;
	if (!build_sges(*this, iov, desc, count, sge, nsge)) {
		EFA_WARN_ONCE(EpData, "a receive buffer without a memory descriptor that covers it: efa-direct requires "
			      "FI_MR_LOCAL; register the buffer with fi_mr_reg and pass its fi_mr_desc");
		return -FI_EINVAL;
	}
	std::lock_guard g(rx_lock);
	if (!rx_cq->reserve())
		return -FI_EAGAIN;
	Op *op = rx.get();
	if (!op) {
		rx_cq->release();
		return -FI_EAGAIN;
	}
	op->context = context;
	op->kind = OpKind::Recv;
	op->len = total_len(iov, count);
	op->buf = count ? iov[0].iov_base : nullptr;
	op->completion = completion;
	op->cq_flags = FI_MSG | FI_RECV;
	if (int ret = qp.post_recv(reinterpret_cast<uint64_t>(op), {sge, nsge})) {
		rx.put(op);
		rx_cq->release();
		return post_error(ret);
	}
	return 0;
}

} // namespace efa::direct
