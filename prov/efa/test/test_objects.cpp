/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The provider's objects through the public libfabric API, in one process: libfabric
 * loads the provider from the build tree (FI_PROVIDER_PATH) on the software device.
 * What the functional programs in fabtests/ do not reach: EQ semantics, AV forms
 * (insertsvc, FI_AV_MAP, asynchronous insert, FI_SYNC_ERR, remove), MR regv/regattr,
 * sreadfrom's source address and timeout, and the error contract of the object model
 * (children, double close, wrong classes, unknown names and options).
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

#include "../sim/wire.h"
#include "rdm/pkt.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

struct Env {
	fi_info *info = nullptr;
	fid_fabric *fab = nullptr;
	fid_domain *dom = nullptr;
};

Env g;

/* fabric: "efa" (the RDM protocol) or "efa-direct"; null takes the first offered. */
void setup_fabric(const char *fabric)
{
	setenv("FI_PROVIDER_PATH", EFA_TEST_PROV_DIR, 1);
	setenv("FI_PROVIDER", "efa", 1);
	setenv("FI_EFA_SIM", "1", 1);
	setenv("FI_EFA_SIM_PATH", EFA_TEST_SIM_PATH, 1);
	setenv("FI_LOG_LEVEL", "warn", 0); /* what a user sees: tests check some of it */
	fi_info *hints = fi_allocinfo();
	hints->caps = FI_MSG | FI_RMA | FI_SOURCE;
	hints->mode = FI_CONTEXT | FI_CONTEXT2;
	hints->ep_attr->type = FI_EP_RDM;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_VIRT_ADDR;
	hints->fabric_attr->prov_name = strdup("efa");
	if (fabric)
		hints->fabric_attr->name = strdup(fabric);
	int ret = fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, hints, &g.info);
	fi_freeinfo(hints);
	cr_assert_eq(ret, 0, "fi_getinfo: %s", fi_strerror(-ret));
	cr_assert_eq(fi_fabric(g.info->fabric_attr, &g.fab, nullptr), 0);
	cr_assert_eq(fi_domain(g.fab, g.info, &g.dom, nullptr), 0);
}

void setup() { setup_fabric(nullptr); }

void teardown()
{
	if (g.dom)
		fi_close(&g.dom->fid);
	if (g.fab)
		fi_close(&g.fab->fid);
	fi_freeinfo(g.info);
	g = Env{};
}

fid_eq *open_eq()
{
	fi_eq_attr attr{};
	attr.size = 16;
	attr.wait_obj = FI_WAIT_UNSPEC;
	fid_eq *eq = nullptr;
	cr_assert_eq(fi_eq_open(g.fab, &attr, &eq, nullptr), 0);
	return eq;
}

fid_av *open_av(fi_av_type type, uint64_t flags = 0)
{
	fi_av_attr attr{};
	attr.type = type;
	attr.flags = flags;
	fid_av *av = nullptr;
	cr_assert_eq(fi_av_open(g.dom, &attr, &av, nullptr), 0);
	return av;
}

fid_cq *open_cq(fi_wait_obj wait = FI_WAIT_NONE)
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

Ep open_ep(fid_av *av, fi_wait_obj wait = FI_WAIT_NONE)
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

void close_ep(Ep &e)
{
	cr_assert_eq(fi_close(&e.ep->fid), 0);
	cr_assert_eq(fi_close(&e.cq->fid), 0);
}

/* The GID (bytes 0-15), QP number (16-17) and QKEY (20-23) of an FI_ADDR_EFA address,
 * as fi_av_insertsvc's node and service. */
void node_service(const uint8_t *addr, std::string &node, std::string &service)
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

} // namespace

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

/* ------------------------------------------------------------------ EQ */

Test(objects, eq_events_in_order_with_peek_and_timeout)
{
	fid_eq *eq = open_eq();
	fi_eq_entry in[3];
	for (int i = 0; i < 3; i++) {
		in[i] = fi_eq_entry{nullptr, reinterpret_cast<void *>(uintptr_t(0x100 + i)), uint64_t(i)};
		cr_assert_eq(fi_eq_write(eq, FI_NOTIFY, &in[i], sizeof in[i], 0), ssize_t(sizeof in[i]));
	}
	fi_eq_entry out;
	uint32_t event = 0;
	cr_assert_eq(fi_eq_read(eq, &event, &out, sizeof out, FI_PEEK), ssize_t(sizeof out));
	cr_assert_eq(out.data, 0u, "peek sees the first");
	for (int i = 0; i < 3; i++) {
		cr_assert_eq(fi_eq_read(eq, &event, &out, sizeof out, 0), ssize_t(sizeof out));
		cr_assert_eq(event, uint32_t(FI_NOTIFY));
		cr_assert_eq(out.data, uint64_t(i));
		cr_assert_eq(out.context, in[i].context);
	}
	cr_assert_eq(fi_eq_read(eq, &event, &out, sizeof out, 0), -FI_EAGAIN);
	fi_eq_err_entry err{};
	cr_assert_eq(fi_eq_readerr(eq, &err, 0), -FI_EAGAIN);

	/* A timed sread on an empty EQ returns after the timeout, not before. */
	auto t0 = std::chrono::steady_clock::now();
	cr_assert_eq(fi_eq_sread(eq, &event, &out, sizeof out, 50, 0), -FI_EAGAIN);
	auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
	cr_assert_geq(ms.count(), 49);

	/* An infinite sread returns the event another thread writes. */
	std::thread writer([&] { fi_eq_write(eq, FI_NOTIFY, &in[2], sizeof in[2], 0); });
	cr_assert_eq(fi_eq_sread(eq, &event, &out, sizeof out, -1, 0), ssize_t(sizeof out));
	writer.join();
	cr_assert_eq(out.data, 2u);

	/* A buffer too small for the event. */
	cr_assert_eq(fi_eq_write(eq, FI_NOTIFY, &in[0], sizeof in[0], 0), ssize_t(sizeof in[0]));
	cr_assert_eq(fi_eq_read(eq, &event, &out, 4, 0), -FI_ETOOSMALL);
	cr_assert_eq(fi_close(&eq->fid), 0);
}

/* ------------------------------------------------------------------ AV */

Test(objects, av_table_insert_lookup_straddr_remove)
{
	fid_av *av = open_av(FI_AV_TABLE);
	Ep a = open_ep(av), b = open_ep(av);
	uint8_t both[64];
	std::memcpy(both, a.addr, 32);
	std::memcpy(both + 32, b.addr, 32);
	fi_addr_t fa[2] = {FI_ADDR_NOTAVAIL, FI_ADDR_NOTAVAIL};
	cr_assert_eq(fi_av_insert(av, both, 2, fa, 0, nullptr), 2);
	cr_assert_eq(fa[0], 0u, "FI_AV_TABLE numbers from 0");
	cr_assert_eq(fa[1], 1u);

	uint8_t back[32];
	size_t len = sizeof back;
	cr_assert_eq(fi_av_lookup(av, fa[1], back, &len), 0);
	cr_assert_eq(len, 32u);
	cr_assert_eq(std::memcmp(back, b.addr, 32), 0);

	char text[128];
	size_t tlen = sizeof text;
	cr_assert_not_null(fi_av_straddr(av, a.addr, text, &tlen));
	cr_assert_eq(tlen, strlen(text) + 1);
	tlen = 4;
	fi_av_straddr(av, a.addr, text, &tlen);
	cr_assert_gt(tlen, 4u, "the length needed comes back");

	/* The same endpoint by node and service. */
	std::string node, service;
	node_service(b.addr, node, service);
	fi_addr_t fs = FI_ADDR_NOTAVAIL;
	cr_assert_eq(fi_av_insertsvc(av, node.c_str(), service.c_str(), &fs, 0, nullptr), 1);
	len = sizeof back;
	cr_assert_eq(fi_av_lookup(av, fs, back, &len), 0);
	cr_assert_eq(std::memcmp(back, b.addr, 24), 0, "GID, QP number and QKEY");
	cr_assert_eq(fi_av_insertsvc(av, "not-a-gid", "1:2", &fs, 0, nullptr), -FI_EINVAL);

	cr_assert_eq(fi_av_remove(av, &fa[1], 1, 0), 0);
	len = sizeof back;
	cr_assert_eq(fi_av_lookup(av, fa[1], back, &len), -FI_ENOENT);
	cr_assert_eq(fi_av_remove(av, &fa[1], 1, 0), -FI_EINVAL, "removed twice");
	char c = 1;
	/* The user learns why, once: libfabric's log goes to stderr. */
	fflush(stderr);
	FILE *log = tmpfile();
	cr_assert_not_null(log);
	const int saved = dup(2);
	dup2(fileno(log), 2);
	cr_assert_eq(fi_inject(a.ep, &c, 1, fa[1]), -FI_EINVAL, "a send to a removed address");
	cr_assert_eq(fi_inject(a.ep, &c, 1, fa[1]), -FI_EINVAL, "again");
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	std::string logged;
	rewind(log);
	for (int ch; (ch = fgetc(log)) != EOF;)
		logged += char(ch);
	fclose(log);
	cr_assert(logged.find("not in the endpoint's address vector") != std::string::npos &&
			  logged.find("fi_av_insert") != std::string::npos,
		  "no log line naming the cause and the fix: '%s'", logged.c_str());
	cr_assert_eq(logged.find("not in the endpoint's address vector"),
		     logged.rfind("not in the endpoint's address vector"), "logged more than once");
	close_ep(a);
	close_ep(b);
	cr_assert_eq(fi_close(&av->fid), 0);
}

Test(objects, av_map_and_sync_errors)
{
	fid_av *av = open_av(FI_AV_MAP);
	Ep a = open_ep(av);
	uint8_t two[64];
	std::memcpy(two, a.addr, 32);
	std::memcpy(two + 32, a.addr, 32);
	std::memset(two + 32 + 16, 0, 2); /* QP number 0: never an endpoint */
	fi_addr_t fa[2];
	int errs[2] = {-1, -1};
	cr_assert_eq(fi_av_insert(av, two, 2, fa, FI_SYNC_ERR, errs), 1);
	cr_assert_eq(errs[0], 0);
	cr_assert_eq(errs[1], FI_EINVAL);
	cr_assert_neq(fa[0], FI_ADDR_NOTAVAIL);
	cr_assert_eq(fa[1], FI_ADDR_NOTAVAIL);
	uint8_t back[32];
	size_t len = sizeof back;
	cr_assert_eq(fi_av_lookup(av, fa[0], back, &len), 0);
	cr_assert_eq(std::memcmp(back, a.addr, 32), 0);
	close_ep(a);
	cr_assert_eq(fi_close(&av->fid), 0);
}

Test(objects, av_asynchronous_insert_reports_on_the_eq)
{
	fid_eq *eq = open_eq();
	fid_av *av = open_av(FI_AV_TABLE, FI_EVENT);
	cr_assert_eq(fi_av_bind(av, &eq->fid, 0), 0);
	Ep a = open_ep(av);
	uint8_t two[64];
	std::memcpy(two, a.addr, 32);
	std::memcpy(two + 32, a.addr, 32);
	std::memset(two + 32 + 16, 0, 2);
	fi_addr_t fa[2];
	int ctx = 0;
	cr_assert_eq(fi_av_insert(av, two, 2, fa, 0, &ctx), 0, "asynchronous: 0 at return");

	/* The failed address first, as an error entry naming its index. */
	uint32_t event = 0;
	fi_eq_entry e;
	cr_assert_eq(fi_eq_read(eq, &event, &e, sizeof e, 0), -FI_EAVAIL);
	fi_eq_err_entry err{};
	cr_assert_eq(fi_eq_readerr(eq, &err, 0), ssize_t(sizeof err));
	cr_assert_eq(err.fid, &av->fid);
	cr_assert_eq(err.context, &ctx);
	cr_assert_eq(err.data, 1u, "index of the failed address");
	cr_assert_eq(err.err, FI_EINVAL);
	char buf[128];
	cr_assert_not_null(fi_eq_strerror(eq, err.prov_errno, err.err_data, buf, sizeof buf));
	cr_assert_gt(strlen(buf), 0u);

	cr_assert_eq(fi_eq_sread(eq, &event, &e, sizeof e, 1000, 0), ssize_t(sizeof e));
	cr_assert_eq(event, uint32_t(FI_AV_COMPLETE));
	cr_assert_eq(e.fid, &av->fid);
	cr_assert_eq(e.context, &ctx);
	cr_assert_eq(e.data, 1u, "one address inserted");
	cr_assert_eq(fa[0], 0u);
	cr_assert_eq(fa[1], FI_ADDR_NOTAVAIL);

	cr_assert_eq(fi_close(&eq->fid), -FI_EBUSY, "bound to the AV");
	close_ep(a);
	cr_assert_eq(fi_close(&av->fid), 0);
	cr_assert_eq(fi_close(&eq->fid), 0);
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

/* ------------------------------------------------------------------ CQ */

Test(objects, cq_sreadfrom_gives_the_source_and_honours_the_timeout)
{
	fid_av *av = open_av(FI_AV_TABLE);
	Ep a = open_ep(av, FI_WAIT_UNSPEC), b = open_ep(av, FI_WAIT_UNSPEC);
	fi_addr_t fa[2];
	cr_assert_eq(fi_av_insert(av, a.addr, 1, &fa[0], 0, nullptr), 1);
	cr_assert_eq(fi_av_insert(av, b.addr, 1, &fa[1], 0, nullptr), 1);

	fi_cq_data_entry e[2];
	fi_addr_t src = 0;
	auto t0 = std::chrono::steady_clock::now();
	cr_assert_eq(fi_cq_sreadfrom(b.cq, e, 2, &src, nullptr, 50), -FI_EAGAIN);
	auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
	cr_assert_geq(ms.count(), 49);

	std::vector<char> rbuf(256, 0), sbuf(256);
	for (size_t i = 0; i < sbuf.size(); i++)
		sbuf[i] = char(i * 7 + 1);
	fid_mr *rmr = nullptr, *smr = nullptr;
	cr_assert_eq(fi_mr_reg(g.dom, rbuf.data(), rbuf.size(), FI_RECV, 0, 0, 0, &rmr, nullptr), 0);
	cr_assert_eq(fi_mr_reg(g.dom, sbuf.data(), sbuf.size(), FI_SEND, 0, 0, 0, &smr, nullptr), 0);
	int rctx = 0, sctx = 0;
	cr_assert_eq(fi_recv(b.ep, rbuf.data(), rbuf.size(), fi_mr_desc(rmr), FI_ADDR_UNSPEC, &rctx), 0);
	cr_assert_eq(fi_senddata(a.ep, sbuf.data(), sbuf.size(), fi_mr_desc(smr), 0xabcd, fa[1], &sctx), 0);

	cr_assert_eq(fi_cq_sreadfrom(b.cq, e, 2, &src, nullptr, 5000), 1);
	cr_assert_eq(e[0].op_context, &rctx);
	cr_assert(e[0].flags & FI_RECV);
	cr_assert(e[0].flags & FI_REMOTE_CQ_DATA);
	cr_assert_eq(e[0].data, 0xabcdu);
	cr_assert_eq(e[0].len, sbuf.size());
	cr_assert_eq(src, fa[0], "FI_SOURCE: the sender's fi_addr");
	cr_assert_eq(std::memcmp(rbuf.data(), sbuf.data(), sbuf.size()), 0);
	cr_assert_eq(fi_cq_sread(a.cq, e, 2, nullptr, 5000), 1);
	cr_assert_eq(e[0].op_context, &sctx);
	cr_assert(e[0].flags & FI_SEND);

	int fd = -1;
	cr_assert_eq(fi_control(&b.cq->fid, FI_GETWAIT, &fd), 0);
	cr_assert_geq(fd, 0);

	cr_assert_eq(fi_close(&rmr->fid), 0);
	cr_assert_eq(fi_close(&smr->fid), 0);
	close_ep(a);
	close_ep(b);
	cr_assert_eq(fi_close(&av->fid), 0);
}

Test(objects, cq_without_wait_object_refuses_sread)
{
	fid_cq *cq = open_cq(FI_WAIT_NONE);
	fi_cq_data_entry e;
	cr_assert_eq(fi_cq_sread(cq, &e, 1, nullptr, 10), -FI_EINVAL);
	int fd = -1;
	cr_assert_neq(fi_control(&cq->fid, FI_GETWAIT, &fd), 0);
	cr_assert_eq(fi_close(&cq->fid), 0);
}

/* ------------------------------------------------------------------ malformed packets */

namespace {

/* stderr into a string while it lives. */
class CaptureStderr {
public:
	CaptureStderr()
	{
		fflush(stderr);
		file_ = tmpfile();
		cr_assert_not_null(file_);
		saved_ = dup(2);
		dup2(fileno(file_), 2);
	}
	std::string end()
	{
		fflush(stderr);
		dup2(saved_, 2);
		close(saved_);
		std::string s;
		rewind(file_);
		for (int ch; (ch = fgetc(file_)) != EOF;)
			s += char(ch);
		fclose(file_);
		return s;
	}

private:
	FILE *file_ = nullptr;
	int saved_ = -1;
};

/* An RDM packet written with the provider's own writer. */
template <typename H, typename F>
std::vector<uint8_t> rdm_packet(efa::rdm::PktType type, uint32_t conn, uint16_t flags, const efa::RawAddr *ra,
				size_t payload, F fill)
{
	alignas(8) uint8_t buf[512];
	efa::rdm::PktWriter w(buf, sizeof buf);
	fill(*w.header<H>(type, conn, flags));
	if (ra)
		w.raw_addr(*ra);
	if (void *p = w.reserve(payload))
		std::memset(p, 0x33, payload);
	cr_assert(w.ok());
	return std::vector<uint8_t>(buf, buf + w.size());
}

} // namespace

/* The efa fabric (the RDM protocol), at info level for the endpoint's closing line with
 * its drop counters. */
TestSuite(objects_wire, .init = [] {
	setenv("FI_LOG_LEVEL", "info", 1);
	setup_fabric("efa");
}, .fini = teardown, .timeout = 60);

/*
 * Packets an efa endpoint must not trust, delivered by the device as SENDs from a QP the
 * endpoint never heard of (a UDP socket speaking the device's wire format, whose address
 * matches the GID/QPN it claims): too short, another protocol version, an EAGER whose
 * length lies, and a HANDSHAKE with an impossible MTU and window. Each is dropped and
 * counted (the endpoint's closing line says how many), the user is told once what to do,
 * and the endpoint then receives a real message intact.
 */
Test(objects_wire, malformed_packets_are_dropped_counted_and_logged_once)
{
	fid_av *av = open_av(FI_AV_TABLE);
	Ep a = open_ep(av), b = open_ep(av);
	fi_addr_t fa;
	cr_assert_eq(fi_av_insert(av, a.addr, 1, &fa, 0, nullptr), 1);
	efa::RawAddr ea;
	std::memcpy(&ea, a.addr, sizeof ea);

	/* A socket on the device's address; the QPN its port stands for. */
	const uint32_t base = uint32_t(ea.gid[4] << 8 | ea.gid[5]);
	sockaddr_in qpa{};
	qpa.sin_family = AF_INET;
	qpa.sin_port = htons(uint16_t(base + ea.qpn));
	std::memcpy(&qpa.sin_addr.s_addr, &ea.gid[12], 4);
	const int s = socket(AF_INET, SOCK_DGRAM, 0);
	cr_assert_geq(s, 0);
	sockaddr_in me{};
	me.sin_family = AF_INET;
	me.sin_addr = qpa.sin_addr;
	cr_assert_eq(bind(s, reinterpret_cast<sockaddr *>(&me), sizeof me), 0);
	socklen_t ml = sizeof me;
	cr_assert_eq(getsockname(s, reinterpret_cast<sockaddr *>(&me), &ml), 0);
	cr_assert_gt(ntohs(me.sin_port), base);
	const uint16_t my_qpn = uint16_t(ntohs(me.sin_port) - base);
	efa::RawAddr mine = ea; /* same device: same GID */
	mine.qpn = my_qpn;
	mine.qkey = 0x4242;

	using namespace efa::rdm;
	std::vector<std::vector<uint8_t>> bad;
	bad.push_back(std::vector<uint8_t>(5, 0x01));
	bad.push_back(rdm_packet<EagerHdr>(PktType::EagerMsg, mine.qkey, 0, nullptr, 8, [](EagerHdr &h) {
		h.rtm.seg_len = 8;
		h.rtm.base.version = 9;
	}));
	bad.push_back(rdm_packet<EagerHdr>(PktType::EagerMsg, mine.qkey, 0, nullptr, 8, [](EagerHdr &h) {
		h.rtm.seg_len = 4000; /* more than it carries */
	}));
	bad.push_back(rdm_packet<HandshakeHdr>(PktType::Handshake, mine.qkey, kFlagRawAddr, &mine, 0, [](HandshakeHdr &h) {
		h.features = kFeatKnown;
		h.max_payload = 0;
		h.rx_window = 3;
	}));

	CaptureStderr cap;
	uint32_t seq = 0;
	for (const auto &pkt : bad) {
		efasim::WireHdr h{};
		h.magic = efasim::kWireMagic;
		h.version = efasim::kWireVersion;
		h.type = efasim::PKT_SEND;
		h.src_qpn = my_qpn;
		h.dst_qpn = ea.qpn;
		h.qkey = ea.qkey;
		std::memcpy(h.src_gid, ea.gid, 16);
		h.epoch = 1;
		h.seq = seq++;
		efasim::SendBody sb{};
		sb.msg_len = uint32_t(pkt.size());
		h.body_len = uint32_t(sizeof sb + pkt.size());
		std::vector<uint8_t> d(sizeof h + sizeof sb + pkt.size());
		std::memcpy(d.data(), &h, sizeof h);
		std::memcpy(d.data() + sizeof h, &sb, sizeof sb);
		std::memcpy(d.data() + sizeof h + sizeof sb, pkt.data(), pkt.size());
		cr_assert_eq(sendto(s, d.data(), d.size(), 0, reinterpret_cast<sockaddr *>(&qpa), sizeof qpa),
			     ssize_t(d.size()));
	}

	/* The device acknowledges what it delivered: once it acknowledged all of them, their
	 * receive completions are queued ahead of anything sent later. */
	bool acked = false;
	for (auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
	     !acked && std::chrono::steady_clock::now() < end;) {
		pollfd pfd{s, POLLIN, 0};
		if (poll(&pfd, 1, 1000) != 1)
			continue;
		alignas(8) uint8_t in[9000];
		const ssize_t n = recv(s, in, sizeof in, 0);
		efasim::Parsed pk;
		if (n > 0 && efasim::parse(in, size_t(n), pk) && (pk.hdr->flags & efasim::PF_ACK) &&
		    pk.hdr->ack_epoch == 1 && efasim::seq_le(seq, pk.hdr->ack_cum))
			acked = true;
	}
	cr_assert(acked, "the device did not acknowledge the %u datagrams", seq);

	/* A real message after them: once it is received, they have all been looked at. */
	char rbuf[64] = {}, sbuf[64];
	for (size_t i = 0; i < sizeof sbuf; i++)
		sbuf[i] = char(i * 5 + 3);
	fid_mr *rmr = nullptr, *smr = nullptr;
	cr_assert_eq(fi_mr_reg(g.dom, rbuf, sizeof rbuf, FI_RECV, 0, 0, 0, &rmr, nullptr), 0);
	cr_assert_eq(fi_mr_reg(g.dom, sbuf, sizeof sbuf, FI_SEND, 0, 0, 0, &smr, nullptr), 0);
	int rctx = 0, sctx = 0;
	cr_assert_eq(fi_recv(a.ep, rbuf, sizeof rbuf, fi_mr_desc(rmr), FI_ADDR_UNSPEC, &rctx), 0);
	cr_assert_eq(fi_send(b.ep, sbuf, sizeof sbuf, fi_mr_desc(smr), fa, &sctx), 0);
	fi_cq_data_entry e{};
	bool got_recv = false, got_send = false;
	for (auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
	     !(got_recv && got_send) && std::chrono::steady_clock::now() < end;) {
		if (fi_cq_read(a.cq, &e, 1) == 1) {
			cr_assert_eq(e.op_context, &rctx);
			got_recv = true;
		}
		if (fi_cq_read(b.cq, &e, 1) == 1) {
			cr_assert_eq(e.op_context, &sctx);
			got_send = true;
		}
	}
	close(s);
	if (!(got_recv && got_send)) {
		const std::string logged = cap.end();
		cr_assert_fail("no completion after the malformed packets (recv %d, send %d); log: %s", got_recv,
			       got_send, logged.substr(logged.size() > 4000 ? logged.size() - 4000 : 0).c_str());
	}
	cr_assert_eq(std::memcmp(rbuf, sbuf, sizeof sbuf), 0);
	close_ep(a);
	const std::string logged = cap.end();
	cr_assert_neq(logged.find("malformed packet from QP " + std::to_string(my_qpn)), std::string::npos,
		      "no warning naming the sender: '%s'", logged.c_str());
	cr_assert_neq(logged.find("peers must run the same protocol version"), std::string::npos);
	cr_assert_eq(logged.find("malformed packet"), logged.rfind("malformed packet"), "warned more than once");
	cr_assert_neq(logged.find("dropped 3 malformed"), std::string::npos, "not counted: '%s'", logged.c_str());
	/* The packet of version 9 is another protocol's (protocol.md section 12.1): counted
	 * apart, with a warning of its own; its sender is unknown, so no peer fails. */
	cr_assert_neq(logged.find("1 of another protocol version"), std::string::npos, "not counted: '%s'",
		      logged.c_str());
	cr_assert_neq(logged.find("a packet of RDM protocol version 9"), std::string::npos, "no warning: '%s'",
		      logged.c_str());
	close_ep(b);
	cr_assert_eq(fi_close(&rmr->fid), 0);
	cr_assert_eq(fi_close(&smr->fid), 0);
	cr_assert_eq(fi_close(&av->fid), 0);
}
