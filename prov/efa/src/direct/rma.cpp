/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * efa-direct fi_ops_rma: RDMA read and write (with immediate for remote CQ data, inline
 * for injects where the device has INLINE_WRITE). Remote addresses are virtual
 * addresses (FI_MR_VIRT_ADDR); keys are the target's rkeys.
 */
#include "direct/ep.h"

#include <rdma/fi_ext_efa.h>

#include "log.h"

namespace efa::direct {

namespace {

constexpr uint64_t kRmaMsgFlags = FI_COMPLETION | FI_MORE | FI_INJECT | FI_REMOTE_CQ_DATA | FI_INJECT_COMPLETE |
				  FI_TRANSMIT_COMPLETE | FI_DELIVERY_COMPLETE | FI_FENCE | FI_EFA_WR_HIGH_PPS;

Ep *ep_of(fid_ep *f) { return f ? fid_to<Ep>(&f->fid) : nullptr; }

ssize_t rma(fid_ep *f, OpKind kind, const iovec *iov, void **desc, size_t count, fi_addr_t dest, uint64_t addr,
	    uint64_t key, uint64_t data, void *context, uint64_t extra_flags, bool inject)
{
	Ep *ep = ep_of(f);
	if (!ep)
		return -FI_EINVAL;
	size_t len = 0;
	for (size_t i = 0; i < count; i++)
		len += iov[i].iov_len;
	fi_rma_iov r{addr, len, key};
	uint64_t flags = inject ? FI_INJECT | extra_flags : (ep->tx_op_flags & ~uint64_t(FI_INJECT)) | extra_flags;
	return ep->post_tx(kind, iov, desc, count, dest, &r, data, context, flags,
			   inject ? false : ep->tx_completion(ep->tx_op_flags));
}

ssize_t ep_read(fid_ep *f, void *buf, size_t len, void *desc, fi_addr_t src, uint64_t addr, uint64_t key, void *context)
{
	iovec iov{buf, len};
	return rma(f, OpKind::Read, &iov, &desc, 1, src, addr, key, 0, context, 0, false);
}

ssize_t ep_readv(fid_ep *f, const iovec *iov, void **desc, size_t count, fi_addr_t src, uint64_t addr, uint64_t key,
		 void *context)
{
	return rma(f, OpKind::Read, iov, desc, count, src, addr, key, 0, context, 0, false);
}

ssize_t rma_msg(fid_ep *f, OpKind kind, const fi_msg_rma *msg, uint64_t flags)
{
	Ep *ep = ep_of(f);
	if (!ep || !msg)
		return -FI_EINVAL;
	if (flags & ~kRmaMsgFlags) {
		EFA_WARN_ONCE(EpData, "fi_%smsg: flags %#lx are not RMA flags; drop them", kind == OpKind::Read ? "read" : "write",
			      (unsigned long)(flags & ~kRmaMsgFlags));
		return -FI_EINVAL;
	}
	if (msg->rma_iov_count != 1 || !msg->rma_iov) {
		EFA_WARN_ONCE(EpData, "%zu remote iovs: tx_attr->rma_iov_limit is 1; one remote iov per operation",
			      msg->rma_iov_count);
		return -FI_EINVAL;
	}
	if (kind == OpKind::Read)
		flags &= ~uint64_t(FI_INJECT | FI_REMOTE_CQ_DATA);
	return ep->post_tx(kind, msg->msg_iov, msg->desc, msg->iov_count, msg->addr, msg->rma_iov, msg->data,
			   msg->context, flags, ep->tx_completion(flags));
}

ssize_t ep_readmsg(fid_ep *f, const fi_msg_rma *msg, uint64_t flags) { return rma_msg(f, OpKind::Read, msg, flags); }

ssize_t ep_write(fid_ep *f, const void *buf, size_t len, void *desc, fi_addr_t dest, uint64_t addr, uint64_t key,
		 void *context)
{
	iovec iov{const_cast<void *>(buf), len};
	return rma(f, OpKind::Write, &iov, &desc, 1, dest, addr, key, 0, context, 0, false);
}

ssize_t ep_writev(fid_ep *f, const iovec *iov, void **desc, size_t count, fi_addr_t dest, uint64_t addr, uint64_t key,
		  void *context)
{
	return rma(f, OpKind::Write, iov, desc, count, dest, addr, key, 0, context, 0, false);
}

ssize_t ep_writemsg(fid_ep *f, const fi_msg_rma *msg, uint64_t flags) { return rma_msg(f, OpKind::Write, msg, flags); }

ssize_t ep_inject_write(fid_ep *f, const void *buf, size_t len, fi_addr_t dest, uint64_t addr, uint64_t key)
{
	iovec iov{const_cast<void *>(buf), len};
	return rma(f, OpKind::Write, &iov, nullptr, 1, dest, addr, key, 0, nullptr, 0, true);
}

ssize_t ep_writedata(fid_ep *f, const void *buf, size_t len, void *desc, uint64_t data, fi_addr_t dest, uint64_t addr,
		     uint64_t key, void *context)
{
	iovec iov{const_cast<void *>(buf), len};
	return rma(f, OpKind::Write, &iov, &desc, 1, dest, addr, key, data, context, FI_REMOTE_CQ_DATA, false);
}

ssize_t ep_inject_writedata(fid_ep *f, const void *buf, size_t len, uint64_t data, fi_addr_t dest, uint64_t addr,
			    uint64_t key)
{
	iovec iov{const_cast<void *>(buf), len};
	return rma(f, OpKind::Write, &iov, nullptr, 1, dest, addr, key, data, nullptr, FI_REMOTE_CQ_DATA, true);
}

} // namespace

fi_ops_rma g_rma_ops = {
	.size = sizeof(fi_ops_rma),
	.read = ep_read,
	.readv = ep_readv,
	.readmsg = ep_readmsg,
	.write = ep_write,
	.writev = ep_writev,
	.writemsg = ep_writemsg,
	.inject = ep_inject_write,
	.writedata = ep_writedata,
	.injectdata = ep_inject_writedata,
};

} // namespace efa::direct
