/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The FI_EP_DGRAM endpoint: one UD QP; one libfabric operation = one datagram (one work
 * request), as upstream's efa_dgram endpoint.
 *
 * FI_MSG_PREFIX: every send and receive buffer starts with kMsgPrefixSize (40) bytes of
 * the application's that the provider owns. A send skips them (the payload is what
 * follows); a receive posts them to the device, which writes there the GRH a UD receive
 * starts with, so the payload lands right after the prefix and a completion's length
 * counts the prefix too. Unreliable and unordered: a send completes once the datagram is
 * on the wire, delivered or not; a datagram that finds no receive is dropped.
 *
 * Operations take an Op (direct::Op, from a pool sized to the QP's queue) and a CQ slot,
 * as on efa-direct; the wr_id is the Op. Injects always go inline (inject_size is the
 * device's basic inline size).
 */
#ifndef EFA_DGRAM_EP_H
#define EFA_DGRAM_EP_H

#include "direct/ep.h"

#include <mutex>

namespace efa::dgram {

using direct::Op;
using direct::OpKind;
using direct::OpPool;

struct Ep;

/* Receives the device completions of the endpoint's QP from its CQs. */
class Hook : public CqUser {
public:
	explicit Hook(Ep *ep) : ep_(ep) {}
	uint32_t qpn() const override;
	void on_wc(const verbs::Wc &wc, Cq &cq) override;

private:
	Ep *ep_;
};

struct Ep : EpBase {
	static constexpr Magic kMagic = Magic::DgramEp;

	size_t inject_size; /* payload bytes, prefix excluded */
	size_t mtu;	    /* largest payload */
	size_t prefix;	    /* ep_attr->msg_prefix_size */
	OpPool tx, rx;
	DataLock tx_lock, rx_lock; /* common/lock.h */
	Hook hook{this};

	int enable();
	int close();

	/* The data path (dgram/post.cpp). `iov` includes the prefix. */
	ssize_t post_tx(const iovec *iov, void **desc, size_t count, fi_addr_t dest, uint64_t data, void *context,
			uint64_t flags, bool completion);
	ssize_t post_rx(const iovec *iov, void **desc, size_t count, void *context, bool completion);
};

int ep_open(fid_domain *domain, fi_info *info, fid_ep **ep, void *context);

extern fi_ops_msg g_msg_ops;

} // namespace efa::dgram

#endif
