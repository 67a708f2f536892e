/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The fixture of the object tests (test_objects, test_eq_cq, test_av, test_rdm_drops):
 * one fabric and domain of the provider on the software device (fitest.h), and the
 * objects the tests open on it.
 */
#ifndef EFA_TEST_OBJTEST_H
#define EFA_TEST_OBJTEST_H

#include "fitest.h"

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_ext_efa.h>
#include <rdma/fi_rma.h>

#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstring>
#include <string>

namespace objtest {


struct Env {
	fi_info *info = nullptr;
	fid_fabric *fab = nullptr;
	fid_domain *dom = nullptr;
};

inline Env g;

/* fabric: "efa" (the RDM protocol) or "efa-direct"; null takes the first offered. */
inline void setup_fabric(const char *fabric)
{
	/* Logs at warn (fitest::use_provider): what a user sees; tests check some of it. */
	g.info = fitest::getinfo(fabric, FI_MSG | FI_RMA | FI_SOURCE);
	fitest::open_fabric(g.info, &g.fab, &g.dom);
}

inline void setup() { setup_fabric(nullptr); }

inline void teardown()
{
	if (g.dom)
		fi_close(&g.dom->fid);
	if (g.fab)
		fi_close(&g.fab->fid);
	fi_freeinfo(g.info);
	g = Env{};
}

inline fid_eq *open_eq()
{
	fi_eq_attr attr{};
	attr.size = 16;
	attr.wait_obj = FI_WAIT_UNSPEC;
	fid_eq *eq = nullptr;
	cr_assert_eq(fi_eq_open(g.fab, &attr, &eq, nullptr), 0);
	return eq;
}

inline fid_av *open_av(fi_av_type type, uint64_t flags = 0)
{
	fi_av_attr attr{};
	attr.type = type;
	attr.flags = flags;
	fid_av *av = nullptr;
	cr_assert_eq(fi_av_open(g.dom, &attr, &av, nullptr), 0);
	return av;
}

inline fid_cq *open_cq(fi_wait_obj wait = FI_WAIT_NONE)
{
	fi_cq_attr attr{};
	attr.format = FI_CQ_FORMAT_DATA;
	attr.size = 64;
	attr.wait_obj = wait;
	fid_cq *cq = nullptr;
	cr_assert_eq(fi_cq_open(g.dom, &attr, &cq, nullptr), 0);
	return cq;
}

/* An enabled endpoint with its own CQ on the shared AV. */
struct Ep {
	fid_ep *ep = nullptr;
	fid_cq *cq = nullptr;
	uint8_t addr[32] = {};
};

inline Ep open_ep(fid_av *av, fi_wait_obj wait = FI_WAIT_NONE)
{
	Ep e;
	cr_assert_eq(fi_endpoint(g.dom, g.info, &e.ep, nullptr), 0);
	e.cq = open_cq(wait);
	cr_assert_eq(fi_ep_bind(e.ep, &e.cq->fid, FI_TRANSMIT | FI_RECV), 0);
	cr_assert_eq(fi_ep_bind(e.ep, &av->fid, 0), 0);
	cr_assert_eq(fi_enable(e.ep), 0);
	size_t len = sizeof e.addr;
	cr_assert_eq(fi_getname(&e.ep->fid, e.addr, &len), 0);
	cr_assert_eq(len, 32u);
	return e;
}

inline void close_ep(Ep &e)
{
	cr_assert_eq(fi_close(&e.ep->fid), 0);
	cr_assert_eq(fi_close(&e.cq->fid), 0);
}

/* The GID (bytes 0-15), QP number (16-17) and QKEY (20-23) of an FI_ADDR_EFA address,
 * as fi_av_insertsvc's node and service. */
inline void node_service(const uint8_t *addr, std::string &node, std::string &service)
{
	char buf[INET6_ADDRSTRLEN];
	cr_assert_not_null(inet_ntop(AF_INET6, addr, buf, sizeof buf));
	node = buf;
	uint16_t qpn;
	uint32_t qkey;
	std::memcpy(&qpn, addr + 16, 2);
	std::memcpy(&qkey, addr + 20, 4);
	service = std::to_string(qpn) + ":" + std::to_string(qkey);
}


} // namespace objtest

#endif
