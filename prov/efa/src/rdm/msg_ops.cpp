/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* fi_msg(3) and fi_tagged(3) entry points of the RDM endpoint. */
#include "rdm/ep.h"

namespace efa::rdm {

namespace {

Ep *ep_of(fid_ep *f) { return fid_to<Ep>(&f->fid); }

/* Flags a call without flags takes: the endpoint's defaults (fi_endpoint(3) op_flags). */
constexpr uint64_t kTxDefaultMask = FI_COMPLETION | FI_DELIVERY_COMPLETE | FI_TRANSMIT_COMPLETE | FI_INJECT_COMPLETE;

/* `flags`: the call's own; `defaults`: which of the endpoint's op_flags it takes too
 * (none for the *msg calls, which pass all of theirs). Inlined into each call with
 * Ep::send, so that a call's constants (one iov, no descriptor, FI_INJECT) fold into
 * the path below (performance.md, "Instructions per small message"). */
[[gnu::always_inline]] inline ssize_t do_send(fid_ep *f, const iovec *iov, void **desc, size_t count, fi_addr_t dest, uint64_t tag, uint64_t data,
		uint64_t flags, uint64_t defaults, void *context, bool tagged)
{
	Ep *ep = ep_of(f);
	if (!ep)
		return -FI_EINVAL;
	flags |= ep->tx_op_flags & defaults;
	std::lock_guard g(ep->lock);
	return ep->send(SendArgs{iov, desc, count, dest, tag, data, flags, context, tagged});
}

/* The inject calls: one iov, no descriptor, no context, no defaults. */
[[gnu::always_inline]] inline ssize_t do_inject(fid_ep *f, const void *buf, size_t len, fi_addr_t dest, uint64_t tag,
						uint64_t data, uint64_t flags, bool tagged)
{
	const iovec iov{const_cast<void *>(buf), len};
	return do_send(f, &iov, nullptr, 1, dest, tag, data, flags, 0, nullptr, tagged);
}

/* Inlined into each receive call, as do_send. */
[[gnu::always_inline]] inline ssize_t do_recv(fid_ep *f, const iovec *iov, void **desc, size_t count, fi_addr_t src, uint64_t tag, uint64_t ignore,
		uint64_t flags, uint64_t defaults, void *context, bool tagged)
{
	Ep *ep = ep_of(f);
	if (!ep)
		return -FI_EINVAL;
	flags |= ep->rx_op_flags & defaults;
	std::lock_guard g(ep->lock);
	return ep->recv(RecvArgs{iov, desc, count, src, tag, ignore, flags, context, tagged});
}

/* The receive flags a call without flags takes from the endpoint (fi_tagged(3): a tagged
 * receive is never FI_MULTI_RECV). */
constexpr uint64_t kRxDefaultMask = FI_COMPLETION | FI_MULTI_RECV;
constexpr uint64_t kTagRxDefaultMask = FI_COMPLETION;

/* ------------------------------------------------------------------ fi_msg */

ssize_t msg_recv(fid_ep *f, void *buf, size_t len, void *desc, fi_addr_t src, void *context)
{
	iovec iov{buf, len};
	return do_recv(f, &iov, &desc, 1, src, 0, 0, 0, kRxDefaultMask, context, false);
}

ssize_t msg_recvv(fid_ep *f, const iovec *iov, void **desc, size_t count, fi_addr_t src, void *context)
{
	return do_recv(f, iov, desc, count, src, 0, 0, 0, kRxDefaultMask, context, false);
}

ssize_t msg_recvmsg(fid_ep *f, const fi_msg *msg, uint64_t flags)
{
	if (!msg)
		return -FI_EINVAL;
	return do_recv(f, msg->msg_iov, msg->desc, msg->iov_count, msg->addr, 0, 0, flags, 0, msg->context,
		       false);
}

ssize_t msg_send(fid_ep *f, const void *buf, size_t len, void *desc, fi_addr_t dest, void *context)
{
	iovec iov{const_cast<void *>(buf), len};
	return do_send(f, &iov, &desc, 1, dest, 0, 0, 0, kTxDefaultMask, context, false);
}

ssize_t msg_sendv(fid_ep *f, const iovec *iov, void **desc, size_t count, fi_addr_t dest, void *context)
{
	return do_send(f, iov, desc, count, dest, 0, 0, 0, kTxDefaultMask, context, false);
}

ssize_t msg_sendmsg(fid_ep *f, const fi_msg *msg, uint64_t flags)
{
	if (!msg)
		return -FI_EINVAL;
	return do_send(f, msg->msg_iov, msg->desc, msg->iov_count, msg->addr, 0, msg->data, flags, 0, msg->context, false);
}

ssize_t msg_inject(fid_ep *f, const void *buf, size_t len, fi_addr_t dest)
{
	return do_inject(f, buf, len, dest, 0, 0, FI_INJECT, false);
}

ssize_t msg_senddata(fid_ep *f, const void *buf, size_t len, void *desc, uint64_t data, fi_addr_t dest,
		     void *context)
{
	iovec iov{const_cast<void *>(buf), len};
	return do_send(f, &iov, &desc, 1, dest, 0, data, FI_REMOTE_CQ_DATA, kTxDefaultMask, context, false);
}

ssize_t msg_injectdata(fid_ep *f, const void *buf, size_t len, uint64_t data, fi_addr_t dest)
{
	return do_inject(f, buf, len, dest, 0, data, FI_INJECT | FI_REMOTE_CQ_DATA, false);
}

/* ------------------------------------------------------------------ fi_tagged */

ssize_t tag_recv(fid_ep *f, void *buf, size_t len, void *desc, fi_addr_t src, uint64_t tag, uint64_t ignore,
		 void *context)
{
	iovec iov{buf, len};
	return do_recv(f, &iov, &desc, 1, src, tag, ignore, 0, kTagRxDefaultMask, context, true);
}

ssize_t tag_recvv(fid_ep *f, const iovec *iov, void **desc, size_t count, fi_addr_t src, uint64_t tag,
		  uint64_t ignore, void *context)
{
	return do_recv(f, iov, desc, count, src, tag, ignore, 0, kTagRxDefaultMask, context, true);
}

ssize_t tag_recvmsg(fid_ep *f, const fi_msg_tagged *msg, uint64_t flags)
{
	if (!msg)
		return -FI_EINVAL;
	return do_recv(f, msg->msg_iov, msg->desc, msg->iov_count, msg->addr, msg->tag, msg->ignore, flags, 0,
		       msg->context, true);
}

ssize_t tag_send(fid_ep *f, const void *buf, size_t len, void *desc, fi_addr_t dest, uint64_t tag, void *context)
{
	iovec iov{const_cast<void *>(buf), len};
	return do_send(f, &iov, &desc, 1, dest, tag, 0, 0, kTxDefaultMask, context, true);
}

ssize_t tag_sendv(fid_ep *f, const iovec *iov, void **desc, size_t count, fi_addr_t dest, uint64_t tag,
		  void *context)
{
	return do_send(f, iov, desc, count, dest, tag, 0, 0, kTxDefaultMask, context, true);
}

ssize_t tag_sendmsg(fid_ep *f, const fi_msg_tagged *msg, uint64_t flags)
{
	if (!msg)
		return -FI_EINVAL;
	return do_send(f, msg->msg_iov, msg->desc, msg->iov_count, msg->addr, msg->tag, msg->data, flags, 0, msg->context,
		       true);
}

ssize_t tag_inject(fid_ep *f, const void *buf, size_t len, fi_addr_t dest, uint64_t tag)
{
	return do_inject(f, buf, len, dest, tag, 0, FI_INJECT, true);
}

ssize_t tag_senddata(fid_ep *f, const void *buf, size_t len, void *desc, uint64_t data, fi_addr_t dest, uint64_t tag,
		     void *context)
{
	iovec iov{const_cast<void *>(buf), len};
	return do_send(f, &iov, &desc, 1, dest, tag, data, FI_REMOTE_CQ_DATA, kTxDefaultMask, context, true);
}

ssize_t tag_injectdata(fid_ep *f, const void *buf, size_t len, uint64_t data, fi_addr_t dest, uint64_t tag)
{
	return do_inject(f, buf, len, dest, tag, data, FI_INJECT | FI_REMOTE_CQ_DATA, true);
}

} // namespace

fi_ops_msg g_msg_ops = {
	.size = sizeof(fi_ops_msg),
	.recv = msg_recv,
	.recvv = msg_recvv,
	.recvmsg = msg_recvmsg,
	.send = msg_send,
	.sendv = msg_sendv,
	.sendmsg = msg_sendmsg,
	.inject = msg_inject,
	.senddata = msg_senddata,
	.injectdata = msg_injectdata,
};

fi_ops_tagged g_tagged_ops = {
	.size = sizeof(fi_ops_tagged),
	.recv = tag_recv,
	.recvv = tag_recvv,
	.recvmsg = tag_recvmsg,
	.send = tag_send,
	.sendv = tag_sendv,
	.sendmsg = tag_sendmsg,
	.inject = tag_inject,
	.senddata = tag_senddata,
	.injectdata = tag_injectdata,
};

} // namespace efa::rdm
