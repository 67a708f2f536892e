/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * What the endpoint kinds (efa-direct, the efa fabric's RDM endpoint, FI_EP_DGRAM) share:
 * the libfabric struct, bindings to an AV, CQs, counters and an EQ with their reference
 * counts, the QP (SRD, or UD for DGRAM) and its address, and the checks of fi_enable.
 *
 * An endpoint kind derives from EpBase (first, single, non-virtual inheritance: the
 * fid_ep stays at offset 0) and names its own Magic, so fid_to<> tells the kinds apart.
 */
#ifndef EFA_EP_BASE_H
#define EFA_EP_BASE_H

#include "av.h"
#include "cntr.h"
#include "cq.h"
#include "verbs/qp.h"

#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_tagged.h>

#include <cstring>

namespace efa {

enum CntrIdx { kCntrSend, kCntrRecv, kCntrRead, kCntrWrite, kCntrRemoteRead, kCntrRemoteWrite, kCntrCount };

struct EpBase {
	fid_ep ep; /* first */
	ObjHeader hdr;

	Domain *dom = nullptr;
	fi_info *info = nullptr;
	Av *av = nullptr;
	Eq *eq = nullptr;
	Cq *tx_cq = nullptr;
	Cq *rx_cq = nullptr;
	bool tx_selective = false;
	bool rx_selective = false;
	Cntr *cntr[kCntrCount] = {};

	bool enabled = false;
	uint8_t rnr_retry = 7;
	/* FI_OPT_EFA_USE_UNSOLICITED_WRITE_RECV (and FI_EFA_USE_UNSOLICITED_WRITE_RECV) */
	bool use_unsolicited_write_recv = false;
	uint64_t tx_op_flags = 0;
	uint64_t rx_op_flags = 0;
	uint32_t qkey = 0;
	verbs::Qp qp;

	bool tx_completion(uint64_t flags) const { return !tx_selective || (flags & FI_COMPLETION); }
	bool rx_completion(uint64_t flags) const { return !rx_selective || (flags & FI_COMPLETION); }
	/* The CQs the QP uses: the transmit CQ doubles as receive CQ and vice versa. */
	Cq *send_cq() const { return tx_cq ? tx_cq : rx_cq; }
	Cq *recv_cq() const { return rx_cq ? rx_cq : tx_cq; }

	/* fi_ep_bind of an AV, CQ, counter or EQ (before fi_enable). */
	int bind(fid_t bf, uint64_t flags);
	/* fi_enable's checks: an AV, and the CQs the capabilities need. */
	int check_bindings() const;
	/* After the QP exists: the CQs deliver its completions to `user`, and counters
	 * progress those CQs. */
	void attach(CqUser *user);
	void detach(CqUser *user);
	/* fi_close: drops the references to bound objects and to the domain. */
	void release_bindings();
	/* fi_getname. */
	int getname(void *addr, size_t *addrlen) const;
	/*
	 * fi_getopt / fi_setopt at FI_OPT_ENDPOINT of the options the SRD endpoint kinds
	 * (efa-direct, the efa fabric) treat alike: FI_OPT_EFA_RNR_RETRY,
	 * FI_OPT_EFA_USE_UNSOLICITED_WRITE_RECV (the checks every kind makes),
	 * FI_OPT_CUDA_API_PERMITTED, FI_OPT_SHARED_MEMORY_PERMITTED and the 128-byte in-order
	 * options. -FI_ENOPROTOOPT for any other: the kind's handler answers its own options
	 * (and adds its own rules) before calling these.
	 */
	int getopt_common(int name, void *val, size_t *len) const;
	int setopt_common(int name, const void *val, size_t len);
	/* Bumps a bound counter. */
	void count(CntrIdx i, bool ok) const
	{
		if (Cntr *c = cntr[i])
			ok ? c->inc() : c->inc_err();
	}
};

/* The endpoint behind `f`, of either kind, or null. */
EpBase *ep_base_of(fid_t f);

/* A random QKEY for a new endpoint: non-zero, below the privileged range. */
uint32_t random_qkey();

/* The tagged and atomic operations of endpoints without them (efa-direct, DGRAM): every
 * call is -FI_ENOSYS; the atomic valid queries are -FI_EOPNOTSUPP. */
/* fi_ops_cm of every endpoint kind: fi_getname; no connections (-FI_ENOSYS). */
extern fi_ops_cm g_ep_cm_ops;
/* fi_tx_context / fi_rx_context of every endpoint kind: no scalable endpoints (-FI_ENOSYS). */
int ep_no_tx_ctx(fid_ep *, int, fi_tx_attr *, fid_ep **, void *);
int ep_no_rx_ctx(fid_ep *, int, fi_rx_attr *, fid_ep **, void *);

/* Writes option value v for fi_getopt (-FI_ETOOSMALL when *len is short). */
template <typename T> int put_opt(void *val, size_t *len, T v)
{
	if (*len < sizeof(T))
		return -FI_ETOOSMALL;
	std::memcpy(val, &v, sizeof v);
	*len = sizeof(T);
	return 0;
}

/* fi_tx_size_left / fi_rx_size_left of endpoint kind T: the entries `free(T &)` counts,
 * or -FI_EOPBADSTATE for an endpoint not enabled (or not of kind T). */
template <typename T, typename F> ssize_t size_left(fid_ep *f, F &&free)
{
	T *ep = fid_to<T>(&f->fid);
	return ep && ep->enabled ? ssize_t(free(*ep)) : -FI_EOPBADSTATE;
}

extern fi_ops_tagged g_enosys_tagged_ops;
extern fi_ops_atomic g_enosys_atomic_ops;

} // namespace efa

#endif
