/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * L1: an extended completion queue. Created with efadv_create_cq and the efadv work
 * completion flags the device supports (source GID for unknown senders; unsolicited
 * receives when asked), falling back to ibv_create_cq_ex, with a log line, when efadv
 * refuses. poll() iterates completions through rdma-core's inline poll ops, so it runs
 * unchanged on hardware and on the software device.
 */
#ifndef EFA_VERBS_CQ_H
#define EFA_VERBS_CQ_H

#include "common/result.h"
#include "verbs/resources.h"

namespace efa::verbs {

/* One work completion, decoded. A successful send, write or read carries wr_id, status,
 * opcode and qp_num only (the rest reads 0, slid kNoSlid); a receive or a failed
 * completion carries every field. */
struct Wc {
	uint64_t wr_id;
	ibv_wc_status status;
	uint32_t vendor_err; /* EFA completion status (efa_errno.h) */
	ibv_wc_opcode opcode;
	uint32_t byte_len;
	uint32_t imm;        /* the 32 bits as posted (no byte swap either way, as upstream); valid when has_imm */
	uint32_t qp_num;
	uint32_t src_qp;
	uint16_t slid;       /* sender's AHN in this PD, kNoSlid when unknown */
	bool has_imm;
	bool unsolicited;
	static constexpr uint16_t kNoSlid = 0xffff; /* what the EFA device reports without an AH */
	bool is_recv() const { return opcode & IBV_WC_RECV; }
	/* The device has an address handle for the sender: slid names it. */
	bool src_known() const { return slid != kNoSlid; }
	bool ok() const { return status == IBV_WC_SUCCESS; }
	/* An RDMA write with immediate data that arrived (the target's completion). */
	bool remote_write_imm() const { return opcode == IBV_WC_RECV_RDMA_WITH_IMM; }
};

struct CqAttr {
	uint32_t depth = 1024;
	bool unsolicited = false; /* want efadv_wc_is_unsolicited() */
	const CompChannel *channel = nullptr;
};

class Cq {
public:
	Cq() = default;
	Cq(Cq &&o) noexcept;
	Cq &operator=(Cq &&o) noexcept;
	~Cq();

	static Result<Cq> create(const Device &dev, const CqAttr &attr);

	ibv_cq_ex *get() const { return cq_; }
	ibv_cq *base() const { return ibv_cq_ex_to_cq(cq_); }
	uint32_t depth() const { return uint32_t(cq_->cqe); }
	/* Whether efadv's extensions are on (false after the ibv_create_cq_ex fallback). */
	bool efadv() const { return dv_ != nullptr; }
	bool sgid_enabled() const { return sgid_; }
	bool unsolicited_enabled() const { return unsol_; }

	/*
	 * Calls fn(const Wc&) for up to `max` completions. Returns how many, or a negative
	 * error. Inside fn, source_gid() reads the GID of a sender the PD holds no AH for.
	 */
	template <typename F> int poll(int max, F &&fn)
	{
		ibv_poll_cq_attr attr{};
		int ret = ibv_start_poll(cq_, &attr);
		/* EINVAL: a completion of a QP destroyed since, which rdma-core consumed
		 * (the CQ is shared with endpoints closed since): poll on. */
		for (uint32_t skipped = 0; ret == EINVAL && skipped < depth(); skipped++)
			ret = ibv_start_poll(cq_, &attr);
		if (ret)
			return ret == ENOENT || ret == EINVAL ? 0 : -ret;
		int n = 0;
		do {
			Wc wc;
			read(wc);
			fn(static_cast<const Wc &>(wc));
			n++;
		} while (n < max && ibv_next_poll(cq_) == 0);
		ibv_end_poll(cq_);
		return n;
	}
	bool source_gid(ibv_gid *gid) const;

	/* Requests an event on the channel for the next completion. */
	int arm();
	/* Consumes one event from the channel (it must be readable, or this blocks). */
	int get_event();

private:
	void read(Wc &wc) const;
	void reset();

	const Api *api_ = nullptr;
	ibv_cq_ex *cq_ = nullptr;
	efadv_cq *dv_ = nullptr;
	ibv_comp_channel *channel_ = nullptr;
	bool sgid_ = false;
	bool unsol_ = false;
	uint32_t events_ = 0;
};

} // namespace efa::verbs

#endif
