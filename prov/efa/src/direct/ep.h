/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The efa-direct endpoint: one SRD QP; one libfabric operation = one work request.
 *
 * Every posted operation takes an Op from a preallocated pool (sized to the QP's queue)
 * and one slot of its CQ; the work request's wr_id is the Op. The device completion
 * (Cq::progress -> Hook::on_wc) turns the Op into a libfabric completion if one is
 * wanted, bumps the bound counters and returns the Op and the slot. Inject operations
 * copy their data inline into the work request, or into the Op's registered bounce
 * slot when the device cannot take it inline (RDMA write without INLINE_WRITE).
 */
#ifndef EFA_DIRECT_EP_H
#define EFA_DIRECT_EP_H

#include "common/lock.h"
#include "ep_base.h"
#include "fork.h"

#include <rdma/fi_rma.h>

#include <mutex>
#include <vector>

namespace efa::direct {

/* Provider-specific op flag (fi_ext_efa.h): processing hint for bursty RDMA writes. */
inline constexpr uint64_t kFlagHighPps = 1ull << 60;

enum class OpKind : uint8_t { Send, Read, Write, Recv };

struct Op {
	void *context;
	uint64_t cq_flags; /* fi_cq_*_entry.flags on success */
	size_t len;
	void *buf;
	uint64_t data;
	fi_addr_t addr; /* destination (transmit) */
	OpKind kind;
	bool completion; /* report a successful completion */
	Op *next_free;
	uint8_t *bounce; /* inject_size bytes in the endpoint's registered bounce buffer */
};

/* A fixed set of Ops with a free list (its own lock: posts and completions race, unless
 * the application serialises them: common/lock.h). */
class OpPool {
public:
	void init(size_t n, uint8_t *bounce, size_t bounce_size);
	Op *get();
	void put(Op *op);
	/* fi_tx/rx_size_left read these while other threads post and complete. */
	size_t in_use() const
	{
		std::lock_guard g(lock_);
		return in_use_;
	}
	size_t left() const
	{
		std::lock_guard g(lock_);
		return ops_.size() - in_use_;
	}
	void set_threading(fi_threading t) { lock_.set_threading(t); }

private:
	std::vector<Op> ops_;
	Op *free_ = nullptr;
	size_t in_use_ = 0;
	mutable DataLock lock_;
};

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
	static constexpr Magic kMagic = Magic::Ep;

	size_t inject_size;
	size_t mtu;
	size_t max_rdma;
	OpPool tx, rx;
	DmaBuffer bounce; /* MADV_DONTFORK: fork.h */
	verbs::Mr bounce_mr;
	DataLock tx_lock, rx_lock; /* common/lock.h */
	Hook hook{this};

	int enable();
	int close();

	/* The data path (direct/msg.cpp, direct/rma.cpp). */
	ssize_t post_tx(OpKind kind, const iovec *iov, void **desc, size_t count, fi_addr_t dest,
			const fi_rma_iov *rma, uint64_t data, void *context, uint64_t flags, bool completion);
	ssize_t post_rx(const iovec *iov, void **desc, size_t count, void *context, bool completion);
};

int ep_open(fid_domain *domain, fi_info *info, fid_ep **ep, void *context);

extern fi_ops_msg g_msg_ops;
extern fi_ops_rma g_rma_ops;

} // namespace efa::direct

#endif
