/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
#include "verbs/qp.h"

#include "log.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstddef>
#include <cerrno>
#include <cstring>
#include <utility>

namespace efa::verbs {

Qp::Qp(Qp &&o) noexcept { *this = std::move(o); }

Qp &Qp::operator=(Qp &&o) noexcept
{
	if (this != &o) {
		if (qp_)
			api_->destroy_qp(qp_);
		api_ = o.api_;
		qp_ = std::exchange(o.qp_, nullptr);
		qpx_ = std::exchange(o.qpx_, nullptr);
		dvqp_ = std::exchange(o.dvqp_, nullptr);
		qkey_ = o.qkey_;
		started_ = std::exchange(o.started_, false);
		rnr_cap_ = o.rnr_cap_;
		f_ = o.f_;
	}
	return *this;
}

Qp::~Qp()
{
	if (!qp_)
		return;
	if (started_)
		ibv_wr_abort(qpx_);
	int ret = api_->destroy_qp(qp_);
	if (ret)
		EFA_WARN(EpCtrl, "ibv_destroy_qp: %s", strerror(ret));
}

namespace {

/* The optional features of an SRD QP, in the order a fallback tries them. */
enum Feature { kHints, kSl, kInlineWrite, kUnsolicited, kNumFeatures };

const char *feature_name(int f)
{
	switch (f) {
	case kHints: return "processing hints";
	case kSl: return "the requested service level (using sl 0)";
	case kInlineWrite: return "inline RDMA write (wide inline)";
	default: return "unsolicited write receive";
	}
}

bool has(const efadv_qp_init_attr_cur &e, int f)
{
	switch (f) {
	case kHints: return e.wr_flags & EFADV_WR_EX_WITH_PROCESSING_HINTS;
	case kSl: return e.sl != 0;
	case kInlineWrite: return e.flags & EFADV_QP_FLAGS_INLINE_WRITE;
	default: return e.flags & EFADV_QP_FLAGS_UNSOLICITED_WRITE_RECV;
	}
}

void drop(efadv_qp_init_attr_cur &e, int f)
{
	switch (f) {
	case kHints: e.wr_flags &= ~uint64_t(EFADV_WR_EX_WITH_PROCESSING_HINTS); break;
	case kSl: e.sl = 0; break;
	case kInlineWrite: e.flags &= ~uint16_t(EFADV_QP_FLAGS_INLINE_WRITE); break;
	default: e.flags &= ~uint16_t(EFADV_QP_FLAGS_UNSOLICITED_WRITE_RECV); break;
	}
}

} // namespace

Result<Qp> Qp::create_srd(const Device &dev, const Pd &pd, Cq &scq, Cq &rcq, const QpAttr &want)
{
	const Api &api = dev.api();
	const efadv_device_attr_cur &ea = dev.efa();

	ibv_qp_init_attr_ex base{};
	base.send_cq = scq.base();
	base.recv_cq = rcq.base();
	base.cap.max_send_sge = ea.max_sq_sge;
	base.cap.max_recv_sge = ea.max_rq_sge;
	base.qp_type = IBV_QPT_DRIVER;
	base.sq_sig_all = 1;
	base.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	base.pd = pd.get();
	base.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM;
	if (dev.rdma_read())
		base.send_ops_flags |= IBV_QP_EX_WITH_RDMA_READ;
	if (dev.rdma_write())
		base.send_ops_flags |= IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM;

	/* Ask only for what the device reports. */
	efadv_qp_init_attr_cur efa{};
	efa.driver_qp_type = EFADV_QP_DRIVER_TYPE_SRD;
	const uint32_t inline_max = std::min<uint32_t>(want.max_inline, dev.inline_size_ex());
	if (want.max_inline > inline_max)
		EFA_INFO(EpCtrl, "%s: inline size %u exceeds the device's %u", dev.name().c_str(), want.max_inline,
			 inline_max);
	if (inline_max > dev.inline_size() && dev.rdma_write())
		efa.flags |= EFADV_QP_FLAGS_INLINE_WRITE;
	if (want.unsolicited_write_recv || want.require_unsolicited_write_recv) {
		if (dev.unsolicited_write_recv() && rcq.unsolicited_enabled()) {
			efa.flags |= EFADV_QP_FLAGS_UNSOLICITED_WRITE_RECV;
		} else {
			const char *why = dev.unsolicited_write_recv() ? "the receive CQ cannot report it" : "device lacks it";
			if (want.require_unsolicited_write_recv) {
				EFA_WARN(EpCtrl, "%s: unsolicited write receive not available (%s), and this endpoint relies "
					 "on it (a remote write with data would consume one of its receives): ask for "
					 "FI_RX_CQ_DATA in the mode hints",
					 dev.name().c_str(), why);
				return Err{-EOPNOTSUPP};
			}
			EFA_INFO(EpCtrl, "%s: unsolicited write receive not available (%s)", dev.name().c_str(), why);
		}
	}
	efa.sl = want.sl;
	if (want.processing_hints && api.efadv_qp_from_ibv_qp_ex)
		efa.wr_flags |= EFADV_WR_EX_WITH_PROCESSING_HINTS;
	const bool required[kNumFeatures] = {false, false, false, want.require_unsolicited_write_recv};

	/* The queues as deep as asked, or as the device allows for these features. */
	auto sized = [&](const efadv_qp_init_attr_cur &e) {
		ibv_qp_init_attr_ex a = base;
		const bool iw = e.flags & EFADV_QP_FLAGS_INLINE_WRITE;
		a.cap.max_inline_data = iw ? inline_max : std::min<uint32_t>(inline_max, dev.inline_size());
		a.cap.max_send_wr = std::min(want.sq_depth, dev.max_sq_depth(iw, a.cap.max_inline_data, a.cap.max_send_sge));
		a.cap.max_recv_wr = std::min(want.rq_depth, dev.max_rq_depth(a.cap.max_recv_sge));
		return a;
	};
	ibv_qp_init_attr_ex init{};
	auto attempt = [&](const efadv_qp_init_attr_cur &e) -> ibv_qp * {
		efadv_qp_init_attr_cur copy = e;
		init = sized(e);
		errno = 0;
		return api.efadv_create_qp_ex(dev.ctx(), &init, reinterpret_cast<efadv_qp_init_attr *>(&copy), sizeof copy);
	};

	ibv_qp *qp = attempt(efa);
	int err = qp ? 0 : (errno ? errno : EINVAL);
	if (!qp && (err == EOPNOTSUPP || err == EINVAL)) {
		/*
		 * The error may name a feature (the device lacks it, or an older rdma-core does
		 * not know its field). Find which: drop one optional feature at a time; the
		 * first whose absence lets creation succeed was refused. Only if no single one
		 * does, drop every optional feature.
		 */
		for (int f = 0; f < kNumFeatures && !qp; f++) {
			if (!has(efa, f) || required[f])
				continue;
			efadv_qp_init_attr_cur without = efa;
			drop(without, f);
			if ((qp = attempt(without))) {
				EFA_INFO(EpCtrl, "%s: QP creation refused %s (%s); the QP goes without it", dev.name().c_str(),
					 feature_name(f), strerror(err));
				efa = without;
			}
		}
		if (!qp) {
			efadv_qp_init_attr_cur without = efa;
			std::string dropped;
			for (int f = 0; f < kNumFeatures; f++)
				if (has(efa, f) && !required[f]) {
					drop(without, f);
					dropped += std::string(dropped.empty() ? "" : ", ") + feature_name(f);
				}
			if (!dropped.empty() && (qp = attempt(without))) {
				EFA_INFO(EpCtrl, "%s: QP creation refused %s together (%s); the QP goes without them",
					 dev.name().c_str(), dropped.c_str(), strerror(err));
				efa = without;
			}
		}
	}
	if (!qp) {
		if (want.require_unsolicited_write_recv && has(efa, kUnsolicited))
			EFA_WARN(EpCtrl, "%s: efadv_create_qp_ex failed: %s; this endpoint relies on unsolicited write "
				 "receive (a remote write with data must not consume one of its receives): ask for "
				 "FI_RX_CQ_DATA in the mode hints if the device refuses it",
				 dev.name().c_str(), strerror(err));
		else
			EFA_WARN(EpCtrl, "%s: efadv_create_qp_ex failed: %s (send queue %u, receive queue %u, inline %u)",
				 dev.name().c_str(), strerror(err), init.cap.max_send_wr, init.cap.max_recv_wr,
				 init.cap.max_inline_data);
		return Err{-err};
	}

	Qp q;
	q.api_ = &api;
	q.qp_ = qp;
	q.qpx_ = api.qp_to_qp_ex(qp);
	q.qkey_ = want.qkey;
	q.rnr_cap_ = dev.rnr_retry();
	if (!q.qpx_) {
		EFA_WARN(EpCtrl, "%s: the QP has no extended send API", dev.name().c_str());
		return Err{-EOPNOTSUPP};
	}
	if (efa.wr_flags & EFADV_WR_EX_WITH_PROCESSING_HINTS) {
		q.dvqp_ = api.efadv_qp_from_ibv_qp_ex(q.qpx_);
		if (!q.dvqp_)
			efa.wr_flags = 0;
	}
	QpFeatures &f = q.f_;
	f.sq_depth = init.cap.max_send_wr;
	f.rq_depth = init.cap.max_recv_wr;
	f.max_inline = std::min<uint32_t>(init.cap.max_inline_data, inline_max);
	f.max_send_sge = uint16_t(init.cap.max_send_sge);
	f.max_recv_sge = uint16_t(init.cap.max_recv_sge);
	f.rdma_read = init.send_ops_flags & IBV_QP_EX_WITH_RDMA_READ;
	f.rdma_write = init.send_ops_flags & IBV_QP_EX_WITH_RDMA_WRITE;
	f.unsolicited_write_recv = efa.flags & EFADV_QP_FLAGS_UNSOLICITED_WRITE_RECV;
	f.inline_write = efa.flags & EFADV_QP_FLAGS_INLINE_WRITE;
	f.processing_hints = q.dvqp_ != nullptr;
	f.sl = efa.sl;
	f.rnr_retry = q.rnr_cap_ ? want.rnr_retry : 0;
	if (int ret = q.to_rts(want.rnr_retry))
		return Err{ret};
	EFA_DBG(EpCtrl, "%s: SRD QP %u: sq %u rq %u inline %u%s%s%s sl %u rnr_retry %u", dev.name().c_str(), q.qpn(),
		f.sq_depth, f.rq_depth, f.max_inline, f.unsolicited_write_recv ? ", unsolicited write recv" : "",
		f.inline_write ? ", inline write" : "", f.processing_hints ? ", hints" : "", f.sl, f.rnr_retry);
	return q;
}

Result<Qp> Qp::create_ud(const Device &dev, const Pd &pd, Cq &scq, Cq &rcq, const QpAttr &want)
{
	const Api &api = dev.api();
	const efadv_device_attr_cur &ea = dev.efa();
	ibv_qp_init_attr_ex init{};
	init.send_cq = scq.base();
	init.recv_cq = rcq.base();
	init.cap.max_send_wr = std::min(want.sq_depth, ea.max_sq_wr);
	init.cap.max_recv_wr = std::min(want.rq_depth, ea.max_rq_wr);
	init.cap.max_send_sge = ea.max_sq_sge;
	init.cap.max_recv_sge = ea.max_rq_sge;
	/* UD work requests have no wide form: inline up to the basic size. */
	init.cap.max_inline_data = std::min<uint32_t>(want.max_inline, dev.inline_size());
	init.qp_type = IBV_QPT_UD;
	init.sq_sig_all = 1;
	/* With the send-ops mask, ibv_create_qp_ex goes to the device's create_qp_ex op (the
	 * extended send API); EFA creates UD QPs there, SRD ones only through efadv. */
	init.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	init.pd = pd.get();
	init.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM;
	errno = 0;
	ibv_qp *qp = ibv_create_qp_ex(dev.ctx(), &init);
	if (!qp) {
		const int err = errno ? errno : EINVAL;
		EFA_WARN(EpCtrl, "%s: creating a UD queue pair (ibv_create_qp_ex) failed: %s", dev.name().c_str(),
			 strerror(err));
		return Err{-err};
	}
	Qp q;
	q.api_ = &api;
	q.qp_ = qp;
	q.qpx_ = api.qp_to_qp_ex(qp);
	q.qkey_ = want.qkey;
	q.rnr_cap_ = false; /* RNR retry is an SRD attribute: UD drops what finds no receive */
	if (!q.qpx_) {
		EFA_WARN(EpCtrl, "%s: the UD QP has no extended send API", dev.name().c_str());
		return Err{-EOPNOTSUPP};
	}
	QpFeatures &f = q.f_;
	f.sq_depth = init.cap.max_send_wr;
	f.rq_depth = init.cap.max_recv_wr;
	f.max_inline = std::min<uint32_t>(init.cap.max_inline_data, dev.inline_size());
	f.max_send_sge = uint16_t(init.cap.max_send_sge);
	f.max_recv_sge = uint16_t(init.cap.max_recv_sge);
	if (int ret = q.to_rts(0))
		return Err{ret};
	EFA_DBG(EpCtrl, "%s: UD QP %u: sq %u rq %u inline %u", dev.name().c_str(), q.qpn(), f.sq_depth, f.rq_depth,
		f.max_inline);
	return q;
}

int Qp::to_rts(uint8_t rnr_retry)
{
	ibv_qp_attr a{};
	a.qp_state = IBV_QPS_INIT;
	a.pkey_index = 0;
	a.port_num = 1;
	a.qkey = qkey_;
	int ret = api_->modify_qp(qp_, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY);
	if (!ret) {
		a = ibv_qp_attr{};
		a.qp_state = IBV_QPS_RTR;
		ret = api_->modify_qp(qp_, &a, IBV_QP_STATE);
	}
	if (!ret) {
		a = ibv_qp_attr{};
		a.qp_state = IBV_QPS_RTS;
		a.sq_psn = 0;
		int mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
		if (rnr_cap_) {
			a.rnr_retry = std::min<uint8_t>(rnr_retry, 7);
			mask |= IBV_QP_RNR_RETRY;
		}
		ret = api_->modify_qp(qp_, &a, mask);
	}
	if (ret) {
		EFA_WARN(EpCtrl, "QP %u: ibv_modify_qp to RTS failed: %s", qp_->qp_num, strerror(ret));
		return -ret;
	}
	return 0;
}

int Qp::set_rnr_retry(uint8_t retry)
{
	if (!rnr_cap_)
		return -EOPNOTSUPP;
	ibv_qp_attr a{};
	a.qp_state = IBV_QPS_RTS;
	a.rnr_retry = std::min<uint8_t>(retry, 7);
	int ret = api_->modify_qp(qp_, &a, IBV_QP_STATE | IBV_QP_RNR_RETRY);
	if (!ret)
		f_.rnr_retry = a.rnr_retry;
	return -ret;
}

int Qp::send_inline(uint64_t wr_id, const Dest &to, std::span<const DataBuf> data, uint32_t imm, uint32_t flags)
{
	begin_send(wr_id, imm, flags);
	ibv_wr_set_inline_data_list(qpx_, data.size(), as_ibv(data.data()));
	return end(to, flags);
}

int Qp::write(uint64_t wr_id, const Dest &to, std::span<const Sge> sge, uint32_t rkey, uint64_t raddr,
	      uint32_t imm, uint32_t flags)
{
	begin(wr_id);
	if (flags & kWithImm)
		ibv_wr_rdma_write_imm(qpx_, rkey, raddr, imm);
	else
		ibv_wr_rdma_write(qpx_, rkey, raddr);
	ibv_wr_set_sge_list(qpx_, sge.size(), as_ibv(sge.data()));
	return end(to, flags, true);
}

int Qp::write_inline(uint64_t wr_id, const Dest &to, std::span<const DataBuf> data, uint32_t rkey,
		     uint64_t raddr, uint32_t imm, uint32_t flags)
{
	begin(wr_id);
	if (flags & kWithImm)
		ibv_wr_rdma_write_imm(qpx_, rkey, raddr, imm);
	else
		ibv_wr_rdma_write(qpx_, rkey, raddr);
	ibv_wr_set_inline_data_list(qpx_, data.size(), as_ibv(data.data()));
	return end(to, flags, true);
}

int Qp::read(uint64_t wr_id, const Dest &to, std::span<const Sge> sge, uint32_t rkey, uint64_t raddr,
	     uint32_t flags)
{
	begin(wr_id);
	ibv_wr_rdma_read(qpx_, rkey, raddr);
	ibv_wr_set_sge_list(qpx_, sge.size(), as_ibv(sge.data()));
	return end(to, flags);
}

int Qp::post_recv(uint64_t wr_id, std::span<const Sge> sge)
{
	ibv_recv_wr wr{};
	wr.wr_id = wr_id;
	wr.sg_list = const_cast<ibv_sge *>(as_ibv(sge.data()));
	wr.num_sge = int(sge.size());
	ibv_recv_wr *bad = nullptr;
	return -ibv_post_recv(qp_, &wr, &bad);
}

} // namespace efa::verbs
