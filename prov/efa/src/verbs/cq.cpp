/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
#include "verbs/cq.h"

#include "log.h"

#include <arpa/inet.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace efa::verbs {

Cq::Cq(Cq &&o) noexcept { *this = std::move(o); }

Cq &Cq::operator=(Cq &&o) noexcept
{
	if (this != &o) {
		reset();
		api_ = o.api_;
		cq_ = std::exchange(o.cq_, nullptr);
		dv_ = std::exchange(o.dv_, nullptr);
		channel_ = std::exchange(o.channel_, nullptr);
		sgid_ = o.sgid_;
		unsol_ = o.unsol_;
		events_ = std::exchange(o.events_, 0);
	}
	return *this;
}

Cq::~Cq() { reset(); }

void Cq::reset()
{
	if (!cq_)
		return;
	if (events_)
		api_->ack_cq_events(base(), events_);
	int ret = api_->destroy_cq(base());
	if (ret)
		EFA_WARN(Cq, "ibv_destroy_cq: %s", strerror(ret));
	cq_ = nullptr;
	dv_ = nullptr;
	events_ = 0;
}

Result<Cq> Cq::create(const Device &dev, const CqAttr &a)
{
	const Api &api = dev.api();
	Cq cq;
	cq.api_ = &api;
	cq.channel_ = a.channel ? a.channel->get() : nullptr;

	ibv_cq_init_attr_ex init{};
	init.cqe = a.depth;
	init.channel = cq.channel_;
	init.wc_flags = IBV_WC_STANDARD_FLAGS; /* what EFA requires */

	efadv_cq_init_attr_cur efa{};
	if (dev.cq_with_sgid())
		efa.wc_flags |= EFADV_WC_EX_WITH_SGID;
	if (a.unsolicited && dev.unsolicited_write_recv())
		efa.wc_flags |= EFADV_WC_EX_WITH_IS_UNSOLICITED;

	errno = 0;
	if (api.efadv_create_cq) {
		cq.cq_ = api.efadv_create_cq(dev.ctx(), &init, reinterpret_cast<efadv_cq_init_attr *>(&efa), sizeof efa);
		if (cq.cq_ && api.efadv_cq_from_ibv_cq_ex)
			cq.dv_ = api.efadv_cq_from_ibv_cq_ex(cq.cq_);
		if (cq.cq_ && !cq.dv_) {
			/* Without the efadv CQ the extensions cannot be read. */
			efa.wc_flags = 0;
		}
	}
	if (!cq.cq_) {
		/* Old kernel module or rdma-core: a plain extended CQ, without efadv extensions. */
		int err = errno;
		EFA_INFO(Cq, "%s: efadv_create_cq %s (%s); using ibv_create_cq_ex without source GID / "
			 "unsolicited receive reporting",
			 dev.name().c_str(), api.efadv_create_cq ? "failed" : "unavailable",
			 strerror(err ? err : EOPNOTSUPP));
		efa.wc_flags = 0;
		errno = 0;
		cq.cq_ = ibv_create_cq_ex(dev.ctx(), &init);
		if (!cq.cq_) {
			err = errno ? errno : ENOMEM;
			EFA_WARN(Cq, "%s: cannot create a CQ of %u entries: %s", dev.name().c_str(), a.depth, strerror(err));
			return Err{-err};
		}
	}
	cq.sgid_ = efa.wc_flags & EFADV_WC_EX_WITH_SGID;
	cq.unsol_ = efa.wc_flags & EFADV_WC_EX_WITH_IS_UNSOLICITED;
	return cq;
}

void Cq::read(Wc &wc) const
{
	wc.wr_id = cq_->wr_id;
	wc.status = cq_->status;
	wc.opcode = ibv_wc_read_opcode(cq_);
	wc.qp_num = ibv_wc_read_qp_num(cq_);
	if (wc.status == IBV_WC_SUCCESS && !(wc.opcode & IBV_WC_RECV)) {
		/* A successful send, write or read: what its owner reads is above (each field
		 * is a call into the provider, and these are half of all completions). */
		wc.vendor_err = 0;
		wc.byte_len = 0;
		wc.has_imm = false;
		wc.imm = 0;
		wc.src_qp = 0;
		wc.slid = Wc::kNoSlid;
		wc.unsolicited = false;
		return;
	}
	wc.vendor_err = ibv_wc_read_vendor_err(cq_);
	wc.byte_len = ibv_wc_read_byte_len(cq_);
	unsigned flags = ibv_wc_read_wc_flags(cq_);
	wc.has_imm = flags & IBV_WC_WITH_IMM;
	wc.imm = wc.has_imm ? ibv_wc_read_imm_data(cq_) : 0; /* as upstream: the CQ data unconverted */
	wc.src_qp = ibv_wc_read_src_qp(cq_);
	wc.slid = uint16_t(ibv_wc_read_slid(cq_));
	wc.unsolicited = unsol_ && efadv_wc_is_unsolicited_cur(dv_);
}

bool Cq::source_gid(ibv_gid *gid) const { return sgid_ && efadv_wc_read_sgid(dv_, gid) == 0; }

int Cq::arm()
{
	int ret = ibv_req_notify_cq(base(), 0);
	return -ret;
}

int Cq::get_event()
{
	ibv_cq *cq;
	void *ctx;
	if (api_->get_cq_event(channel_, &cq, &ctx))
		return -(errno ? errno : EIO);
	/* Acknowledged in batches (and at destruction): ack_cq_events takes a lock. */
	if (++events_ >= 256) {
		api_->ack_cq_events(cq, events_);
		events_ = 0;
	}
	return 0;
}

} // namespace efa::verbs
