/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The shared start of the tests that use the provider through libfabric's public API in
 * one process (test_objects, test_misuse, test_exhaustion, test_cq_bound,
 * test_qp_features, test_rma_safety, test_rdm_peer, test_rdm_inject): libfabric loads
 * the provider from the build tree (FI_PROVIDER_PATH) on the software device, as
 * simtest.h is the shared start of the tests of the device itself.
 *
 * A test binary defines EFA_TEST_PROV_DIR and EFA_TEST_SIM_PATH (Makefile.am).
 */
#ifndef EFA_TEST_FITEST_H
#define EFA_TEST_FITEST_H

#include <criterion/criterion.h>
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_errno.h>

#include <cstdlib>
#include <cstring>

namespace fitest {

/* What a portable application offers: the efa fabric needs none of it, efa-direct
 * needs FI_MR_LOCAL, FI_MR_ALLOCATED, FI_MR_PROV_KEY and FI_MR_VIRT_ADDR. */
inline constexpr uint64_t kMrMode = FI_MR_LOCAL | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_VIRT_ADDR;

/* The provider of the build tree on the software device. Logs at warn unless the
 * environment asks for more; `warn_only`: always warn (tests that check what a user
 * sees in the log). */
inline void use_provider(bool warn_only = false)
{
	setenv("FI_PROVIDER_PATH", EFA_TEST_PROV_DIR, 1);
	setenv("FI_PROVIDER", "efa", 1);
	setenv("FI_EFA_SIM", "1", 1);
	setenv("FI_EFA_SIM_PATH", EFA_TEST_SIM_PATH, 1);
	/* The device path, unless a test asks for shm (the efa fabric's default). */
	setenv("FI_EFA_ENABLE_SHM_TRANSFER", "0", 0);
	setenv("FI_LOG_LEVEL", "warn", warn_only ? 1 : 0);
}

/* fi_getinfo (API 1.17) for RDM endpoints of the efa provider with `caps` on `fabric`
 * ("efa", "efa-direct", or null for the first offered); `tweak` may change the hints
 * first. Asserts success. */
template <typename F> fi_info *getinfo(const char *fabric, uint64_t caps, uint64_t mr_mode, F &&tweak)
{
	use_provider();
	fi_info *hints = fi_allocinfo();
	hints->caps = caps;
	hints->mode = FI_CONTEXT | FI_CONTEXT2;
	hints->ep_attr->type = FI_EP_RDM;
	hints->domain_attr->mr_mode = int(mr_mode);
	hints->fabric_attr->prov_name = strdup("efa");
	if (fabric)
		hints->fabric_attr->name = strdup(fabric);
	tweak(hints);
	fi_info *info = nullptr;
	const int ret = fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, hints, &info);
	fi_freeinfo(hints);
	cr_assert_eq(ret, 0, "fi_getinfo (fabric %s, caps %#lx): %s", fabric ? fabric : "any", (unsigned long)caps,
		     fi_strerror(-ret));
	return info;
}

inline fi_info *getinfo(const char *fabric, uint64_t caps, uint64_t mr_mode = kMrMode)
{
	return getinfo(fabric, caps, mr_mode, [](fi_info *) {});
}

/* fi_fabric, and fi_domain when `dom` is not null. */
inline void open_fabric(fi_info *info, fid_fabric **fab, fid_domain **dom = nullptr)
{
	cr_assert_eq(fi_fabric(info->fabric_attr, fab, nullptr), 0);
	if (dom)
		cr_assert_eq(fi_domain(*fab, info, dom, nullptr), 0);
}

/* One RDM endpoint on its own domain, AV (FI_AV_TABLE) and CQ (tagged format, both
 * directions), enabled, with its name; `peer` is for the caller's fi_av_insert. */
struct Side {
	fid_domain *dom = nullptr;
	fid_av *av = nullptr;
	fid_cq *cq = nullptr;
	fid_ep *ep = nullptr;
	uint8_t name[64] = {};
	fi_addr_t peer = FI_ADDR_NOTAVAIL;
};

inline void open_side(fid_fabric *fab, fi_info *info, Side &s, size_t cq_size = 0)
{
	cr_assert_eq(fi_domain(fab, info, &s.dom, nullptr), 0);
	fi_av_attr aa{};
	aa.type = FI_AV_TABLE;
	cr_assert_eq(fi_av_open(s.dom, &aa, &s.av, nullptr), 0);
	fi_cq_attr ca{};
	ca.format = FI_CQ_FORMAT_TAGGED;
	ca.size = cq_size;
	cr_assert_eq(fi_cq_open(s.dom, &ca, &s.cq, nullptr), 0);
	cr_assert_eq(fi_endpoint(s.dom, info, &s.ep, nullptr), 0);
	cr_assert_eq(fi_ep_bind(s.ep, &s.cq->fid, FI_TRANSMIT | FI_RECV), 0);
	cr_assert_eq(fi_ep_bind(s.ep, &s.av->fid, 0), 0);
	cr_assert_eq(fi_enable(s.ep), 0);
	size_t len = sizeof s.name;
	cr_assert_eq(fi_getname(&s.ep->fid, s.name, &len), 0);
}

/* Closes what open_side opened (each must close: nothing else is left open on them). */
inline void close_side(Side &s)
{
	cr_assert_eq(fi_close(&s.ep->fid), 0);
	cr_assert_eq(fi_close(&s.cq->fid), 0);
	cr_assert_eq(fi_close(&s.av->fid), 0);
	cr_assert_eq(fi_close(&s.dom->fid), 0);
	s = Side{};
}

/* Two sides that know each other. */
inline void open_pair(fid_fabric *fab, fi_info *info, Side &a, Side &b, size_t cq_size = 0)
{
	open_side(fab, info, a, cq_size);
	open_side(fab, info, b, cq_size);
	cr_assert_eq(fi_av_insert(a.av, b.name, 1, &a.peer, 0, nullptr), 1);
	cr_assert_eq(fi_av_insert(b.av, a.name, 1, &b.peer, 0, nullptr), 1);
}

} // namespace fitest

#endif
