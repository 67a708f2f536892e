/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The provider's objects through the public libfabric API, in one process (objtest.h):
 * the error contract of the object model (children, double close, wrong classes,
 * unknown names and options), endpoint options and names, MR regv/regattr. EQ and CQ:
 * test_eq_cq; AV forms: test_av; malformed packets: test_rdm_drops.
 */
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_ext_efa.h>
#include <rdma/fi_rma.h>

#include <criterion/criterion.h>

#include "objtest.h"

#include <sys/uio.h>

#include <vector>

using namespace objtest;

TestSuite(objects, .init = setup, .fini = teardown, .timeout = 60);

/* ------------------------------------------------------------------ lifecycle */

Test(objects, closing_a_parent_with_children_is_busy)
{
	fid_eq *eq = open_eq();
	fid_cq *cq = open_cq();
	fid_av *av = open_av(FI_AV_TABLE);
	cr_assert_eq(fi_close(&g.fab->fid), -FI_EBUSY, "fabric with a domain and an EQ");
	cr_assert_eq(fi_close(&g.dom->fid), -FI_EBUSY, "domain with a CQ and an AV");
	fid_ep *ep = nullptr;
	cr_assert_eq(fi_endpoint(g.dom, g.info, &ep, nullptr), 0);
	cr_assert_eq(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV), 0);
	cr_assert_eq(fi_close(&cq->fid), -FI_EBUSY, "CQ bound to an endpoint");
	cr_assert_eq(fi_close(&ep->fid), 0);
	cr_assert_eq(fi_close(&cq->fid), 0);
	cr_assert_eq(fi_close(&av->fid), 0);
	cr_assert_eq(fi_close(&g.dom->fid), 0);
	g.dom = nullptr;
	cr_assert_eq(fi_close(&g.fab->fid), -FI_EBUSY, "the EQ is still open");
	cr_assert_eq(fi_close(&eq->fid), 0);
}

Test(objects, closed_objects_answer_einval)
{
	fid_cq *cq = open_cq();
	cr_assert_eq(fi_close(&cq->fid), 0);
	cr_assert_eq(fi_close(&cq->fid), -FI_EINVAL, "second close");
	fi_cq_data_entry e;
	cr_assert_eq(fi_cq_read(cq, &e, 1), -FI_EINVAL, "read after close");

	fid_av *av = open_av(FI_AV_TABLE);
	cr_assert_eq(fi_close(&av->fid), 0);
	fi_addr_t a = 0;
	cr_assert_eq(fi_av_remove(av, &a, 1, 0), -FI_EINVAL);
}

Test(objects, wrong_classes_and_unknown_names)
{
	fid_av *av = open_av(FI_AV_TABLE);
	fid_cq *cq = open_cq();
	fid_ep *ep = nullptr;
	cr_assert_eq(fi_endpoint(g.dom, g.info, &ep, nullptr), 0);
	/* A domain is no CQ, AV, EQ or counter. */
	cr_assert_neq(fi_ep_bind(ep, &g.dom->fid, 0), 0);
	/* A CQ bound without saying which side. */
	cr_assert_neq(fi_ep_bind(ep, &cq->fid, 0), 0);
	/* Nor is a fabric; and an AV is bound with no flags. */
	cr_assert_neq(fi_ep_bind(ep, &g.fab->fid, 0), 0);
	cr_assert_eq(fi_ep_bind(ep, &av->fid, FI_SEND), -FI_EINVAL);
	/* A CQ given to fi_av_bind, an AV to fi_cntr... wrong classes behind the right call. */
	cr_assert_eq(fi_av_bind(av, &cq->fid, 0), -FI_EINVAL);
	/* Sends before fi_enable. */
	char b = 0;
	cr_assert_eq(fi_inject(ep, &b, 1, 0), -FI_EOPBADSTATE);
	/* Open names, options and cancel. */
	void *ops = nullptr;
	cr_assert_eq(fi_open_ops(&g.dom->fid, "no-such-ops", 0, &ops, nullptr), -FI_ENOSYS);
	cr_assert_eq(fi_open_ops(&g.fab->fid, "no-such-ops", 0, &ops, nullptr), -FI_ENOSYS);
	size_t v = 0, len = sizeof v;
	cr_assert_eq(fi_getopt(&ep->fid, FI_OPT_ENDPOINT, 0x7fff0000, &v, &len), -FI_ENOPROTOOPT);
	cr_assert_eq(fi_setopt(&ep->fid, FI_OPT_ENDPOINT, 0x7fff0000, &v, len), -FI_ENOPROTOOPT);
	cr_assert_eq(fi_getopt(&ep->fid, FI_OPT_EFA_RNR_RETRY, 0, &v, &len), -FI_ENOPROTOOPT, "a wrong level");
	cr_assert_eq(fi_cancel(&ep->fid, nullptr), -FI_ENOSYS);
	cr_assert_eq(fi_close(&ep->fid), 0);
	cr_assert_eq(fi_close(&cq->fid), 0);
	cr_assert_eq(fi_close(&av->fid), 0);
}

Test(objects, endpoint_options_and_getname)
{
	fid_av *av = open_av(FI_AV_TABLE);
	fid_ep *ep = nullptr;
	cr_assert_eq(fi_endpoint(g.dom, g.info, &ep, nullptr), 0);
	size_t retry = 0, len = sizeof retry;
	cr_assert_eq(fi_getopt(&ep->fid, FI_OPT_ENDPOINT, FI_OPT_EFA_RNR_RETRY, &retry, &len), 0);
	cr_assert_eq(retry, 7u, "efa-direct retries RNR forever by default");
	retry = 8;
	cr_assert_eq(fi_setopt(&ep->fid, FI_OPT_ENDPOINT, FI_OPT_EFA_RNR_RETRY, &retry, sizeof retry), -FI_EINVAL);
	retry = 3;
	cr_assert_eq(fi_setopt(&ep->fid, FI_OPT_ENDPOINT, FI_OPT_EFA_RNR_RETRY, &retry, sizeof retry), 0);
	bool rdma = false;
	cr_assert_eq(fi_setopt(&ep->fid, FI_OPT_ENDPOINT, FI_OPT_EFA_USE_DEVICE_RDMA, &rdma, sizeof rdma),
		     -FI_EOPNOTSUPP, "RMA without device RDMA on efa-direct");
	rdma = true;
	cr_assert_eq(fi_setopt(&ep->fid, FI_OPT_ENDPOINT, FI_OPT_EFA_USE_DEVICE_RDMA, &rdma, sizeof rdma), 0);

	fid_cq *cq = open_cq();
	cr_assert_eq(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV), 0);
	cr_assert_eq(fi_ep_bind(ep, &av->fid, 0), 0);
	cr_assert_eq(fi_enable(ep), 0);
	retry = 5;
	cr_assert_eq(fi_setopt(&ep->fid, FI_OPT_ENDPOINT, FI_OPT_EFA_RNR_RETRY, &retry, sizeof retry), -FI_EINVAL,
		     "after fi_enable");
	len = sizeof retry;
	cr_assert_eq(fi_getopt(&ep->fid, FI_OPT_ENDPOINT, FI_OPT_EFA_RNR_RETRY, &retry, &len), 0);
	cr_assert_eq(retry, 3u);

	uint8_t addr[32];
	size_t alen = 8;
	cr_assert_eq(fi_getname(&ep->fid, addr, &alen), -FI_ETOOSMALL);
	cr_assert_eq(alen, 32u, "the length needed comes back");
	cr_assert_eq(fi_getname(&ep->fid, addr, &alen), 0);
	cr_assert_eq(fi_close(&ep->fid), 0);
	cr_assert_eq(fi_close(&cq->fid), 0);
	cr_assert_eq(fi_close(&av->fid), 0);
}

/* ------------------------------------------------------------------ MR */

Test(objects, mr_regv_and_regattr)
{
	std::vector<char> buf(4096, 'x');
	iovec iov[2] = {{buf.data(), 2048}, {buf.data() + 2048, 2048}};
	fid_mr *mr = nullptr;
	cr_assert_eq(fi_mr_regv(g.dom, iov, 1, FI_SEND | FI_RECV, 0, 0, 0, &mr, nullptr), 0);
	cr_assert_not_null(fi_mr_desc(mr));
	cr_assert_neq(fi_mr_key(mr), FI_KEY_NOTAVAIL);
	cr_assert_eq(fi_close(&mr->fid), 0);
	cr_assert_eq(fi_mr_regv(g.dom, iov, 2, FI_SEND, 0, 0, 0, &mr, nullptr), -FI_EINVAL,
		     "mr_iov_limit is 1");

	fi_mr_attr attr{};
	attr.mr_iov = iov;
	attr.iov_count = 1;
	attr.access = FI_REMOTE_READ | FI_REMOTE_WRITE | FI_READ | FI_WRITE;
	cr_assert_eq(fi_mr_regattr(g.dom, &attr, 0, &mr), 0);
	fid_mr *mr2 = nullptr;
	cr_assert_eq(fi_mr_regattr(g.dom, &attr, 0, &mr2), 0);
	cr_assert_neq(fi_mr_key(mr), fi_mr_key(mr2), "provider keys are distinct");
	cr_assert_eq(fi_close(&mr2->fid), 0);
	cr_assert_eq(fi_close(&mr->fid), 0);

	attr.iface = FI_HMEM_CUDA;
	cr_assert_eq(fi_mr_regattr(g.dom, &attr, 0, &mr), -FI_EOPNOTSUPP, "no device memory");
}

