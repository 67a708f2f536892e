/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * FI_EP_DGRAM posting: one libfabric operation -> one UD work request, and the
 * fi_ops_msg entry points.
 *
 * Checks, in order, each with its documented error: endpoint enabled (-FI_EOPBADSTATE),
 * iov counts and the prefix in the first iov (-FI_EINVAL), sizes (-FI_EMSGSIZE: the MTU,
 * or inject_size for injects, prefix excluded), destination in the AV (-FI_EINVAL),
 * memory descriptors (FI_MR_LOCAL, -FI_EINVAL), then resources: a CQ slot and an Op
 * (-FI_EAGAIN when exhausted).
 */
#include "dgram/ep.h"

#include "info.h"
#include "log.h"

namespace efa::dgram {

namespace {

ssize_t post_error(int ret)
{
	switch (ret) {
	case -ENOMEM: return -FI_EAGAIN; /* queue full */
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

/* One SGE for [base, base + len) of iov `i`, which its descriptor must cover. */
bool add_sge(const Ep &ep, void **desc, size_t i, uintptr_t base, size_t len, verbs::Sge *sge, size_t &n)
{
	if (!len)
		return true;
	Mr *mr = desc ? mr_from_desc(desc[i], ep.dom) : nullptr;
	if (!mr || base < mr->addr || base - mr->addr + len > mr->len)
		return false;
	sge[n++] = verbs::Sge{base, uint32_t(len), mr->vmr.lkey()};
	return true;
}

} // namespace

ssize_t Ep::post_tx(const iovec *iov, void **desc, size_t count, fi_addr_t dest, uint64_t data, void *context,
		    uint64_t flags, bool completion)
{
	if (!enabled) {
		EFA_WARN_ONCE(EpData, "a send before fi_enable: bind an AV and CQs, call fi_enable, then post");
		return -FI_EOPBADSTATE;
	}
	if (!tx_cq)
		return -FI_EOPNOTSUPP; /* no CQ bound for FI_TRANSMIT */
	if (!count || !iov || count > info->tx_attr->iov_limit) {
		EFA_WARN_ONCE(EpData, "a send with %zu iovs: FI_EP_DGRAM takes 1 to tx_attr->iov_limit (%zu), the first "
			      "starting with the message prefix", count, info->tx_attr->iov_limit);
		return -FI_EINVAL;
	}
	if (iov[0].iov_len < prefix) {
		EFA_WARN_ONCE(EpData, "a send whose first iov (%zu bytes) cannot hold the %zu-byte message prefix: with "
			      "FI_MSG_PREFIX the buffer starts with ep_attr->msg_prefix_size bytes for the provider, "
			      "and the length counts them", iov[0].iov_len, prefix);
		return -FI_EINVAL;
	}
	const size_t len = total_len(iov, count) - prefix;
	const bool inject = flags & FI_INJECT;
	if (inject && len > inject_size) {
		EFA_WARN_ONCE(EpData, "inject of %zu bytes (after the prefix): more than tx_attr->inject_size (%zu); use "
			      "fi_send", len, inject_size);
		return -FI_EMSGSIZE;
	}
	if (len > mtu) {
		EFA_WARN_ONCE(EpData, "a datagram of %zu bytes (after the prefix): more than ep_attr->max_msg_size "
			      "(%zu, the MTU); FI_EP_DGRAM sends one datagram per message, use an FI_EP_RDM "
			      "endpoint of the efa fabric for larger messages", len, mtu);
		return -FI_EMSGSIZE;
	}
	const AvEntry *to = av->lookup(dest);
	if (!to) {
		Av::warn_unknown(dest);
		return -FI_EINVAL;
	}
	const verbs::Dest vdest{to->ah->ah.get(), to->addr.qpn, to->addr.qkey};

	/* The payload: the first iov after the prefix, then the others. */
	const uintptr_t first = reinterpret_cast<uintptr_t>(iov[0].iov_base) + prefix;
	verbs::DataBuf bufs[2];
	verbs::Sge sge[2];
	size_t n = 0;
	if (inject) {
		if (iov[0].iov_len > prefix)
			bufs[n++] = verbs::DataBuf{reinterpret_cast<void *>(first), iov[0].iov_len - prefix};
		for (size_t i = 1; i < count; i++)
			if (iov[i].iov_len)
				bufs[n++] = verbs::DataBuf{iov[i].iov_base, iov[i].iov_len};
	} else {
		bool ok = add_sge(*this, desc, 0, first, iov[0].iov_len - prefix, sge, n);
		for (size_t i = 1; i < count && ok; i++)
			ok = add_sge(*this, desc, i, reinterpret_cast<uintptr_t>(iov[i].iov_base), iov[i].iov_len, sge, n);
		if (!ok) {
			EFA_WARN_ONCE(EpData, "a send buffer without a memory descriptor that covers it: FI_EP_DGRAM requires "
				      "FI_MR_LOCAL; register the buffer with fi_mr_reg and pass its fi_mr_desc");
			return -FI_EINVAL;
		}
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
	op->kind = OpKind::Send;
	op->len = len;
	op->buf = iov[0].iov_base;
	op->data = data;
	op->addr = dest;
	op->completion = completion;
	op->cq_flags = FI_MSG | FI_SEND;

	uint32_t vflags = 0;
	if (flags & FI_MORE)
		vflags |= verbs::kMore;
	if (flags & FI_REMOTE_CQ_DATA)
		vflags |= verbs::kWithImm;
	const uint64_t wr_id = reinterpret_cast<uint64_t>(op);
	int ret = inject ? qp.send_inline(wr_id, vdest, {bufs, n}, uint32_t(data), vflags)
			 : qp.send(wr_id, vdest, {sge, n}, uint32_t(data), vflags);
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
	if (!count || !iov || count > info->rx_attr->iov_limit) {
		EFA_WARN_ONCE(EpData, "a receive with %zu iovs: FI_EP_DGRAM takes 1 to rx_attr->iov_limit (%zu), the "
			      "first starting with the message prefix", count, info->rx_attr->iov_limit);
		return -FI_EINVAL;
	}
	if (iov[0].iov_len < prefix) {
		EFA_WARN_ONCE(EpData, "a receive whose first iov (%zu bytes) cannot hold the %zu-byte message prefix: "
			      "with FI_MSG_PREFIX the buffer starts with ep_attr->msg_prefix_size bytes, where the "
			      "device writes the datagram's header", iov[0].iov_len, prefix);
		return -FI_EINVAL;
	}
	/* The prefix is posted too: the device writes the GRH there. No datagram is longer
	 * than prefix + MTU, so the buffers are posted up to that (rdma-core's receive
	 * lengths are 16 bits on some versions). */
	verbs::Sge sge[2];
	size_t n = 0;
	size_t room = prefix + mtu;
	bool ok = true;
	for (size_t i = 0; i < count && ok && room; i++) {
		const size_t take = std::min(iov[i].iov_len, room);
		ok = add_sge(*this, desc, i, reinterpret_cast<uintptr_t>(iov[i].iov_base), take, sge, n);
		room -= take;
	}
	if (!ok) {
		EFA_WARN_ONCE(EpData, "a receive buffer without a memory descriptor that covers it: FI_EP_DGRAM requires "
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
	op->buf = iov[0].iov_base;
	op->completion = completion;
	op->cq_flags = FI_MSG | FI_RECV;
	if (int ret = qp.post_recv(reinterpret_cast<uint64_t>(op), {sge, n})) {
		rx.put(op);
		rx_cq->release();
		return post_error(ret);
	}
	return 0;
}

/* ------------------------------------------------------------------ fi_ops_msg */

namespace {

constexpr uint64_t kSendMsgFlags = FI_COMPLETION | FI_MORE | FI_INJECT | FI_REMOTE_CQ_DATA | FI_INJECT_COMPLETE |
				   FI_TRANSMIT_COMPLETE | FI_FENCE;
constexpr uint64_t kRecvMsgFlags = FI_COMPLETION | FI_MORE;

Ep *ep_of(fid_ep *f) { return f ? fid_to<Ep>(&f->fid) : nullptr; }

ssize_t ep_recv(fid_ep *f, void *buf, size_t len, void *desc, fi_addr_t, void *context)
{
	Ep *ep = ep_of(f);
	if (!ep)
		return -FI_EINVAL;
	iovec iov{buf, len};
	return ep->post_rx(&iov, &desc, 1, context, ep->rx_completion(ep->rx_op_flags));
}

ssize_t ep_recvv(fid_ep *f, const iovec *iov, void **desc, size_t count, fi_addr_t, void *context)
{
	Ep *ep = ep_of(f);
	if (!ep)
		return -FI_EINVAL;
	return ep->post_rx(iov, desc, count, context, ep->rx_completion(ep->rx_op_flags));
}

ssize_t ep_recvmsg(fid_ep *f, const fi_msg *msg, uint64_t flags)
{
	Ep *ep = ep_of(f);
	if (!ep || !msg)
		return -FI_EINVAL;
	if (flags & ~kRecvMsgFlags) {
		EFA_WARN_ONCE(EpData, "fi_recvmsg: flags %#lx are not receive flags (allowed: FI_COMPLETION, FI_MORE)",
			      (unsigned long)(flags & ~kRecvMsgFlags));
		return -FI_EINVAL;
	}
	return ep->post_rx(msg->msg_iov, msg->desc, msg->iov_count, msg->context, ep->rx_completion(flags));
}

ssize_t ep_send(fid_ep *f, const void *buf, size_t len, void *desc, fi_addr_t dest, void *context)
{
	Ep *ep = ep_of(f);
	if (!ep)
		return -FI_EINVAL;
	iovec iov{const_cast<void *>(buf), len};
	return ep->post_tx(&iov, &desc, 1, dest, 0, context, ep->tx_op_flags & ~uint64_t(FI_INJECT),
			   ep->tx_completion(ep->tx_op_flags));
}

ssize_t ep_sendv(fid_ep *f, const iovec *iov, void **desc, size_t count, fi_addr_t dest, void *context)
{
	Ep *ep = ep_of(f);
	if (!ep)
		return -FI_EINVAL;
	return ep->post_tx(iov, desc, count, dest, 0, context, ep->tx_op_flags & ~uint64_t(FI_INJECT),
			   ep->tx_completion(ep->tx_op_flags));
}

ssize_t ep_sendmsg(fid_ep *f, const fi_msg *msg, uint64_t flags)
{
	Ep *ep = ep_of(f);
	if (!ep || !msg)
		return -FI_EINVAL;
	if (flags & ~kSendMsgFlags) {
		EFA_WARN_ONCE(EpData, "fi_sendmsg: flags %#lx are not send flags on FI_EP_DGRAM%s; drop them",
			      (unsigned long)(flags & ~kSendMsgFlags),
			      (flags & FI_DELIVERY_COMPLETE) ? " (datagrams are unreliable: no FI_DELIVERY_COMPLETE)" : "");
		return -FI_EINVAL;
	}
	return ep->post_tx(msg->msg_iov, msg->desc, msg->iov_count, msg->addr, msg->data, msg->context, flags,
			   ep->tx_completion(flags));
}

ssize_t ep_inject(fid_ep *f, const void *buf, size_t len, fi_addr_t dest)
{
	Ep *ep = ep_of(f);
	if (!ep)
		return -FI_EINVAL;
	iovec iov{const_cast<void *>(buf), len};
	return ep->post_tx(&iov, nullptr, 1, dest, 0, nullptr, FI_INJECT, false);
}

ssize_t ep_senddata(fid_ep *f, const void *buf, size_t len, void *desc, uint64_t data, fi_addr_t dest, void *context)
{
	Ep *ep = ep_of(f);
	if (!ep)
		return -FI_EINVAL;
	iovec iov{const_cast<void *>(buf), len};
	return ep->post_tx(&iov, &desc, 1, dest, data, context,
			   (ep->tx_op_flags & ~uint64_t(FI_INJECT)) | FI_REMOTE_CQ_DATA, ep->tx_completion(ep->tx_op_flags));
}

ssize_t ep_injectdata(fid_ep *f, const void *buf, size_t len, uint64_t data, fi_addr_t dest)
{
	Ep *ep = ep_of(f);
	if (!ep)
		return -FI_EINVAL;
	iovec iov{const_cast<void *>(buf), len};
	return ep->post_tx(&iov, nullptr, 1, dest, data, nullptr, FI_INJECT | FI_REMOTE_CQ_DATA, false);
}

} // namespace

fi_ops_msg g_msg_ops = {
	.size = sizeof(fi_ops_msg),
	.recv = ep_recv,
	.recvv = ep_recvv,
	.recvmsg = ep_recvmsg,
	.send = ep_send,
	.sendv = ep_sendv,
	.sendmsg = ep_sendmsg,
	.inject = ep_inject,
	.senddata = ep_senddata,
	.injectdata = ep_injectdata,
};

} // namespace efa::dgram
