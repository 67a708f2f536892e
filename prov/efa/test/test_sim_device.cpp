/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Software EFA device: discovery, queries, profiles, efadv compatibility rules (inlen,
 * comp_mask), QP creation limits, the QP state machine, memory registration keys.
 * Single process; every Criterion test runs in its own process, so each may set
 * EFASIM_* variables before the device reads them.
 */
#include "simtest.h"

#include <sys/mman.h>
#include <sys/stat.h>

#include <algorithm>
#include <climits>

using namespace simtest;

namespace {

ibv_context *open_dev(int idx = 0)
{
	int n = 0;
	ibv_device **l = ibv_get_device_list(&n);
	cr_assert(l && n > idx, "device %d not listed (%d devices)", idx, n);
	ibv_context *c = ibv_open_device(l[idx]);
	ibv_free_device_list(l);
	cr_assert_not_null(c);
	return c;
}

struct QpEnv {
	ibv_context *ctx;
	ibv_pd *pd;
	ibv_cq_ex *cq;
	QpEnv() : ctx(open_dev())
	{
		pd = ibv_alloc_pd(ctx);
		ibv_cq_init_attr_ex ca{};
		ca.cqe = 64;
		ca.wc_flags = IBV_WC_STANDARD_FLAGS;
		cq = ibv_create_cq_ex(ctx, &ca);
		cr_assert_not_null(cq);
	}
	~QpEnv()
	{
		ibv_destroy_cq(ibv_cq_ex_to_cq(cq));
		ibv_dealloc_pd(pd);
		ibv_close_device(ctx);
	}
	ibv_qp_init_attr_ex attr(uint64_t ops = IBV_QP_EX_WITH_SEND) const
	{
		ibv_qp_init_attr_ex a{};
		a.send_cq = ibv_cq_ex_to_cq(cq);
		a.recv_cq = ibv_cq_ex_to_cq(cq);
		a.cap.max_send_wr = 16;
		a.cap.max_recv_wr = 16;
		a.cap.max_send_sge = 1;
		a.cap.max_recv_sge = 1;
		a.qp_type = IBV_QPT_DRIVER;
		a.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
		a.pd = pd;
		a.send_ops_flags = ops;
		return a;
	}
	ibv_qp *create(ibv_qp_init_attr_ex &a, uint16_t flags = 0, uint8_t sl = 0, uint64_t wr_flags = 0,
		       uint32_t inlen = sizeof(efadv_qp_init_attr_cur))
	{
		efadv_qp_init_attr_cur e{};
		e.driver_qp_type = EFADV_QP_DRIVER_TYPE_SRD;
		e.flags = flags;
		e.sl = sl;
		e.wr_flags = wr_flags;
		errno = 0;
		return efadv_create_qp_ex(ctx, &a, reinterpret_cast<efadv_qp_init_attr *>(&e), inlen);
	}
};

} // namespace

Test(sim_device, list_names_and_several_devices, .init = [] { setenv("EFASIM_DEVICES", "3", 1); })
{
	int n = 0;
	ibv_device **l = ibv_get_device_list(&n);
	cr_assert_eq(n, 3);
	cr_assert_str_eq(ibv_get_device_name(l[0]), "efasim0");
	cr_assert_str_eq(ibv_get_device_name(l[2]), "efasim2");
	cr_assert_null(l[3]);
	ibv_context *c0 = ibv_open_device(l[0]);
	ibv_context *c2 = ibv_open_device(l[2]);
	ibv_gid g0, g2;
	cr_assert_eq(ibv_query_gid(c0, 1, 0, &g0), 0);
	cr_assert_eq(ibv_query_gid(c2, 1, 0, &g2), 0);
	cr_assert_neq(memcmp(g0.raw, g2.raw, 16), 0, "two devices share a GID");
	cr_assert_neq(ibv_query_gid(c0, 1, 1, &g0), 0);
	ibv_close_device(c0);
	ibv_close_device(c2);
	ibv_free_device_list(l);
}

Test(sim_device, bad_configuration_offers_no_device, .init = [] { setenv("EFASIM_LOSS", "2", 1); })
{
	int n = -1;
	ibv_device **l = ibv_get_device_list(&n);
	cr_assert_not_null(l);
	cr_assert_eq(n, 0);
	ibv_free_device_list(l);
}

Test(sim_device, bind_address_is_in_the_gid, .init = [] { setenv("EFASIM_ADDR", "127.0.0.7", 1); })
{
	ibv_context *c = open_dev();
	ibv_gid g;
	cr_assert_eq(ibv_query_gid(c, 1, 0, &g), 0);
	cr_assert_eq(g.raw[12], 127);
	cr_assert_eq(g.raw[15], 7);
	ibv_close_device(c);
}

Test(sim_device, query_attributes_default_profile)
{
	ibv_context *c = open_dev();
	ibv_device_attr da;
	cr_assert_eq(ibv_query_device(c, &da), 0);
	cr_assert_eq(da.vendor_id, 0x1d0fu);
	cr_assert_eq(da.phys_port_cnt, 1);
	ibv_port_attr pa;
	cr_assert_eq(ibv_query_port(c, 1, &pa), 0);
	cr_assert_eq(pa.state, IBV_PORT_ACTIVE);
	cr_assert_eq(pa.max_msg_sz, 8928u);
	cr_assert_neq(ibv_query_port(c, 2, &pa), 0);
	ibv_device_attr_ex dax;
	cr_assert_eq(ibv_query_device_ex(c, nullptr, &dax), 0);
	cr_assert_eq(dax.orig_attr.vendor_part_id, da.vendor_part_id);

	efadv_device_attr_cur ea{};
	cr_assert_eq(efadv_query_device(c, reinterpret_cast<efadv_device_attr *>(&ea), sizeof ea), 0);
	const uint32_t want = EFADV_DEVICE_ATTR_CAPS_RDMA_READ | EFADV_DEVICE_ATTR_CAPS_RNR_RETRY |
			      EFADV_DEVICE_ATTR_CAPS_CQ_WITH_SGID | EFADV_DEVICE_ATTR_CAPS_RDMA_WRITE |
			      EFADV_DEVICE_ATTR_CAPS_UNSOLICITED_WRITE_RECV;
	cr_assert_eq(ea.device_caps, want);
	cr_assert_eq(ea.inline_buf_size, 32);
	cr_assert_eq(ea.inline_buf_size_ex, 80);
	cr_assert_eq(ea.max_sq_sge, 2);
	cr_assert_eq(ea.max_rdma_size, 1u << 30);
	cr_assert_str_eq(efasim_profile_name(), "default");
	ibv_close_device(c);
}

/*
 * The capability bits of the newest efadv: CQs in external dmabuf memory and completion
 * counters. No generation the device models offers them (efasim(7)), and a CQ asked for
 * in dmabuf memory is refused as rdma-core refuses it on such a device.
 */
Test(sim_device, newest_capability_bits_are_not_reported)
{
	static_assert(EFADV_DEVICE_ATTR_CAPS_CQ_WITH_EXT_MEM_DMABUF == (1 << 5));
	static_assert(EFADV_DEVICE_ATTR_CAPS_COMP_CNTR == (1 << 6));
	ibv_context *c = open_dev();
	efadv_device_attr_cur ea{};
	cr_assert_eq(efadv_query_device(c, reinterpret_cast<efadv_device_attr *>(&ea), sizeof ea), 0);
	cr_assert_eq(ea.device_caps & (EFADV_DEVICE_ATTR_CAPS_CQ_WITH_EXT_MEM_DMABUF | EFADV_DEVICE_ATTR_CAPS_COMP_CNTR),
		     0u, "caps %#x", ea.device_caps);
	static uint8_t ring[4096];
	ibv_cq_init_attr_ex ca{};
	ca.cqe = 8;
	ca.wc_flags = IBV_WC_STANDARD_FLAGS;
	efadv_cq_init_attr_cur ce{};
	ce.flags = EFADV_CQ_INIT_FLAGS_EXT_MEM_DMABUF;
	ce.ext_mem_dmabuf.buffer = ring;
	ce.ext_mem_dmabuf.length = sizeof ring;
	ce.ext_mem_dmabuf.fd = -1;
	errno = 0;
	cr_assert_null(efadv_create_cq(c, &ca, reinterpret_cast<efadv_cq_init_attr *>(&ce), sizeof ce));
	cr_assert_eq(errno, EOPNOTSUPP, "CQ in dmabuf memory: %s", strerror(errno));
	ibv_close_device(c);
}

Test(sim_device, profile_no_rdma_write, .init = [] { setenv("EFASIM_PROFILE", "no-rdma-write", 1); })
{
	QpEnv e;
	efadv_device_attr_cur ea{};
	cr_assert_eq(efadv_query_device(e.ctx, reinterpret_cast<efadv_device_attr *>(&ea), sizeof ea), 0);
	cr_assert(ea.device_caps & EFADV_DEVICE_ATTR_CAPS_RDMA_READ);
	cr_assert_not(ea.device_caps & EFADV_DEVICE_ATTR_CAPS_RDMA_WRITE);
	cr_assert_not(ea.device_caps & EFADV_DEVICE_ATTR_CAPS_UNSOLICITED_WRITE_RECV);
	cr_assert_eq(ea.inline_buf_size_ex, 32);
	auto a = e.attr(IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE);
	cr_assert_null(e.create(a));
	cr_assert_eq(errno, EOPNOTSUPP);
	a = e.attr(IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_READ);
	ibv_qp *qp = e.create(a);
	cr_assert_not_null(qp);
	ibv_destroy_qp(qp);
	/* no inline RDMA write without RDMA write; processing hints on every generation */
	a = e.attr();
	cr_assert_null(e.create(a, EFADV_QP_FLAGS_INLINE_WRITE));
	cr_assert_eq(errno, EOPNOTSUPP);
	a = e.attr();
	qp = e.create(a, 0, 0, EFADV_WR_EX_WITH_PROCESSING_HINTS);
	cr_assert_not_null(qp, "processing hints refused on no-rdma-write: %s", strerror(errno));
	ibv_destroy_qp(qp);
	/* remote write access cannot be registered where there is no RDMA write */
	char buf[64];
	cr_assert_null(ibv_reg_mr(e.pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE));
}

Test(sim_device, profile_no_unsolicited, .init = [] { setenv("EFASIM_PROFILE", "no-unsolicited", 1); })
{
	QpEnv e;
	auto a = e.attr();
	cr_assert_null(e.create(a, EFADV_QP_FLAGS_UNSOLICITED_WRITE_RECV));
	cr_assert_eq(errno, EOPNOTSUPP);
	ibv_cq_init_attr_ex ca{};
	ca.cqe = 8;
	ca.wc_flags = IBV_WC_STANDARD_FLAGS;
	efadv_cq_init_attr_cur ce{};
	ce.wc_flags = EFADV_WC_EX_WITH_IS_UNSOLICITED;
	cr_assert_null(efadv_create_cq(e.ctx, &ca, reinterpret_cast<efadv_cq_init_attr *>(&ce), sizeof ce));
	cr_assert_eq(errno, EOPNOTSUPP);
	a = e.attr();
	ibv_qp *qp = e.create(a, EFADV_QP_FLAGS_INLINE_WRITE);
	cr_assert_not_null(qp, "INLINE_WRITE is still supported");
	ibv_destroy_qp(qp);
	a = e.attr();
	qp = e.create(a, 0, 0, EFADV_WR_EX_WITH_PROCESSING_HINTS);
	cr_assert_not_null(qp, "processing hints refused on no-unsolicited: %s", strerror(errno));
	ibv_destroy_qp(qp);
}

Test(sim_device, profile_no_rdma_accepts_hints, .init = [] { setenv("EFASIM_PROFILE", "no-rdma", 1); })
{
	QpEnv e;
	auto a = e.attr();
	ibv_qp *qp = e.create(a, 0, 0, EFADV_WR_EX_WITH_PROCESSING_HINTS);
	cr_assert_not_null(qp, "processing hints refused on the first generation: %s", strerror(errno));
	cr_assert_not_null(efadv_qp_from_ibv_qp_ex(ibv_qp_to_qp_ex(qp)));
	ibv_destroy_qp(qp);
	a = e.attr();
	cr_assert_null(e.create(a, EFADV_QP_FLAGS_INLINE_WRITE));
	cr_assert_eq(errno, EOPNOTSUPP);
}

Test(sim_device, profile_inline32, .init = [] { setenv("EFASIM_PROFILE", "inline32", 1); })
{
	QpEnv e;
	/* INLINE_WRITE comes with RDMA write, whatever the inline size (rdma-core) */
	auto a = e.attr(IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE);
	a.cap.max_inline_data = 32;
	ibv_qp *qp = e.create(a, EFADV_QP_FLAGS_INLINE_WRITE);
	cr_assert_not_null(qp, "INLINE_WRITE refused on inline32: %s", strerror(errno));
	ibv_destroy_qp(qp);
	a = e.attr();
	a.cap.max_inline_data = 33;
	cr_assert_null(e.create(a));
	cr_assert_eq(errno, EINVAL);
	a = e.attr();
	a.cap.max_inline_data = 32;
	qp = e.create(a);
	cr_assert_not_null(qp);
	cr_assert_geq(a.cap.max_inline_data, 32u);
	ibv_destroy_qp(qp);
}

Test(sim_device, unknown_profile_is_refused, .init = [] { setenv("EFASIM_PROFILE", "efa-gen9", 1); })
{
	int n = -1;
	ibv_device **l = ibv_get_device_list(&n);
	cr_assert_eq(n, 0);
	ibv_free_device_list(l);
}

Test(sim_device, efadv_query_device_inlen)
{
	ibv_context *c = open_dev();
	/* the first published layout: 24 bytes, no device_caps */
	uint8_t small[32];
	memset(small, 0xab, sizeof small);
	cr_assert_eq(efadv_query_device(c, reinterpret_cast<efadv_device_attr *>(small), 24), 0);
	cr_assert_eq(small[24], 0xab, "wrote beyond inlen");
	cr_assert_eq(reinterpret_cast<efadv_device_attr_cur *>(small)->max_sq_sge, 2);
	cr_assert_eq(efadv_query_device(c, reinterpret_cast<efadv_device_attr *>(small), 16), EINVAL);
	/* a longer struct: the unknown tail is zeroed */
	uint8_t big[48];
	memset(big, 0xab, sizeof big);
	cr_assert_eq(efadv_query_device(c, reinterpret_cast<efadv_device_attr *>(big), sizeof big), 0);
	cr_assert_eq(big[40], 0);
	ibv_close_device(c);
}

/*
 * rdma-core's rules and error codes (providers/efa/verbs.c): incompatible input
 * (inlen short of driver_qp_type, a comp_mask, a reserved byte, a non-zero unknown
 * tail, a QP type other than IBV_QPT_DRIVER) is EINVAL; a known request the device
 * cannot serve (another driver QP type, an unknown QP flag or wr_flag) is EOPNOTSUPP.
 */
Test(sim_device, efadv_create_qp_ex_inlen_and_comp_mask)
{
	QpEnv e;
	/* older caller: the 16-byte layout without flags/sl/wr_flags */
	auto a = e.attr();
	ibv_qp *qp = e.create(a, 0, 0, 0, 16);
	cr_assert_not_null(qp, "16-byte inlen refused: %s", strerror(errno));
	ibv_destroy_qp(qp);
	/* the shortest rdma-core takes: up to driver_qp_type */
	a = e.attr();
	qp = e.create(a, 0, 0, 0, 12);
	cr_assert_not_null(qp, "12-byte inlen refused: %s", strerror(errno));
	ibv_destroy_qp(qp);
	a = e.attr();
	cr_assert_null(e.create(a, 0, 0, 0, 8));
	cr_assert_eq(errno, EINVAL);
	a = e.attr();
	a.qp_type = IBV_QPT_UD;
	cr_assert_null(e.create(a));
	cr_assert_eq(errno, EINVAL, "efadv_create_qp_ex of a UD QP: %s", strerror(errno));

	/* newer caller: a zero tail is fine, a non-zero unknown field is refused */
	struct {
		efadv_qp_init_attr_cur cur;
		uint64_t future;
	} big{};
	big.cur.driver_qp_type = EFADV_QP_DRIVER_TYPE_SRD;
	a = e.attr();
	qp = efadv_create_qp_ex(e.ctx, &a, reinterpret_cast<efadv_qp_init_attr *>(&big), sizeof big);
	cr_assert_not_null(qp);
	ibv_destroy_qp(qp);
	big.future = 1;
	a = e.attr();
	errno = 0;
	cr_assert_null(efadv_create_qp_ex(e.ctx, &a, reinterpret_cast<efadv_qp_init_attr *>(&big), sizeof big));
	cr_assert_eq(errno, EINVAL, "non-zero unknown tail: %s", strerror(errno));

	efadv_qp_init_attr_cur x{};
	x.driver_qp_type = EFADV_QP_DRIVER_TYPE_SRD;
	x.comp_mask = 1;
	a = e.attr();
	cr_assert_null(efadv_create_qp_ex(e.ctx, &a, reinterpret_cast<efadv_qp_init_attr *>(&x), sizeof x));
	cr_assert_eq(errno, EINVAL, "comp_mask: %s", strerror(errno));
	x.comp_mask = 0;
	x.reserved[0] = 1;
	a = e.attr();
	cr_assert_null(efadv_create_qp_ex(e.ctx, &a, reinterpret_cast<efadv_qp_init_attr *>(&x), sizeof x));
	cr_assert_eq(errno, EINVAL, "reserved: %s", strerror(errno));
	x.reserved[0] = 0;
	x.driver_qp_type = 7;
	a = e.attr();
	cr_assert_null(efadv_create_qp_ex(e.ctx, &a, reinterpret_cast<efadv_qp_init_attr *>(&x), sizeof x));
	cr_assert_eq(errno, EOPNOTSUPP);
	x.driver_qp_type = EFADV_QP_DRIVER_TYPE_SRD;
	x.flags = 1 << 7;
	a = e.attr();
	cr_assert_null(efadv_create_qp_ex(e.ctx, &a, reinterpret_cast<efadv_qp_init_attr *>(&x), sizeof x));
	cr_assert_eq(errno, EOPNOTSUPP);
	x.flags = 0;
	x.wr_flags = 1 << 9;
	a = e.attr();
	cr_assert_null(efadv_create_qp_ex(e.ctx, &a, reinterpret_cast<efadv_qp_init_attr *>(&x), sizeof x));
	cr_assert_eq(errno, EOPNOTSUPP);

	/* the EFA_1.0 entry point */
	ibv_qp_init_attr ia{};
	ia.send_cq = ia.recv_cq = ibv_cq_ex_to_cq(e.cq);
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	ia.qp_type = IBV_QPT_UD;
	cr_assert_null(efadv_create_driver_qp(e.pd, &ia, EFADV_QP_DRIVER_TYPE_SRD));
	cr_assert_eq(errno, EINVAL);
	ia.qp_type = IBV_QPT_DRIVER;
	cr_assert_null(efadv_create_driver_qp(e.pd, &ia, 7));
	cr_assert_eq(errno, EOPNOTSUPP);
	qp = efadv_create_driver_qp(e.pd, &ia, EFADV_QP_DRIVER_TYPE_SRD);
	cr_assert_not_null(qp, "efadv_create_driver_qp: %s", strerror(errno));
	ibv_destroy_qp(qp);
}

Test(sim_device, efadv_create_cq_inlen)
{
	ibv_context *c = open_dev();
	ibv_cq_init_attr_ex ca{};
	ca.cqe = 8;
	ca.wc_flags = IBV_WC_STANDARD_FLAGS;
	struct {
		uint64_t comp_mask, wc_flags;
	} v1{0, EFADV_WC_EX_WITH_SGID};
	ibv_cq_ex *cq = efadv_create_cq(c, &ca, reinterpret_cast<efadv_cq_init_attr *>(&v1), sizeof v1);
	cr_assert_not_null(cq);
	cr_assert_not_null(efadv_cq_from_ibv_cq_ex(cq));
	cr_assert_geq(cq->cqe, 8);
	ibv_destroy_cq(ibv_cq_ex_to_cq(cq));
	/* incompatible input is EINVAL (rdma-core): short of wc_flags, a comp_mask, a
	 * non-zero unknown tail */
	cr_assert_null(efadv_create_cq(c, &ca, reinterpret_cast<efadv_cq_init_attr *>(&v1), 8));
	cr_assert_eq(errno, EINVAL);
	efadv_cq_init_attr_cur cur{};
	cur.comp_mask = 1;
	cr_assert_null(efadv_create_cq(c, &ca, reinterpret_cast<efadv_cq_init_attr *>(&cur), sizeof cur));
	cr_assert_eq(errno, EINVAL, "comp_mask: %s", strerror(errno));
	cur.comp_mask = 0;
	struct {
		efadv_cq_init_attr_cur cur;
		uint64_t future;
	} big{};
	big.future = 1;
	cr_assert_null(efadv_create_cq(c, &ca, reinterpret_cast<efadv_cq_init_attr *>(&big), sizeof big));
	cr_assert_eq(errno, EINVAL, "non-zero unknown tail: %s", strerror(errno));
	big.future = 0;
	cq = efadv_create_cq(c, &ca, reinterpret_cast<efadv_cq_init_attr *>(&big), sizeof big);
	cr_assert_not_null(cq, "zero tail refused: %s", strerror(errno));
	ibv_destroy_cq(ibv_cq_ex_to_cq(cq));
	/* a request the device cannot serve is EOPNOTSUPP */
	cur.wc_flags = 1 << 5; /* unknown */
	cr_assert_null(efadv_create_cq(c, &ca, reinterpret_cast<efadv_cq_init_attr *>(&cur), sizeof cur));
	cr_assert_eq(errno, EOPNOTSUPP);
	cur.wc_flags = 0;
	cur.flags = EFADV_CQ_INIT_FLAGS_EXT_MEM_DMABUF;
	cr_assert_null(efadv_create_cq(c, &ca, reinterpret_cast<efadv_cq_init_attr *>(&cur), sizeof cur));
	cr_assert_eq(errno, EOPNOTSUPP);
	/* a plain CQ is not an efadv CQ */
	cq = ibv_create_cq_ex(c, &ca);
	cr_assert_not_null(cq);
	cr_assert_null(efadv_cq_from_ibv_cq_ex(cq));
	ibv_destroy_cq(ibv_cq_ex_to_cq(cq));
	ca.wc_flags |= IBV_WC_EX_WITH_COMPLETION_TIMESTAMP;
	cr_assert_null(ibv_create_cq_ex(c, &ca));
	cr_assert_eq(errno, EOPNOTSUPP);
	ibv_close_device(c);
}

Test(sim_device, qp_limits_and_caps)
{
	QpEnv e;
	efadv_device_attr_cur ea{};
	efadv_query_device(e.ctx, reinterpret_cast<efadv_device_attr *>(&ea), sizeof ea);
	auto a = e.attr();
	a.cap.max_send_wr = ea.max_sq_wr + 1;
	cr_assert_null(e.create(a));
	cr_assert_eq(errno, EINVAL);
	a = e.attr();
	a.cap.max_recv_sge = ea.max_rq_sge + 1;
	cr_assert_null(e.create(a));
	cr_assert_eq(errno, EINVAL);
	a = e.attr();
	a.cap.max_inline_data = ea.inline_buf_size_ex + 1;
	cr_assert_null(e.create(a));
	cr_assert_eq(errno, EINVAL);
	a = e.attr(IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP);
	cr_assert_null(e.create(a));
	cr_assert_eq(errno, EOPNOTSUPP);
	a = e.attr();
	a.qp_type = IBV_QPT_UD;
	cr_assert_null(e.create(a));
	a = e.attr();
	a.cap.max_send_wr = 100;
	a.cap.max_recv_wr = 3;
	a.cap.max_inline_data = 40;
	ibv_qp *qp = e.create(a);
	cr_assert_not_null(qp);
	cr_assert_geq(a.cap.max_send_wr, 100u);
	cr_assert_geq(a.cap.max_recv_wr, 3u);
	cr_assert_geq(a.cap.max_inline_data, 40u);
	cr_assert_not_null(ibv_qp_to_qp_ex(qp));
	cr_assert_not_null(efadv_qp_from_ibv_qp_ex(ibv_qp_to_qp_ex(qp)));
	/* plain verbs cannot make SRD QPs on EFA: rdma-core answers EOPNOTSUPP */
	auto b = e.attr();
	cr_assert_null(ibv_create_qp_ex(e.ctx, &b));
	cr_assert_eq(errno, EOPNOTSUPP, "ibv_create_qp_ex(IBV_QPT_DRIVER): %s", strerror(errno));
	/* a CQ in use cannot be destroyed */
	cr_assert_eq(ibv_destroy_cq(ibv_cq_ex_to_cq(e.cq)), EBUSY);
	cr_assert_eq(ibv_destroy_qp(qp), 0);
	/* service level and processing hints on the default profile */
	a = e.attr();
	qp = e.create(a, 0, 8, EFADV_WR_EX_WITH_PROCESSING_HINTS);
	cr_assert_not_null(qp);
	ibv_destroy_qp(qp);
	a = e.attr();
	cr_assert_null(e.create(a, 0, 16));
}

/*
 * The queue depth rule of EFA devices (efadv_get_max_sq_depth / efadv_get_max_rq_depth):
 * wide send queue entries, for inline RDMA write or an inline size beyond
 * inline_buf_size, halve the send queue; the receive queue holds max_rq_wr descriptors,
 * max_recv_sge per receive. The functions report it and QP creation enforces it.
 */
Test(sim_device, queue_depths_follow_the_entry_size)
{
	QpEnv e;
	efadv_device_attr_cur ea{};
	efadv_query_device(e.ctx, reinterpret_cast<efadv_device_attr *>(&ea), sizeof ea);
	auto sq = [&](uint32_t flags, uint32_t inl, uint32_t sge = 1, uint32_t inlen = sizeof(efadv_sq_depth_attr)) {
		efadv_sq_depth_attr a{};
		a.flags = flags;
		a.max_send_sge = sge;
		a.max_rdma_sge = 1;
		a.max_inline_data = inl;
		return efadv_get_max_sq_depth(e.ctx, &a, inlen);
	};
	cr_assert_eq(sq(0, 0), int(ea.max_sq_wr));
	cr_assert_eq(sq(0, ea.inline_buf_size), int(ea.max_sq_wr));
	cr_assert_eq(sq(0, ea.inline_buf_size + 1u), int(ea.max_sq_wr / 2));
	cr_assert_eq(sq(EFADV_SQ_DEPTH_ATTR_INLINE_WRITE, 0), int(ea.max_sq_wr / 2));
	cr_assert_eq(sq(EFADV_SQ_DEPTH_ATTR_INLINE_WRITE, ea.inline_buf_size_ex), int(ea.max_sq_wr / 2));
	cr_assert_eq(sq(0, ea.inline_buf_size_ex + 1u), -EINVAL);
	cr_assert_eq(sq(0, 0, ea.max_sq_sge + 1u), -EINVAL);
	cr_assert_eq(sq(1u << 5, 0), -EOPNOTSUPP);
	cr_assert_eq(sq(0, 0, 1, 16), -EINVAL);
	efadv_sq_depth_attr cm{};
	cm.comp_mask = 1;
	cr_assert_eq(efadv_get_max_sq_depth(e.ctx, &cm, sizeof cm), -EINVAL);
	struct {
		efadv_sq_depth_attr a;
		uint64_t future;
	} big{};
	cr_assert_eq(efadv_get_max_sq_depth(e.ctx, &big.a, sizeof big), int(ea.max_sq_wr));
	big.future = 1;
	cr_assert_eq(efadv_get_max_sq_depth(e.ctx, &big.a, sizeof big), -EINVAL);

	auto rq = [&](uint32_t sge) {
		efadv_rq_depth_attr a{};
		a.max_recv_sge = sge;
		return efadv_get_max_rq_depth(e.ctx, &a, sizeof a);
	};
	cr_assert_eq(rq(1), int(ea.max_rq_wr));
	cr_assert_eq(rq(2), int(ea.max_rq_wr / 2));
	cr_assert_eq(rq(ea.max_rq_sge + 1u), -EINVAL);
	efadv_rq_depth_attr rcm{};
	rcm.comp_mask = 1;
	cr_assert_eq(efadv_get_max_rq_depth(e.ctx, &rcm, sizeof rcm), -EINVAL);

	/* QP creation: the same rule */
	auto a = e.attr(IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE);
	a.cap.max_send_wr = ea.max_sq_wr;
	a.cap.max_inline_data = ea.inline_buf_size_ex;
	cr_assert_null(e.create(a));
	cr_assert_eq(errno, EINVAL, "a full send queue of wide entries: %s", strerror(errno));
	a = e.attr(IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE);
	a.cap.max_send_wr = ea.max_sq_wr;
	cr_assert_null(e.create(a, EFADV_QP_FLAGS_INLINE_WRITE));
	cr_assert_eq(errno, EINVAL, "a full send queue with INLINE_WRITE: %s", strerror(errno));
	a = e.attr(IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE);
	a.cap.max_send_wr = ea.max_sq_wr / 2;
	a.cap.max_inline_data = ea.inline_buf_size_ex;
	ibv_qp *qp = e.create(a, EFADV_QP_FLAGS_INLINE_WRITE);
	cr_assert_not_null(qp, "half a send queue of wide entries: %s", strerror(errno));
	cr_assert_eq(a.cap.max_send_wr, ea.max_sq_wr / 2);
	ibv_destroy_qp(qp);
	a = e.attr();
	a.cap.max_send_wr = ea.max_sq_wr;
	a.cap.max_inline_data = ea.inline_buf_size;
	qp = e.create(a);
	cr_assert_not_null(qp, "a full send queue of narrow entries: %s", strerror(errno));
	ibv_destroy_qp(qp);
	a = e.attr();
	a.cap.max_recv_sge = 2;
	a.cap.max_recv_wr = ea.max_rq_wr;
	cr_assert_null(e.create(a));
	cr_assert_eq(errno, EINVAL, "a receive queue beyond its descriptors: %s", strerror(errno));
	a = e.attr();
	a.cap.max_recv_sge = 2;
	a.cap.max_recv_wr = ea.max_rq_wr / 2;
	qp = e.create(a);
	cr_assert_not_null(qp, "max_rq_wr / 2 receives of 2 entries: %s", strerror(errno));
	ibv_destroy_qp(qp);
}

Test(sim_device, queue_depths_without_rdma_write, .init = [] { setenv("EFASIM_PROFILE", "no-rdma-write", 1); })
{
	QpEnv e;
	efadv_sq_depth_attr a{};
	a.flags = EFADV_SQ_DEPTH_ATTR_INLINE_WRITE;
	cr_assert_eq(efadv_get_max_sq_depth(e.ctx, &a, sizeof a), -EOPNOTSUPP);
	a.flags = 0;
	cr_assert_eq(efadv_get_max_sq_depth(e.ctx, &a, sizeof a), 4096);
}

Test(sim_device, qp_state_machine)
{
	QpEnv e;
	auto a = e.attr();
	ibv_qp *qp = e.create(a);
	cr_assert_not_null(qp);
	cr_assert_eq(qp->state, IBV_QPS_RESET);
	ibv_qp_attr qa{};
	/* RESET -> RTR skips INIT */
	qa.qp_state = IBV_QPS_RTR;
	cr_assert_eq(ibv_modify_qp(qp, &qa, IBV_QP_STATE), EINVAL);
	/* INIT needs pkey index, port and qkey */
	qa = ibv_qp_attr{};
	qa.qp_state = IBV_QPS_INIT;
	qa.port_num = 1;
	qa.qkey = 0x11;
	cr_assert_eq(ibv_modify_qp(qp, &qa, IBV_QP_STATE | IBV_QP_PORT | IBV_QP_QKEY), EINVAL);
	qa.qkey = 0x80000001;
	cr_assert_eq(ibv_modify_qp(qp, &qa, IBV_QP_STATE | IBV_QP_PORT | IBV_QP_QKEY | IBV_QP_PKEY_INDEX), EPERM);
	qa.qkey = 0x11;
	qa.port_num = 2;
	cr_assert_eq(ibv_modify_qp(qp, &qa, IBV_QP_STATE | IBV_QP_PORT | IBV_QP_QKEY | IBV_QP_PKEY_INDEX), EINVAL);
	qa.port_num = 1;
	cr_assert_eq(ibv_modify_qp(qp, &qa, IBV_QP_STATE | IBV_QP_PORT | IBV_QP_QKEY | IBV_QP_PKEY_INDEX), 0);
	cr_assert_eq(qp->state, IBV_QPS_INIT);
	qa = ibv_qp_attr{};
	qa.qp_state = IBV_QPS_RTS;
	cr_assert_eq(ibv_modify_qp(qp, &qa, IBV_QP_STATE | IBV_QP_SQ_PSN), EINVAL);
	qa.qp_state = IBV_QPS_RTR;
	cr_assert_eq(ibv_modify_qp(qp, &qa, IBV_QP_STATE), 0);
	qa.qp_state = IBV_QPS_RTS;
	cr_assert_eq(ibv_modify_qp(qp, &qa, IBV_QP_STATE), EINVAL, "RTS needs sq_psn");
	qa.rnr_retry = 8;
	cr_assert_eq(ibv_modify_qp(qp, &qa, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_RNR_RETRY), EINVAL);
	qa.rnr_retry = 3;
	cr_assert_eq(ibv_modify_qp(qp, &qa, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_RNR_RETRY), 0);
	cr_assert_eq(qp->state, IBV_QPS_RTS);
	ibv_qp_init_attr init;
	cr_assert_eq(ibv_query_qp(qp, &qa, IBV_QP_STATE | IBV_QP_QKEY | IBV_QP_RNR_RETRY, &init), 0);
	cr_assert_eq(qa.qp_state, IBV_QPS_RTS);
	cr_assert_eq(qa.qkey, 0x11u);
	cr_assert_eq(qa.rnr_retry, 3);
	cr_assert_geq(init.cap.max_send_wr, 16u);
	/* RTS -> ERR -> RESET */
	qa.qp_state = IBV_QPS_ERR;
	cr_assert_eq(ibv_modify_qp(qp, &qa, IBV_QP_STATE), 0);
	qa.qp_state = IBV_QPS_RESET;
	cr_assert_eq(ibv_modify_qp(qp, &qa, IBV_QP_STATE), 0);
	cr_assert_eq(ibv_destroy_qp(qp), 0);
}

Test(sim_device, sends_need_rts)
{
	QpEnv e;
	auto a = e.attr();
	ibv_qp *qp = e.create(a);
	ibv_qp_ex *x = ibv_qp_to_qp_ex(qp);
	ibv_wr_start(x);
	x->wr_id = 1;
	ibv_wr_send(x);
	ibv_wr_set_sge(x, 0, 0, 0);
	cr_assert_eq(ibv_wr_complete(x), EINVAL);
	ibv_destroy_qp(qp);
}

Test(sim_device, mr_keys_and_access)
{
	QpEnv e;
	static char buf[4096];
	ibv_mr *m = ibv_reg_mr(e.pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
	cr_assert_not_null(m);
	cr_assert_eq(m->lkey, m->rkey);
	cr_assert_eq(m->addr, buf);
	cr_assert_eq(m->length, sizeof buf);
	const uint32_t old = m->rkey;
	cr_assert_eq(ibv_dereg_mr(m), 0);
	m = ibv_reg_mr(e.pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE);
	cr_assert_not_null(m);
	cr_assert_neq(m->rkey, old, "a revoked key was handed out again at once");
	cr_assert_eq(ibv_dereg_mr(m), 0);
	/* remote write without local write, atomics: refused */
	cr_assert_null(ibv_reg_mr(e.pd, buf, sizeof buf, IBV_ACCESS_REMOTE_WRITE));
	cr_assert_null(ibv_reg_mr(e.pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC));
	/* dmabuf: no device memory */
	cr_assert_null(ibv_reg_dmabuf_mr(e.pd, 0, 4096, 0, 3, IBV_ACCESS_LOCAL_WRITE));
	/* memory that is not mapped cannot be pinned: EFAULT, as the kernel answers */
	void *gone = mmap(nullptr, 3 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(gone, MAP_FAILED);
	cr_assert_eq(munmap(static_cast<char *>(gone) + 4096, 4096), 0);
	errno = 0;
	cr_assert_null(ibv_reg_mr(e.pd, gone, 3 * 4096, IBV_ACCESS_LOCAL_WRITE));
	cr_assert_eq(errno, EFAULT);
	m = ibv_reg_mr(e.pd, gone, 4096, IBV_ACCESS_LOCAL_WRITE);
	cr_assert_not_null(m, "the mapped page alone registers");
	ibv_dereg_mr(m);
	munmap(gone, 3 * 4096);
	/* a PD with registered memory cannot go */
	m = ibv_reg_mr(e.pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE);
	cr_assert_eq(ibv_dealloc_pd(e.pd), EBUSY);
	ibv_dereg_mr(m);
}

Test(sim_device, address_handles)
{
	QpEnv e;
	ibv_gid g;
	ibv_query_gid(e.ctx, 1, 0, &g);
	ibv_ah_attr aa{};
	aa.is_global = 1;
	aa.port_num = 1;
	aa.grh.dgid = g;
	ibv_ah *a1 = ibv_create_ah(e.pd, &aa);
	ibv_ah *a2 = ibv_create_ah(e.pd, &aa);
	cr_assert(a1 && a2);
	efadv_ah_attr q1{}, q2{};
	cr_assert_eq(efadv_query_ah(a1, &q1, sizeof q1), 0);
	cr_assert_eq(efadv_query_ah(a2, &q2, sizeof q2), 0);
	cr_assert_eq(q1.ahn, q2.ahn, "one AHN per GID in a PD");
	cr_assert_eq(efadv_query_ah(a1, &q1, 4), EINVAL);
	aa.is_global = 0;
	cr_assert_null(ibv_create_ah(e.pd, &aa));
	aa.is_global = 1;
	memset(aa.grh.dgid.raw, 0x11, 16);
	cr_assert_null(ibv_create_ah(e.pd, &aa), "a GID that is no software EFA device");
	ibv_destroy_ah(a1);
	ibv_destroy_ah(a2);
}

Test(sim_device, idle_device_does_not_spin)
{
	QpEnv e;
	auto a = e.attr();
	ibv_qp *qp = e.create(a);
	cr_assert_not_null(qp);
	timespec t0, t1;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t0);
	/* Idle for 300 ms (the quantity measured, not a synchronisation). */
	poll(nullptr, 0, 300);
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t1);
	double ms = double(t1.tv_sec - t0.tv_sec) * 1e3 + double(t1.tv_nsec - t0.tv_nsec) / 1e6;
	cr_assert_lt(ms, 15.0, "idle device used %.1f ms of CPU in 300 ms", ms);
	ibv_destroy_qp(qp);
}

/*
 * The device's sysfs tree (efasim(7), SYSFS TREE): what upstream's efa provider reads.
 * ibdev_path/device names a PCI function, ibdev_path/device/driver is "efa", and
 * SYSFS_PATH/class/infiniband_verbs/abi_version holds the uverbs ABI. Before, ibdev_path
 * named /sys/class/infiniband/efasim0, which does not exist.
 */
Test(sim_device, sysfs_tree_as_rdma_core_software_reads_it, .init = [] {
	setenv("EFASIM_DEVICES", "2", 1);
	setenv("EFASIM_SYSFS_DIR", "/tmp/efasim-test-sysfs", 1);
})
{
	int n = 0;
	ibv_device **l = ibv_get_device_list(&n);
	cr_assert(l && n == 2);
	for (int i = 0; i < n; i++) {
		const std::string ib = l[i]->ibdev_path;
		cr_assert_eq(ib, "/tmp/efasim-test-sysfs/class/infiniband/efasim" + std::to_string(i));
		char real[PATH_MAX];
		cr_assert_not_null(realpath((ib + "/device").c_str(), real), "%s/device: %s", ib.c_str(), strerror(errno));
		const char *fn = strrchr(real, '/') + 1;
		unsigned dom, bus, dev, func;
		cr_assert_eq(sscanf(fn, "%x:%x:%x.%x", &dom, &bus, &dev, &func), 4, "'%s' is no PCI address", fn);
		cr_assert_not_null(realpath((ib + "/device/driver").c_str(), real));
		cr_assert_str_eq(strrchr(real, '/') + 1, "efa");
		struct stat st;
		cr_assert_eq(stat(l[i]->dev_path, &st), 0, "%s", l[i]->dev_path);
	}
	ibv_free_device_list(l);
	FILE *f = fopen("/tmp/efasim-test-sysfs/class/infiniband_verbs/abi_version", "r");
	cr_assert_not_null(f);
	int abi = 0;
	cr_assert_eq(fscanf(f, "%d", &abi), 1);
	fclose(f);
	cr_assert_eq(abi, 6);
}

/* rdma-core's fork status: the device never pins memory, so fork support is never
 * needed (like a kernel with copy-on-fork). Before, the symbol was not exported and a
 * program under LD_PRELOAD reached the real libibverbs. */
Test(sim_device, fork_support_is_unneeded)
{
	cr_assert_eq(ibv_is_fork_initialized(), IBV_FORK_UNNEEDED);
	cr_assert_eq(ibv_fork_init(), 0);
	cr_assert_eq(ibv_is_fork_initialized(), IBV_FORK_UNNEEDED);
}

/* num_comp_vectors: one per online CPU (at most 64); a CQ on a vector beyond is refused
 * with EINVAL as rdma-core's EFA provider does. Before: always 1. */
Test(sim_device, completion_vectors_follow_online_cpus)
{
	ibv_context *c = open_dev();
	const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	cr_assert_eq(c->num_comp_vectors, int(std::min<long>(cpus, 64)));
	for (int v = 0; v < c->num_comp_vectors; v++) {
		ibv_comp_channel *ch = ibv_create_comp_channel(c);
		cr_assert_not_null(ch);
		ibv_cq *cq = ibv_create_cq(c, 16, nullptr, ch, v);
		cr_assert_not_null(cq, "vector %d: %s", v, strerror(errno));
		cr_assert_eq(ibv_req_notify_cq(cq, 0), 0);
		ibv_destroy_cq(cq);
		ibv_destroy_comp_channel(ch);
	}
	errno = 0;
	cr_assert_null(ibv_create_cq(c, 16, nullptr, nullptr, c->num_comp_vectors));
	cr_assert_eq(errno, EINVAL);
	ibv_close_device(c);
}

/*
 * Completions of a QP destroyed before they were polled are not reported, as rdma-core
 * does: it finds no QP for them and answers EINVAL (consuming them) while another QP
 * still uses the CQ, and ENOENT when none does. Before, the device returned them, and
 * upstream's efa provider, which drains its CQ after destroying the QP, crashed looking
 * up a QP that was gone (seen in ft_atomic at endpoint close).
 */
Test(sim_device, completions_of_a_destroyed_qp_are_not_reported)
{
	for (bool other : {true, false}) {
		QpEnv env;
		ibv_qp_init_attr_ex a = env.attr();
		ibv_qp *qa = env.create(a);
		cr_assert_not_null(qa);
		ibv_qp_attr m{};
		m.qp_state = IBV_QPS_ERR;
		cr_assert_eq(ibv_modify_qp(qa, &m, IBV_QP_STATE), 0);
		uint8_t buf[64];
		ibv_mr *mr = ibv_reg_mr(env.pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE);
		ibv_sge sge{uintptr_t(buf), sizeof buf, mr->lkey};
		ibv_recv_wr wr{}, *bad = nullptr;
		wr.wr_id = 77;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		for (int i = 0; i < 2; i++)
			cr_assert_eq(ibv_post_recv(qa, &wr, &bad), 0); /* two FLUSHED completions queued */
		ibv_qp_init_attr_ex b = env.attr();
		ibv_qp *qb = other ? env.create(b) : nullptr;
		cr_assert(!other || qb);
		cr_assert_eq(ibv_destroy_qp(qa), 0);
		ibv_poll_cq_attr pa{};
		if (other) {
			cr_assert_eq(ibv_start_poll(env.cq, &pa), EINVAL, "the first stale completion");
			cr_assert_eq(ibv_start_poll(env.cq, &pa), EINVAL, "the second");
			cr_assert_eq(ibv_start_poll(env.cq, &pa), ENOENT);
			cr_assert_eq(ibv_destroy_qp(qb), 0);
		} else {
			cr_assert_eq(ibv_start_poll(env.cq, &pa), ENOENT, "a CQ no QP uses reports nothing");
		}
		ibv_dereg_mr(mr);
	}
}
