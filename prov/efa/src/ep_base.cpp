/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
#include "ep_base.h"

#include "addr.h"
#include "log.h"

#include <rdma/fi_ext_efa.h>

#include <sys/random.h>
#include <unistd.h>

#include <cstring>
#include <ctime>

namespace efa {

EpBase *ep_base_of(fid_t f)
{
	if (!f || f->fclass != FI_CLASS_EP)
		return nullptr;
	EpBase *e = reinterpret_cast<EpBase *>(f);
	return e->hdr.magic == Magic::Ep || e->hdr.magic == Magic::RdmEp || e->hdr.magic == Magic::DgramEp ? e
													       : nullptr;
}

uint32_t random_qkey()
{
	/* QKEYs at or above 0x80000000 are privileged; 0 is what a stale address has. */
	uint32_t k = 0;
	while (!k) {
		if (getrandom(&k, sizeof k, GRND_NONBLOCK) != sizeof k)
			k = uint32_t(getpid()) * 2654435761u ^ uint32_t(time(nullptr));
		k &= 0x7fffffffu;
	}
	return k;
}

int EpBase::bind(fid_t bf, uint64_t flags)
{
	if (!bf) {
		EFA_WARN(EpCtrl, "fi_ep_bind: pass the fid of an AV, CQ, counter or EQ");
		return -FI_EINVAL;
	}
	if (enabled) {
		EFA_WARN(EpCtrl, "fi_ep_bind after fi_enable: bind everything first, then call fi_enable");
		return -FI_EINVAL;
	}
	switch (bf->fclass) {
	case FI_CLASS_AV: {
		Av *a = fid_to<Av>(bf);
		if (!a || a->dom != dom || flags || av) {
			EFA_WARN(EpCtrl, "fi_ep_bind(AV): %s", !a || a->dom != dom ? "the AV is not open in this domain"
							       : flags ? "an AV is bound with flags 0"
								       : "an AV is already bound (one per endpoint)");
			return -FI_EINVAL;
		}
		av = a;
		a->hdr.children++;
		return 0;
	}
	case FI_CLASS_CQ: {
		Cq *cq = fid_to<Cq>(bf);
		constexpr uint64_t kCqFlags = FI_TRANSMIT | FI_RECV | FI_SELECTIVE_COMPLETION;
		const char *why = !cq || cq->dom != dom		     ? "the CQ is not open in this domain"
				  : (flags & ~kCqFlags)		     ? "flags other than FI_TRANSMIT, FI_RECV, FI_SELECTIVE_COMPLETION"
				  : !(flags & (FI_TRANSMIT | FI_RECV)) ? "say FI_TRANSMIT, FI_RECV or both"
				  : (((flags & FI_TRANSMIT) && tx_cq) || ((flags & FI_RECV) && rx_cq))
					  ? "a CQ is already bound for that direction"
					  : nullptr;
		if (why) {
			EFA_WARN(EpCtrl, "fi_ep_bind(CQ, %#lx): %s", (unsigned long)flags, why);
			return -FI_EINVAL;
		}
		if (flags & FI_TRANSMIT) {
			tx_cq = cq;
			tx_selective = flags & FI_SELECTIVE_COMPLETION;
			cq->hdr.children++;
		}
		if (flags & FI_RECV) {
			rx_cq = cq;
			rx_selective = flags & FI_SELECTIVE_COMPLETION;
			cq->hdr.children++;
		}
		return 0;
	}
	case FI_CLASS_CNTR: {
		Cntr *c = fid_to<Cntr>(bf);
		constexpr uint64_t kEvents = FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
		if (!c || c->dom != dom || !flags || (flags & ~kEvents)) {
			EFA_WARN(EpCtrl, "fi_ep_bind(counter, %#lx): a counter of this domain, with flags from FI_SEND, "
				 "FI_RECV, FI_READ, FI_WRITE, FI_REMOTE_READ, FI_REMOTE_WRITE", (unsigned long)flags);
			return -FI_EINVAL;
		}
		const uint64_t bits[kCntrCount] = {FI_SEND, FI_RECV, FI_READ, FI_WRITE, FI_REMOTE_READ, FI_REMOTE_WRITE};
		for (int i = 0; i < kCntrCount; i++) {
			if (!(flags & bits[i]))
				continue;
			if (cntr[i])
				cntr[i]->hdr.children--;
			cntr[i] = c;
			c->hdr.children++;
		}
		return 0;
	}
	case FI_CLASS_EQ: {
		Eq *q = fid_to<Eq>(bf);
		if (!q || eq) {
			EFA_WARN(EpCtrl, "fi_ep_bind(EQ): %s", q ? "an EQ is already bound" : "not a live EQ");
			return -FI_EINVAL;
		}
		eq = q; /* RDM endpoints raise no events */
		q->hdr.children++;
		return 0;
	}
	default:
		EFA_WARN(EpCtrl, "fi_ep_bind: fid class %zu cannot be bound to an endpoint (bind an AV, CQ, counter or EQ)",
			 size_t(bf->fclass));
		return -FI_EINVAL;
	}
}

int EpBase::check_bindings() const
{
	if (!av) {
		EFA_WARN(EpCtrl, "fi_enable: bind an address vector first");
		return -FI_ENOAV;
	}
	const bool needs_tx = info->caps & (FI_SEND | FI_READ | FI_WRITE);
	const bool needs_rx = info->caps & (FI_RECV | FI_REMOTE_WRITE);
	if ((needs_tx && !tx_cq) || (needs_rx && !rx_cq) || (!tx_cq && !rx_cq)) {
		EFA_WARN(EpCtrl, "fi_enable: bind a CQ for %s", !tx_cq ? "FI_TRANSMIT" : "FI_RECV");
		return -FI_ENOCQ;
	}
	return 0;
}

void EpBase::attach(CqUser *user)
{
	Cq *scq = send_cq(), *rcq = recv_cq();
	scq->attach(user);
	if (rcq != scq)
		rcq->attach(user);
	for (Cntr *c : cntr) {
		if (!c)
			continue;
		c->add_cq(scq);
		if (rcq != scq)
			c->add_cq(rcq);
	}
}

void EpBase::detach(CqUser *user)
{
	Cq *scq = send_cq(), *rcq = recv_cq();
	for (Cntr *c : cntr) {
		if (!c)
			continue;
		c->remove_cq(scq);
		if (rcq != scq)
			c->remove_cq(rcq);
	}
	if (scq)
		scq->detach(user);
	if (rcq && rcq != scq)
		rcq->detach(user);
}

void EpBase::release_bindings()
{
	for (Cntr *c : cntr)
		if (c)
			c->hdr.children--;
	if (tx_cq)
		tx_cq->hdr.children--;
	if (rx_cq)
		rx_cq->hdr.children--;
	if (av)
		av->hdr.children--;
	if (eq)
		eq->hdr.children--;
	fi_freeinfo(info);
	info = nullptr;
	dom->hdr.children--;
}

int EpBase::getname(void *addr, size_t *addrlen) const
{
	if (!addrlen)
		return -FI_EINVAL;
	if (!enabled) {
		EFA_WARN(EpCtrl, "fi_getname: the address exists once the endpoint is enabled (fi_enable)");
		return -FI_EOPBADSTATE;
	}
	const size_t have = *addrlen;
	*addrlen = kAddrLen;
	if (have < kAddrLen || !addr)
		return -FI_ETOOSMALL;
	RawAddr a{};
	std::memcpy(a.gid, dom->dev->gid().raw, 16);
	a.qpn = uint16_t(qp.qpn());
	a.qkey = qkey;
	std::memcpy(addr, &a, kAddrLen);
	return 0;
}

int EpBase::getopt_common(int name, void *val, size_t *len) const
{
	switch (name) {
	case FI_OPT_EFA_RNR_RETRY: return put_opt<size_t>(val, len, rnr_retry);
	case FI_OPT_EFA_USE_UNSOLICITED_WRITE_RECV:
		return put_opt<bool>(val, len, enabled ? qp.features().unsolicited_write_recv : use_unsolicited_write_recv);
	default: return -FI_ENOPROTOOPT;
	}
}

int EpBase::setopt_common(int name, const void *val, size_t len)
{
	switch (name) {
	case FI_OPT_EFA_RNR_RETRY: {
		if (len != sizeof(size_t))
			return -FI_EINVAL;
		const size_t v = *static_cast<const size_t *>(val);
		if (enabled) {
			EFA_WARN(EpCtrl, "FI_OPT_EFA_RNR_RETRY must be set before fi_enable");
			return -FI_EINVAL;
		}
		/* As upstream: a device that cannot change it answers -FI_ENOSYS on both fabrics. */
		if (!dom->dev->rnr_retry()) {
			EFA_WARN(EpCtrl, "FI_OPT_EFA_RNR_RETRY: this device cannot change its RNR retry count; the "
				 "device's default applies");
			return -FI_ENOSYS;
		}
		if (v > 7) {
			EFA_WARN(EpCtrl, "FI_OPT_EFA_RNR_RETRY %zu: 0..6 retries, or 7 for retrying forever", v);
			return -FI_EINVAL;
		}
		rnr_retry = uint8_t(v);
		return 0;
	}
	case FI_OPT_CUDA_API_PERMITTED:
	case FI_OPT_SHARED_MEMORY_PERMITTED:
		/* Neither CUDA nor shared memory is used: any answer is honoured. */
		return len == sizeof(bool) ? 0 : -FI_EINVAL;
	case FI_OPT_EFA_USE_UNSOLICITED_WRITE_RECV: {
		if (len != sizeof(bool))
			return -FI_EINVAL;
		const bool v = *static_cast<const bool *>(val);
		if (enabled) {
			EFA_WARN(EpCtrl, "FI_OPT_EFA_USE_UNSOLICITED_WRITE_RECV must be set before fi_enable");
			return -FI_EINVAL;
		}
		if (v && !dom->dev->unsolicited_write_recv()) {
			EFA_WARN(EpCtrl, "FI_OPT_EFA_USE_UNSOLICITED_WRITE_RECV true: this device has no unsolicited "
				 "write receive");
			return -FI_EOPNOTSUPP;
		}
		use_unsolicited_write_recv = v;
		return 0;
	}
	case FI_OPT_EFA_SENDRECV_IN_ORDER_ALIGNED_128_BYTES:
	case FI_OPT_EFA_WRITE_IN_ORDER_ALIGNED_128_BYTES:
		return -FI_EOPNOTSUPP; /* SRD orders no data placement */
	default:
		return -FI_ENOPROTOOPT;
	}
}

/* ------------------------------------------------------------------ fi_ops_cm */

namespace {

int cm_getname(fid_t f, void *addr, size_t *addrlen)
{
	EpBase *ep = ep_base_of(f);
	return ep ? ep->getname(addr, addrlen) : -FI_EINVAL;
}

template <typename... A> int cm_enosys(A...) { return -FI_ENOSYS; }

} // namespace

fi_ops_cm g_ep_cm_ops = {
	.size = sizeof(fi_ops_cm),
	.setname = cm_enosys<fid_t, void *, size_t>,
	.getname = cm_getname,
	.getpeer = cm_enosys<fid_ep *, void *, size_t *>,
	.connect = cm_enosys<fid_ep *, const void *, const void *, size_t>,
	.listen = cm_enosys<fid_pep *>,
	.accept = cm_enosys<fid_ep *, const void *, size_t>,
	.reject = cm_enosys<fid_pep *, fid_t, const void *, size_t>,
	.shutdown = cm_enosys<fid_ep *, uint64_t>,
	.join = cm_enosys<fid_ep *, const void *, uint64_t, fid_mc **, void *>,
};

int ep_no_tx_ctx(fid_ep *, int, fi_tx_attr *, fid_ep **, void *) { return -FI_ENOSYS; }
int ep_no_rx_ctx(fid_ep *, int, fi_rx_attr *, fid_ep **, void *) { return -FI_ENOSYS; }

/* ------------------------------------------------------------------ no tagged, no atomics */

namespace {
template <typename... A> ssize_t enosys(A...) { return -FI_ENOSYS; }
} // namespace

fi_ops_tagged g_enosys_tagged_ops = {
	.size = sizeof(fi_ops_tagged),
	.recv = enosys<fid_ep *, void *, size_t, void *, fi_addr_t, uint64_t, uint64_t, void *>,
	.recvv = enosys<fid_ep *, const iovec *, void **, size_t, fi_addr_t, uint64_t, uint64_t, void *>,
	.recvmsg = enosys<fid_ep *, const fi_msg_tagged *, uint64_t>,
	.send = enosys<fid_ep *, const void *, size_t, void *, fi_addr_t, uint64_t, void *>,
	.sendv = enosys<fid_ep *, const iovec *, void **, size_t, fi_addr_t, uint64_t, void *>,
	.sendmsg = enosys<fid_ep *, const fi_msg_tagged *, uint64_t>,
	.inject = enosys<fid_ep *, const void *, size_t, fi_addr_t, uint64_t>,
	.senddata = enosys<fid_ep *, const void *, size_t, void *, uint64_t, fi_addr_t, uint64_t, void *>,
	.injectdata = enosys<fid_ep *, const void *, size_t, uint64_t, fi_addr_t, uint64_t>,
};

fi_ops_atomic g_enosys_atomic_ops = {
	.size = sizeof(fi_ops_atomic),
	.write = enosys<fid_ep *, const void *, size_t, void *, fi_addr_t, uint64_t, uint64_t, fi_datatype, fi_op, void *>,
	.writev = enosys<fid_ep *, const fi_ioc *, void **, size_t, fi_addr_t, uint64_t, uint64_t, fi_datatype, fi_op,
			 void *>,
	.writemsg = enosys<fid_ep *, const fi_msg_atomic *, uint64_t>,
	.inject = enosys<fid_ep *, const void *, size_t, fi_addr_t, uint64_t, uint64_t, fi_datatype, fi_op>,
	.readwrite = enosys<fid_ep *, const void *, size_t, void *, void *, void *, fi_addr_t, uint64_t, uint64_t,
			    fi_datatype, fi_op, void *>,
	.readwritev = enosys<fid_ep *, const fi_ioc *, void **, size_t, fi_ioc *, void **, size_t, fi_addr_t, uint64_t,
			     uint64_t, fi_datatype, fi_op, void *>,
	.readwritemsg = enosys<fid_ep *, const fi_msg_atomic *, fi_ioc *, void **, size_t, uint64_t>,
	.compwrite = enosys<fid_ep *, const void *, size_t, void *, const void *, void *, void *, void *, fi_addr_t,
			    uint64_t, uint64_t, fi_datatype, fi_op, void *>,
	.compwritev = enosys<fid_ep *, const fi_ioc *, void **, size_t, const fi_ioc *, void **, size_t, fi_ioc *, void **,
			     size_t, fi_addr_t, uint64_t, uint64_t, fi_datatype, fi_op, void *>,
	.compwritemsg = enosys<fid_ep *, const fi_msg_atomic *, const fi_ioc *, void **, size_t, fi_ioc *, void **, size_t,
			       uint64_t>,
	.writevalid = [](fid_ep *, fi_datatype, fi_op, size_t *) { return -FI_EOPNOTSUPP; },
	.readwritevalid = [](fid_ep *, fi_datatype, fi_op, size_t *) { return -FI_EOPNOTSUPP; },
	.compwritevalid = [](fid_ep *, fi_datatype, fi_op, size_t *) { return -FI_EOPNOTSUPP; },
};

} // namespace efa
