/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * L1: an SRD queue pair (or, for DGRAM endpoints, a UD one: create_ud()).
 *
 * create_srd() asks efadv_create_qp_ex for the features the caller wants *and* the device
 * reports (unsolicited write receive, inline RDMA write, service level, processing
 * hints), with queues sized as the device allows for them (Device::max_sq_depth /
 * max_rq_depth). Creation falls back only when the error can name a feature (EOPNOTSUPP:
 * the device lacks one; EINVAL: an older rdma-core does not know a field), and only by
 * the feature whose removal makes creation succeed, tried one at a time; a feature the
 * caller requires (QpAttr::require_*) is never dropped: creation fails with a log line
 * that says what to do. What is actually on is recorded. Then it walks the QP to RTS.
 *
 * Posting uses the ibv_qp_ex work-request API. A post with kMore leaves the batch open
 * (ibv_wr_complete is deferred: FI_MORE); the next post without it, or flush(), rings
 * the doorbell for the whole batch. Not thread-safe: the caller serialises posts.
 */
#ifndef EFA_VERBS_QP_H
#define EFA_VERBS_QP_H

#include "common/result.h"
#include "verbs/cq.h"

#include <cstddef>
#include <span>

namespace efa::verbs {

struct QpAttr {
	uint32_t sq_depth = 256;
	uint32_t rq_depth = 256;
	uint32_t max_inline = 0; /* > device inline_size() asks for wide inline + INLINE_WRITE */
	bool unsolicited_write_recv = false;
	/* The endpoint's mode relies on it (efa-direct without FI_RX_CQ_DATA: a remote write
	 * with data must not consume an application's receive): fail rather than drop it. */
	bool require_unsolicited_write_recv = false;
	uint8_t sl = 0;
	bool processing_hints = false;
	uint32_t qkey = 0;
	uint8_t rnr_retry = 7; /* 7 = retry forever; applied when the device can retry */
};

/* What the created QP actually has. */
struct QpFeatures {
	uint32_t sq_depth, rq_depth, max_inline;
	uint16_t max_send_sge, max_recv_sge;
	bool rdma_read, rdma_write;
	bool unsolicited_write_recv;
	bool inline_write;
	bool processing_hints;
	uint8_t sl;
	uint8_t rnr_retry;
};

struct Dest {
	ibv_ah *ah;
	uint32_t qpn;
	uint32_t qkey;
};

/* A scatter/gather element and a piece of inline data, in the layouts of ibv_sge and
 * ibv_data_buf (qp.cpp asserts them): the layers above never name rdma-core's types. */
struct Sge {
	uint64_t addr;
	uint32_t length;
	uint32_t lkey;
};
struct DataBuf {
	void *addr;
	size_t length;
};

enum PostFlags : uint32_t {
	kMore = 1u << 0,     /* more work requests follow: do not ring the doorbell yet */
	kHighPps = 1u << 1,  /* processing hint: bursty, packet-rate sensitive (RDMA writes only, as upstream) */
	kWithImm = 1u << 2,  /* carry immediate data (the CQ data as is, no byte swap: as upstream) */
};

class Qp {
public:
	Qp() = default;
	Qp(Qp &&o) noexcept;
	Qp &operator=(Qp &&o) noexcept;
	~Qp();

	static Result<Qp> create_srd(const Device &dev, const Pd &pd, Cq &send_cq, Cq &recv_cq, const QpAttr &attr);
	/*
	 * An unreliable datagram QP (ibv_create_qp_ex, IBV_QPT_UD: sends and sends with
	 * immediate, inline up to the device's basic inline size; no RNR retry, no RDMA).
	 * Only sq_depth, rq_depth, max_inline and qkey of `attr` apply. Walked to RTS.
	 */
	static Result<Qp> create_ud(const Device &dev, const Pd &pd, Cq &send_cq, Cq &recv_cq, const QpAttr &attr);

	uint32_t qpn() const { return qp_->qp_num; }
	uint32_t qkey() const { return qkey_; }
	const QpFeatures &features() const { return f_; }
	ibv_qp *get() const { return qp_; }

	/* All return 0 or a negative errno; a failure discards the whole open batch. */
	int send(uint64_t wr_id, const Dest &to, std::span<const Sge> sge, uint32_t imm, uint32_t flags);
	int send_inline(uint64_t wr_id, const Dest &to, std::span<const DataBuf> data, uint32_t imm, uint32_t flags);
	int write(uint64_t wr_id, const Dest &to, std::span<const Sge> sge, uint32_t rkey, uint64_t raddr,
		  uint32_t imm, uint32_t flags);
	int write_inline(uint64_t wr_id, const Dest &to, std::span<const DataBuf> data, uint32_t rkey,
			 uint64_t raddr, uint32_t imm, uint32_t flags);
	int read(uint64_t wr_id, const Dest &to, std::span<const Sge> sge, uint32_t rkey, uint64_t raddr,
		 uint32_t flags);
	/* Rings the doorbell for an open batch (no-op when none is open). */
	int flush();
	bool batch_open() const { return started_; }

	int post_recv(uint64_t wr_id, std::span<const Sge> sge);

	/* Changes the RNR retry count (RTS -> RTS). */
	int set_rnr_retry(uint8_t retry);

private:
	void begin(uint64_t wr_id);
	/* begin() and the send opcode (with immediate data under kWithImm). */
	void begin_send(uint64_t wr_id, uint32_t imm, uint32_t flags);
	int end(const Dest &to, uint32_t flags, bool hints_apply = false);
	int to_rts(uint8_t rnr_retry);

	const Api *api_ = nullptr;
	ibv_qp *qp_ = nullptr;
	ibv_qp_ex *qpx_ = nullptr;
	efadv_qp *dvqp_ = nullptr;
	uint32_t qkey_ = 0;
	bool started_ = false;
	bool rnr_cap_ = false;
	QpFeatures f_{};
};

static_assert(sizeof(Sge) == sizeof(ibv_sge) && offsetof(Sge, addr) == offsetof(ibv_sge, addr) &&
	      offsetof(Sge, length) == offsetof(ibv_sge, length) && offsetof(Sge, lkey) == offsetof(ibv_sge, lkey));
static_assert(sizeof(DataBuf) == sizeof(ibv_data_buf) && offsetof(DataBuf, addr) == offsetof(ibv_data_buf, addr) &&
	      offsetof(DataBuf, length) == offsetof(ibv_data_buf, length));
inline const ibv_sge *as_ibv(const Sge *s) { return reinterpret_cast<const ibv_sge *>(s); }
inline const ibv_data_buf *as_ibv(const DataBuf *d) { return reinterpret_cast<const ibv_data_buf *>(d); }

/* Inline: every packet the provider sends takes these (performance.md). */
inline void Qp::begin(uint64_t wr_id)
{
	if (!started_) {
		ibv_wr_start(qpx_);
		started_ = true;
	}
	qpx_->wr_id = wr_id;
	qpx_->wr_flags = IBV_SEND_SIGNALED;
}

inline int Qp::flush()
{
	if (!started_)
		return 0;
	started_ = false;
	return -ibv_wr_complete(qpx_);
}

inline int Qp::end(const Dest &to, uint32_t flags, bool hints_apply)
{
	ibv_wr_set_ud_addr(qpx_, to.ah, to.qpn, to.qkey);
	/* The burst hint is for RDMA writes, the only operation upstream hints; elsewhere the
	 * flag is ignored. */
	if (hints_apply && (flags & kHighPps) && dvqp_)
		efadv_wr_set_processing_hints(dvqp_, EFADV_WR_PROCESSING_HINT_BURST_PPS_SENSITIVE);
	if (flags & kMore)
		return 0;
	return flush();
}

inline void Qp::begin_send(uint64_t wr_id, uint32_t imm, uint32_t flags)
{
	begin(wr_id);
	if (flags & kWithImm)
		ibv_wr_send_imm(qpx_, imm);
	else
		ibv_wr_send(qpx_);
}

inline int Qp::send(uint64_t wr_id, const Dest &to, std::span<const Sge> sge, uint32_t imm, uint32_t flags)
{
	begin_send(wr_id, imm, flags);
	ibv_wr_set_sge_list(qpx_, sge.size(), as_ibv(sge.data()));
	return end(to, flags);
}

} // namespace efa::verbs

#endif
