/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* efa-direct endpoint: open, bind, enable, close, getname, options, pools. */
#include "direct/ep.h"

#include "addr.h"
#include "log.h"
#include "tclass.h"

#include <rdma/fi_ext_efa.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_tagged.h>


#include <cstring>

namespace efa::direct {

/* ------------------------------------------------------------------ op pool */

void OpPool::init(size_t n, uint8_t *bounce, size_t bounce_size)
{
	ops_.assign(n, Op{});
	free_ = nullptr;
	for (size_t i = n; i-- > 0;) {
		ops_[i].bounce = bounce ? bounce + i * bounce_size : nullptr;
		ops_[i].next_free = free_;
		free_ = &ops_[i];
	}
	in_use_ = 0;
}

Op *OpPool::get()
{
	std::lock_guard g(lock_);
	Op *op = free_;
	if (op) {
		free_ = op->next_free;
		in_use_++;
	}
	return op;
}

void OpPool::put(Op *op)
{
	std::lock_guard g(lock_);
	op->next_free = free_;
	free_ = op;
	in_use_--;
}

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

int ep_getopt(fid_t f, int level, int name, void *val, size_t *len)
{
	Ep *ep = ep_of(f);
	if (!ep || !val || !len)
		return -FI_EINVAL;
	if (level != FI_OPT_ENDPOINT)
		return -FI_ENOPROTOOPT;
	switch (name) {
	case FI_OPT_EFA_EMULATED_READ:
	case FI_OPT_EFA_EMULATED_WRITE:
		/* efa-direct never emulates: RMA is the device's RDMA or not offered. */
		return put_opt<bool>(val, len, false);
	default:
		return ep->getopt_common(name, val, len);
	}
}

int ep_setopt(fid_t f, int level, int name, const void *val, size_t len)
{
	Ep *ep = ep_of(f);
	if (!ep || !val)
		return -FI_EINVAL;
	if (level != FI_OPT_ENDPOINT)
		return -FI_ENOPROTOOPT;
	switch (name) {
	case FI_OPT_EFA_USE_DEVICE_RDMA:
		if (len != sizeof(bool))
			return -FI_EINVAL;
		/* efa-direct's RMA is the device's RDMA: it cannot be turned off for an endpoint
		 * with FI_RMA, nor on where the device has none. */
		if (*static_cast<const bool *>(val) ? !ep->dom->dev->rdma_read() : bool(ep->info->caps & FI_RMA)) {
			EFA_WARN(EpCtrl, "FI_OPT_EFA_USE_DEVICE_RDMA %s: efa-direct %s",
				 *static_cast<const bool *>(val) ? "true" : "false",
				 *static_cast<const bool *>(val) ? "has no RDMA on this device"
								 : "does RMA only with the device's RDMA; "
								   "use the efa fabric for emulated RMA");
			return -FI_EOPNOTSUPP;
		}
		return 0;
	case FI_OPT_EFA_USE_UNSOLICITED_WRITE_RECV:
		/* Without FI_RX_CQ_DATA the application posts no receive for remote CQ data:
		 * the device must take such writes without one. */
		if (len == sizeof(bool) && !*static_cast<const bool *>(val) && !ep->enabled && !ep->dom->rx_cq_data) {
			EFA_WARN(EpCtrl, "FI_OPT_EFA_USE_UNSOLICITED_WRITE_RECV false needs FI_RX_CQ_DATA in the "
				 "endpoint's mode (remote CQ data would then consume posted receives); ask for it in "
				 "the hints' mode");
			return -FI_EOPNOTSUPP;
		}
		return ep->setopt_common(name, val, len);
	default:
		return ep->setopt_common(name, val, len);
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


} // namespace

/* ------------------------------------------------------------------ lifecycle */

int Ep::enable()
{
	if (enabled)
		return -FI_EINVAL;
	if (int r = check_bindings())
		return r;
	Cq *scq = send_cq(), *rcq = recv_cq();
	const verbs::Device &dev = *dom->dev;
	qkey = random_qkey();
	verbs::QpAttr qa;
	qa.sq_depth = uint32_t(info->tx_attr->size);
	qa.rq_depth = uint32_t(info->rx_attr->size);
	qa.max_inline = uint32_t(inject_size);
	/* Without FI_RX_CQ_DATA a remote write with data must not take one of the
	 * application's receives: the QP has unsolicited write receive, or no endpoint. */
	qa.unsolicited_write_recv = use_unsolicited_write_recv;
	qa.require_unsolicited_write_recv = !dom->rx_cq_data && (info->caps & (FI_RMA | FI_REMOTE_WRITE));
	qa.sl = endpoint_sl(info, dom->info);
	qa.processing_hints = true;
	qa.qkey = qkey;
	qa.rnr_retry = rnr_retry;
	auto q = verbs::Qp::create_srd(dev, dom->pd, scq->vcq, rcq->vcq, qa);
	if (!q.ok())
		return q.error();
	qp = q.take();
	const verbs::QpFeatures &feat = qp.features();

	/* Bounce slots for injects the device cannot take inline. */
	const size_t slot = std::max<size_t>(inject_size, 1);
	if (!bounce.alloc(feat.sq_depth * slot)) {
		qp = verbs::Qp();
		return -FI_ENOMEM;
	}
	auto mr = verbs::Mr::reg(dom->pd, bounce.data(), bounce.size(), verbs::kLocalWrite);
	if (!mr.ok()) {
		qp = verbs::Qp();
		return mr.error();
	}
	bounce_mr = mr.take();
	tx.init(feat.sq_depth, bounce.data(), slot);
	rx.init(feat.rq_depth, nullptr, 0);
	attach(&hook);
	enabled = true;
	EFA_DBG(EpCtrl, "efa-direct endpoint %s: QP %u, qkey %#x, inject %zu, sq %u, rq %u", dev.name().c_str(), qp.qpn(),
		qkey, inject_size, feat.sq_depth, feat.rq_depth);
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
		bounce_mr = verbs::Mr();
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
	if (info->ep_attr->type != FI_EP_RDM) {
		EFA_WARN(EpCtrl, "fi_endpoint: efa-direct offers FI_EP_RDM endpoints only");
		return -FI_EINVAL;
	}
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
	ep->inject_size = std::min<size_t>(info->tx_attr->inject_size, dev.inline_size_ex());
	/* Unsolicited write receive where remote CQ data would otherwise need receives the
	 * application does not post (no FI_RX_CQ_DATA); FI_EFA_USE_UNSOLICITED_WRITE_RECV=0
	 * made fi_getinfo ask for FI_RX_CQ_DATA with RMA. */
	ep->use_unsolicited_write_recv = !d->rx_cq_data && dev.unsolicited_write_recv();
	ep->mtu = dev.mtu();
	ep->max_rdma = dev.max_rdma_size();
	/* Sizes beyond the device's are clamped by the QP; 0 means the device's. */
	if (!ep->info->tx_attr->size)
		ep->info->tx_attr->size = dev.efa().max_sq_wr;
	if (!ep->info->rx_attr->size)
		ep->info->rx_attr->size = dev.efa().max_rq_wr;
	d->hdr.children++;
	*out = &ep->ep;
	return 0;
}

} // namespace efa::direct
