/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The efadv_* entry points of the software EFA device, with the comp_mask / inlen
 * compatibility rules of rdma-core (providers/efa/verbs.c), error codes included:
 *  - a context that is not a software EFA device: EOPNOTSUPP ("not EFA");
 *  - inlen shorter than the struct up to its first mandatory field (driver_qp_type,
 *    wc_flags, ...) fails with EINVAL; fields beyond inlen are taken as zero (input) or
 *    not written (output);
 *  - inlen longer than the current struct is accepted only if the unknown tail is zero,
 *    and a non-zero input comp_mask or reserved field is refused: EINVAL, the
 *    "compatibility issues" of rdma-core, so a newer caller asking for something we do
 *    not know fails instead of being silently ignored;
 *  - a known request the device cannot serve (a driver QP type, a completion field, a
 *    flag its generation lacks) is EOPNOTSUPP.
 */
#include "sim.h"

#include <cerrno>
#include <cstring>

namespace efasim {
namespace {

bool tail_is_zero(const void *p, size_t known, size_t inlen)
{
	const auto *b = static_cast<const uint8_t *>(p);
	for (size_t i = known; i < inlen; i++)
		if (b[i])
			return false;
	return true;
}

/* Copies the caller's input struct into `out` (zero-filled), applying the rules above. */
template <typename T> int take_input(const void *in, uint32_t inlen, size_t min_len, T &out)
{
	std::memset(&out, 0, sizeof out);
	if (!in || inlen < min_len || !tail_is_zero(in, sizeof out, inlen))
		return EINVAL;
	std::memcpy(&out, in, std::min<size_t>(inlen, sizeof out));
	return 0;
}

} // namespace
} // namespace efasim

using namespace efasim;

EFASIM_EXPORT int efadv_query_device(ibv_context *c, efadv_device_attr *attr, uint32_t inlen)
{
	if (!Context::checked(c))
		return EOPNOTSUPP; /* not an EFA device */
	if (!attr || inlen < EFADV_DEVICE_ATTR_V1_SIZE)
		return EINVAL;
	efadv_device_attr_cur a;
	fill_efadv_attr(a);
	std::memset(attr, 0, inlen);
	std::memcpy(attr, &a, std::min<size_t>(inlen, sizeof a));
	return 0;
}

EFASIM_EXPORT int efadv_query_ah(ibv_ah *ah, efadv_ah_attr *attr, uint32_t inlen)
{
	if (!ah || !attr || inlen < offsetof(efadv_ah_attr, ahn) + sizeof attr->ahn)
		return EINVAL;
	if (!Context::checked(ah->context))
		return EOPNOTSUPP;
	efadv_ah_attr a{};
	a.ahn = reinterpret_cast<Ah *>(ah)->ahn;
	std::memset(attr, 0, inlen);
	std::memcpy(attr, &a, std::min<size_t>(inlen, sizeof a));
	return 0;
}

EFASIM_EXPORT ibv_qp *efadv_create_qp_ex(ibv_context *c, ibv_qp_init_attr_ex *attr_ex, efadv_qp_init_attr *efa_attr,
					 uint32_t inlen)
{
	if (!Context::checked(c)) {
		errno = EOPNOTSUPP;
		return nullptr;
	}
	efadv_qp_init_attr_cur a;
	/* The smallest input rdma-core takes ends with driver_qp_type. */
	constexpr size_t min_len = offsetof(efadv_qp_init_attr_cur, driver_qp_type) + sizeof(uint32_t);
	if (!attr_ex || attr_ex->qp_type != IBV_QPT_DRIVER) {
		errno = EINVAL;
		return nullptr;
	}
	if (int err = take_input(efa_attr, inlen, min_len, a)) {
		errno = err;
		return nullptr;
	}
	if (a.comp_mask || a.reserved[0]) {
		errno = EINVAL;
		return nullptr;
	}
	if (a.driver_qp_type != EFADV_QP_DRIVER_TYPE_SRD) {
		errno = EOPNOTSUPP;
		return nullptr;
	}
	Qp *qp = create_srd_qp(c, attr_ex, a);
	return qp ? &qp->qpx.qp_base : nullptr;
}

/* The EFA_1.0 entry point: an SRD QP without the extended send API. */
EFASIM_EXPORT ibv_qp *efadv_create_driver_qp(ibv_pd *pd, ibv_qp_init_attr *attr, uint32_t driver_qp_type)
{
	if (!pd || !attr) {
		errno = EINVAL;
		return nullptr;
	}
	if (!Context::checked(pd->context)) {
		errno = EOPNOTSUPP;
		return nullptr;
	}
	/* As rdma-core: the QP type must be IBV_QPT_DRIVER (a UD QP comes from ibv_create_qp),
	 * and the driver type SRD. */
	if (attr->qp_type != IBV_QPT_DRIVER) {
		errno = EINVAL;
		return nullptr;
	}
	if (driver_qp_type != EFADV_QP_DRIVER_TYPE_SRD) {
		errno = EOPNOTSUPP;
		return nullptr;
	}
	ibv_qp_init_attr_ex ex{};
	ex.qp_context = attr->qp_context;
	ex.send_cq = attr->send_cq;
	ex.recv_cq = attr->recv_cq;
	ex.srq = attr->srq;
	ex.cap = attr->cap;
	ex.qp_type = attr->qp_type;
	ex.sq_sig_all = attr->sq_sig_all;
	ex.comp_mask = IBV_QP_INIT_ATTR_PD;
	ex.pd = pd;
	efadv_qp_init_attr_cur a{};
	a.driver_qp_type = EFADV_QP_DRIVER_TYPE_SRD;
	Qp *qp = create_srd_qp(pd->context, &ex, a);
	if (!qp)
		return nullptr;
	attr->cap = ex.cap;
	return &qp->qpx.qp_base;
}

EFASIM_EXPORT ibv_cq_ex *efadv_create_cq(ibv_context *c, ibv_cq_init_attr_ex *attr_ex, efadv_cq_init_attr *efa_attr,
					 uint32_t inlen)
{
	if (!Context::checked(c)) {
		errno = EOPNOTSUPP;
		return nullptr;
	}
	efadv_cq_init_attr_cur a;
	if (int err = take_input(efa_attr, inlen, EFADV_CQ_INIT_ATTR_V1_SIZE, a)) {
		errno = err;
		return nullptr;
	}
	if (a.comp_mask) {
		errno = EINVAL;
		return nullptr;
	}
	const uint32_t caps = config().profile->device_caps;
	uint64_t supported = 0;
	if (caps & EFADV_DEVICE_ATTR_CAPS_CQ_WITH_SGID)
		supported |= EFADV_WC_EX_WITH_SGID;
	if (caps & EFADV_DEVICE_ATTR_CAPS_UNSOLICITED_WRITE_RECV)
		supported |= EFADV_WC_EX_WITH_IS_UNSOLICITED;
	if ((a.wc_flags & ~supported) || a.flags) {
		/* flags: a CQ in external (dmabuf) memory needs CQ_WITH_EXT_MEM_DMABUF, which
		 * no profile reports (efasim(7)); rdma-core refuses it as unsupported. */
		errno = EOPNOTSUPP;
		return nullptr;
	}
	Cq *cq = create_cq(c, attr_ex, a.wc_flags | (1ull << 63) /* created through efadv */);
	return cq ? &cq->ex : nullptr;
}

EFASIM_EXPORT efadv_cq *efadv_cq_from_ibv_cq_ex(ibv_cq_ex *ex)
{
	if (!ex)
		return nullptr;
	Cq *cq = Cq::from(ex);
	if (!(cq->efa_wc_flags & (1ull << 63)))
		return nullptr; /* not created by efadv_create_cq */
	return reinterpret_cast<efadv_cq *>(&cq->dv);
}

EFASIM_EXPORT efadv_qp *efadv_qp_from_ibv_qp_ex(ibv_qp_ex *qpx)
{
	if (!qpx)
		return nullptr;
	Qp *qp = Qp::from(qpx);
	if (!qp->driver_srd || !qp->has_qp_ex)
		return nullptr;
	return &qp->dvqp;
}

/*
 * Queue depths for given queue attributes (rdma-core's efadv_get_max_sq_depth /
 * efadv_get_max_rq_depth): the depth, or a negative errno. The input rules are those of
 * the other efadv calls (inlen, comp_mask, unknown tail: -EINVAL). A flag the device
 * cannot serve (inline write without RDMA write, or unknown) is -EOPNOTSUPP; sizes
 * beyond the device's are -EINVAL. QP creation applies the same rule (sim.h).
 */
EFASIM_EXPORT int efadv_get_max_sq_depth(ibv_context *c, efadv_sq_depth_attr *attr, uint32_t inlen)
{
	if (!Context::checked(c))
		return -EOPNOTSUPP;
	efadv_sq_depth_attr a;
	if (int err = take_input(attr, inlen, sizeof a, a))
		return -err;
	if (a.comp_mask)
		return -EINVAL;
	const Profile &prof = *config().profile;
	if ((a.flags & ~uint32_t(EFADV_SQ_DEPTH_ATTR_INLINE_WRITE)) ||
	    ((a.flags & EFADV_SQ_DEPTH_ATTR_INLINE_WRITE) && !(prof.device_caps & EFADV_DEVICE_ATTR_CAPS_RDMA_WRITE)))
		return -EOPNOTSUPP;
	efadv_device_attr_cur dev;
	fill_efadv_attr(dev);
	ibv_device_attr da;
	fill_device_attr(da, Context::from(c)->rt->index);
	if (a.max_send_sge > dev.max_sq_sge || a.max_rdma_sge > uint32_t(da.max_sge_rd) ||
	    a.max_inline_data > dev.inline_buf_size_ex)
		return -EINVAL;
	return int(max_sq_depth(prof, a.flags & EFADV_SQ_DEPTH_ATTR_INLINE_WRITE, a.max_inline_data));
}

EFASIM_EXPORT int efadv_get_max_rq_depth(ibv_context *c, efadv_rq_depth_attr *attr, uint32_t inlen)
{
	if (!Context::checked(c))
		return -EOPNOTSUPP;
	efadv_rq_depth_attr a;
	constexpr size_t min_len = offsetof(efadv_rq_depth_attr, max_recv_sge) + sizeof(uint32_t);
	if (int err = take_input(attr, inlen, min_len, a))
		return -err;
	if (a.comp_mask)
		return -EINVAL;
	efadv_device_attr_cur dev;
	fill_efadv_attr(dev);
	if (a.max_recv_sge > dev.max_rq_sge)
		return -EINVAL;
	return int(max_rq_depth(*config().profile, a.max_recv_sge));
}
