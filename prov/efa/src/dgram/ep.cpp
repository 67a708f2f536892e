/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* FI_EP_DGRAM endpoint: open, bind, enable, close, getname, options. */
#include "dgram/ep.h"

#include "addr.h"
#include "info.h"
#include "log.h"
#include "tclass.h"

#include <rdma/fi_atomic.h>
#include <rdma/fi_ext_efa.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

namespace efa::dgram {

namespace {

Ep *ep_of(fid_t f) { return fid_to<Ep>(f); }

/* ------------------------------------------------------------------ fi_ops */

int ep_close(fid_t f)
{
	Ep *ep = ep_of(f);
	return ep ? ep->close() : -FI_EINVAL;
}

int ep_bind(fid_t f, fid_t bf, uint64_t flags)
{
	Ep *ep = ep_of(f);
	return ep ? ep->bind(bf, flags) : -FI_EINVAL;
}

int ep_control(fid_t f, int command, void *)
{
	Ep *ep = ep_of(f);
	if (!ep)
		return -FI_EINVAL;
	if (command == FI_ENABLE)
		return ep->enable();
	return -FI_ENOSYS;
}

fi_ops g_ep_fi_ops = {
	.size = sizeof(fi_ops),
	.close = ep_close,
	.bind = ep_bind,
	.control = ep_control,
	.ops_open = no_ops_open,
	.tostr = nullptr,
	.ops_set = nullptr,
};

/* ------------------------------------------------------------------ fi_ops_ep */

ssize_t ep_cancel(fid_t f, void *)
{
	/* Work requests posted to the device cannot be taken back. */
	return ep_of(f) ? -FI_ENOSYS : -FI_EINVAL;
}

int ep_getopt(fid_t f, int, int, void *val, size_t *len)
{
	if (!ep_of(f) || !val || !len)
		return -FI_EINVAL;
	/* No option applies to a UD endpoint (no RNR retry, no RMA to emulate). */
	return -FI_ENOPROTOOPT;
}

int ep_setopt(fid_t f, int level, int name, const void *val, size_t len)
{
	if (!ep_of(f) || !val)
		return -FI_EINVAL;
	if (level != FI_OPT_ENDPOINT)
		return -FI_ENOPROTOOPT;
	switch (name) {
	case FI_OPT_CUDA_API_PERMITTED:
	case FI_OPT_SHARED_MEMORY_PERMITTED:
		/* Neither CUDA nor shared memory is used: any answer is honoured. */
		return len == sizeof(bool) ? 0 : -FI_EINVAL;
	case FI_OPT_EFA_RNR_RETRY:
		EFA_WARN(EpCtrl, "FI_OPT_EFA_RNR_RETRY: an FI_EP_DGRAM endpoint never retries (a datagram that finds no "
			 "receive is dropped); use an FI_EP_RDM endpoint for receiver-not-ready retries");
		return -FI_ENOPROTOOPT;
	default:
		return -FI_ENOPROTOOPT;
	}
}

ssize_t rx_size_left(fid_ep *f) { return size_left<Ep>(f, [](Ep &ep) { return ep.rx.left(); }); }
ssize_t tx_size_left(fid_ep *f) { return size_left<Ep>(f, [](Ep &ep) { return ep.tx.left(); }); }

fi_ops_ep g_ep_ops = {
	.size = sizeof(fi_ops_ep),
	.cancel = ep_cancel,
	.getopt = ep_getopt,
	.setopt = ep_setopt,
	.tx_ctx = ep_no_tx_ctx,
	.rx_ctx = ep_no_rx_ctx,
	.rx_size_left = rx_size_left,
	.tx_size_left = tx_size_left,
};

/* ------------------------------------------------------------------ messages only */

template <typename... A> ssize_t enosys(A...) { return -FI_ENOSYS; }

fi_ops_rma g_rma_ops = {
	.size = sizeof(fi_ops_rma),
	.read = enosys<fid_ep *, void *, size_t, void *, fi_addr_t, uint64_t, uint64_t, void *>,
	.readv = enosys<fid_ep *, const iovec *, void **, size_t, fi_addr_t, uint64_t, uint64_t, void *>,
	.readmsg = enosys<fid_ep *, const fi_msg_rma *, uint64_t>,
	.write = enosys<fid_ep *, const void *, size_t, void *, fi_addr_t, uint64_t, uint64_t, void *>,
	.writev = enosys<fid_ep *, const iovec *, void **, size_t, fi_addr_t, uint64_t, uint64_t, void *>,
	.writemsg = enosys<fid_ep *, const fi_msg_rma *, uint64_t>,
	.inject = enosys<fid_ep *, const void *, size_t, fi_addr_t, uint64_t, uint64_t>,
	.writedata = enosys<fid_ep *, const void *, size_t, void *, uint64_t, fi_addr_t, uint64_t, uint64_t, void *>,
	.injectdata = enosys<fid_ep *, const void *, size_t, uint64_t, fi_addr_t, uint64_t, uint64_t>,
};


} // namespace

/* ------------------------------------------------------------------ lifecycle */

int Ep::enable()
{
	if (enabled)
		return -FI_EINVAL;
	if (int r = check_bindings())
		return r;
	const verbs::Device &dev = *dom->dev;
	qkey = random_qkey();
	verbs::QpAttr qa;
	qa.sq_depth = uint32_t(info->tx_attr->size);
	qa.rq_depth = uint32_t(info->rx_attr->size);
	qa.max_inline = uint32_t(inject_size);
	qa.qkey = qkey;
	auto q = verbs::Qp::create_ud(dev, dom->pd, send_cq()->vcq, recv_cq()->vcq, qa);
	if (!q.ok())
		return q.error();
	qp = q.take();
	const verbs::QpFeatures &feat = qp.features();
	/* Injects go inline: never more than the QP takes. */
	inject_size = std::min<size_t>(inject_size, feat.max_inline);
	tx.init(feat.sq_depth, nullptr, 0);
	rx.init(feat.rq_depth, nullptr, 0);
	attach(&hook);
	enabled = true;
	EFA_DBG(EpCtrl, "FI_EP_DGRAM endpoint %s: UD QP %u, qkey %#x, inject %zu, sq %u, rq %u", dev.name().c_str(),
		qp.qpn(), qkey, inject_size, feat.sq_depth, feat.rq_depth);
	return 0;
}

int Ep::close()
{
	if (hdr.children.load())
		return -FI_EBUSY;
	if (enabled) {
		detach(&hook);
		qp = verbs::Qp(); /* destroys the QP: its work is flushed without completions */
		/* Slots held by work that will never complete go back to the CQs. */
		if (tx_cq)
			tx_cq->release(int64_t(tx.in_use()));
		if (rx_cq)
			rx_cq->release(int64_t(rx.in_use()));
		enabled = false;
	}
	release_bindings();
	retire(this);
	return 0;
}

int ep_open(fid_domain *df, fi_info *info, fid_ep **out, void *context)
{
	Domain *d = fid_to<Domain>(&df->fid);
	if (!d)
		return -FI_EINVAL;
	if (!info || !out || !info->ep_attr || !info->tx_attr || !info->rx_attr) {
		EFA_WARN(EpCtrl, "fi_endpoint: pass the fi_info from fi_getinfo (with its ep, tx and rx attributes) "
			 "and a place for the endpoint");
		return -FI_EINVAL;
	}
	if (info->ep_attr->type != FI_EP_DGRAM) {
		EFA_WARN(EpCtrl, "fi_endpoint: domain %s offers FI_EP_DGRAM endpoints only (FI_EP_RDM endpoints come "
			 "from a <device>-rdm domain)", d->info->domain_attr->name);
		return -FI_EINVAL;
	}
	if (!(info->mode & FI_MSG_PREFIX) && !(info->tx_attr->mode & FI_MSG_PREFIX)) {
		EFA_WARN(EpCtrl, "fi_endpoint: FI_EP_DGRAM needs FI_MSG_PREFIX (%zu bytes in front of every buffer); "
			 "use the fi_info fi_getinfo returned", kMsgPrefixSize);
		return -FI_EINVAL;
	}
	/* Checked as on the other endpoints; a UD QP has no service level to give a class. */
	if (int r = check_tclass(info->tx_attr->tclass, "fi_endpoint", "tx_attr->tclass"))
		return r;
	const verbs::Device &dev = *d->dev;
	auto *ep = new Ep();
	ep->hdr.magic = Ep::kMagic;
	ep->ep.fid.fclass = FI_CLASS_EP;
	ep->ep.fid.context = context;
	ep->ep.fid.ops = &g_ep_fi_ops;
	ep->ep.ops = &g_ep_ops;
	ep->ep.cm = &g_ep_cm_ops;
	ep->ep.msg = &g_msg_ops;
	ep->ep.rma = &g_rma_ops;
	ep->ep.tagged = &g_enosys_tagged_ops;
	ep->ep.atomic = &g_enosys_atomic_ops;
	ep->dom = d;
	ep->tx_lock.set_threading(d->threading);
	ep->rx_lock.set_threading(d->threading);
	ep->tx.set_threading(d->threading);
	ep->rx.set_threading(d->threading);
	ep->info = fi_dupinfo(info);
	ep->tx_op_flags = info->tx_attr->op_flags;
	ep->rx_op_flags = info->rx_attr->op_flags;
	ep->inject_size = std::min<size_t>(info->tx_attr->inject_size, dev.inline_size());
	ep->mtu = dev.mtu();
	ep->prefix = kMsgPrefixSize;
	/* Sizes beyond the device's are clamped by the QP; 0 means the device's. */
	if (!ep->info->tx_attr->size)
		ep->info->tx_attr->size = dev.efa().max_sq_wr;
	if (!ep->info->rx_attr->size)
		ep->info->rx_attr->size = dev.efa().max_rq_wr;
	d->hdr.children++;
	*out = &ep->ep;
	return 0;
}

} // namespace efa::dgram
