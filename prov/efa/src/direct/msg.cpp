/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* efa-direct fi_ops_msg: the C entry points, each a thin call into Ep::post_*. */
#include "direct/ep.h"

#include "log.h"

namespace efa::direct {

namespace {

constexpr uint64_t kSendMsgFlags = FI_COMPLETION | FI_MORE | FI_INJECT | FI_REMOTE_CQ_DATA | FI_INJECT_COMPLETE |
				   FI_TRANSMIT_COMPLETE | FI_DELIVERY_COMPLETE | FI_FENCE;
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
	return ep->post_tx(OpKind::Send, &iov, &desc, 1, dest, nullptr, 0, context, ep->tx_op_flags & ~uint64_t(FI_INJECT),
			   ep->tx_completion(ep->tx_op_flags));
}

ssize_t ep_sendv(fid_ep *f, const iovec *iov, void **desc, size_t count, fi_addr_t dest, void *context)
{
	Ep *ep = ep_of(f);
	if (!ep)
		return -FI_EINVAL;
	return ep->post_tx(OpKind::Send, iov, desc, count, dest, nullptr, 0, context,
			   ep->tx_op_flags & ~uint64_t(FI_INJECT), ep->tx_completion(ep->tx_op_flags));
}

ssize_t ep_sendmsg(fid_ep *f, const fi_msg *msg, uint64_t flags)
{
	Ep *ep = ep_of(f);
	if (!ep || !msg)
		return -FI_EINVAL;
	if (flags & ~kSendMsgFlags) {
		EFA_WARN_ONCE(EpData, "fi_sendmsg: flags %#lx are not send flags on efa-direct; drop them",
			      (unsigned long)(flags & ~kSendMsgFlags));
		return -FI_EINVAL;
	}
	return ep->post_tx(OpKind::Send, msg->msg_iov, msg->desc, msg->iov_count, msg->addr, nullptr, msg->data,
			   msg->context, flags, ep->tx_completion(flags));
}

ssize_t ep_inject(fid_ep *f, const void *buf, size_t len, fi_addr_t dest)
{
	Ep *ep = ep_of(f);
	if (!ep)
		return -FI_EINVAL;
	iovec iov{const_cast<void *>(buf), len};
	return ep->post_tx(OpKind::Send, &iov, nullptr, 1, dest, nullptr, 0, nullptr, FI_INJECT, false);
}

ssize_t ep_senddata(fid_ep *f, const void *buf, size_t len, void *desc, uint64_t data, fi_addr_t dest, void *context)
{
	Ep *ep = ep_of(f);
	if (!ep)
		return -FI_EINVAL;
	iovec iov{const_cast<void *>(buf), len};
	return ep->post_tx(OpKind::Send, &iov, &desc, 1, dest, nullptr, data, context,
			   (ep->tx_op_flags & ~uint64_t(FI_INJECT)) | FI_REMOTE_CQ_DATA, ep->tx_completion(ep->tx_op_flags));
}

ssize_t ep_injectdata(fid_ep *f, const void *buf, size_t len, uint64_t data, fi_addr_t dest)
{
	Ep *ep = ep_of(f);
	if (!ep)
		return -FI_EINVAL;
	iovec iov{const_cast<void *>(buf), len};
	return ep->post_tx(OpKind::Send, &iov, nullptr, 1, dest, nullptr, data, nullptr, FI_INJECT | FI_REMOTE_CQ_DATA,
			   false);
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

} // namespace efa::direct
