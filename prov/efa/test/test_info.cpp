/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * fi_getinfo filtering (a table of hints in, infos out), the EFA address encodings, and
 * the error table's mapping to libfabric errors.
 */
#include "addr.h"
#include "efa_errno.h"
#include "info.h"
#include "log.h"
#include "verbs/device.h"

#include <criterion/criterion.h>

#include <cstring>
#include <functional>
#include <string>

using namespace efa;

namespace {

std::unique_ptr<verbs::Device> g_dev;

const verbs::Device &dev()
{
	if (!g_dev) {
		std::string why;
		const verbs::Api *api = verbs::load_sim(EFA_TEST_SIM_PATH, &why);
		cr_assert_not_null(api, "%s", why.c_str());
		auto devs = verbs::Device::discover(*api);
		cr_assert_eq(devs.size(), 1u);
		g_dev = std::move(devs[0]);
	}
	return *g_dev;
}

void quiet(log::Level, log::Sub, const char *, int, const char *) {}

/* The default hints of a well-behaved efa-direct application. */
fi_info *good_hints()
{
	fi_info *h = fi_allocinfo();
	h->caps = FI_MSG | FI_RMA;
	h->mode = FI_CONTEXT | FI_CONTEXT2;
	h->ep_attr->type = FI_EP_RDM;
	h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_VIRT_ADDR;
	return h;
}

struct Case {
	const char *name;
	std::function<void(fi_info *)> edit;
	bool ok;
	uint32_t version = FI_VERSION(1, 17);
};

fi_info *run(const Case &c, std::string *why, fi_info *(*prototype)(const verbs::Device &) = direct_prototype,
	     fi_info *(*hints_of)() = good_hints)
{
	fi_info *proto = prototype(dev());
	fi_info *hints = hints_of();
	c.edit(hints);
	fi_info *out = tailor(proto, hints, c.version, dev().inline_size_ex(), why);
	fi_freeinfo(hints);
	fi_freeinfo(proto);
	return out;
}

} // namespace

TestSuite(info, .init = [] { log::set_sink(quiet); });

Test(info, prototype_matches_upstream_efa_direct)
{
	fi_info *i = direct_prototype(dev());
	cr_assert_str_eq(i->fabric_attr->name, "efa-direct");
	cr_assert_null(i->fabric_attr->prov_name);
	cr_assert_str_eq(i->domain_attr->name, "efasim0-rdm");
	cr_assert_eq(i->ep_attr->type, FI_EP_RDM);
	cr_assert_eq(i->addr_format, FI_ADDR_EFA);
	cr_assert_eq(i->src_addrlen, 32u);
	cr_assert(i->caps & FI_MSG);
	cr_assert(i->caps & FI_RMA, "the default profile has RDMA read and write");
	cr_assert_not(i->caps & FI_TAGGED);
	cr_assert_eq(i->mode, uint64_t(FI_CONTEXT2), "unsolicited write recv: no FI_RX_CQ_DATA needed");
	cr_assert_eq(i->domain_attr->mr_mode, int(FI_MR_LOCAL | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_VIRT_ADDR));
	cr_assert_eq(i->domain_attr->cq_data_size, 4u);
	cr_assert_eq(i->domain_attr->mr_key_size, 4u);
	cr_assert_eq(i->tx_attr->inject_size, 32u);
	cr_assert_eq(i->ep_attr->max_msg_size, size_t(1) << 30);
	cr_assert_eq(i->tx_attr->iov_limit, 2u);
	cr_assert_eq(i->tx_attr->rma_iov_limit, 1u);
	cr_assert_eq(i->tx_attr->msg_order, 0u);
	cr_assert_not_null(i->nic);
	cr_assert_str_eq(i->nic->device_attr->name, "efasim0");
	cr_assert_eq(i->nic->bus_attr->bus_type, FI_BUS_UNKNOWN, "the software device has no PCI address");
	cr_assert_eq(i->nic->link_attr->state, FI_LINK_UP);
	cr_assert_gt(i->nic->link_attr->speed, 0u);
	/* fi_dupinfo copies the nic through its FI_DUP control */
	fi_info *d = fi_dupinfo(i);
	cr_assert_not_null(d->nic);
	cr_assert_neq(d->nic, i->nic);
	cr_assert_str_eq(d->nic->link_attr->address, i->nic->link_attr->address);
	fi_freeinfo(d);
	fi_freeinfo(i);
}

Test(info, hints_table)
{
	const Case cases[] = {
		{"good hints", [](fi_info *) {}, true},
		{"null-ish: no caps", [](fi_info *h) { h->caps = 0; }, true},
		{"tagged", [](fi_info *h) { h->caps |= FI_TAGGED; }, false},
		{"atomics", [](fi_info *h) { h->caps |= FI_ATOMIC; }, false},
		{"multi recv", [](fi_info *h) { h->caps |= FI_MULTI_RECV; }, false},
		{"directed recv", [](fi_info *h) { h->caps |= FI_DIRECTED_RECV; }, false},
		{"source", [](fi_info *h) { h->caps |= FI_SOURCE; }, true},
		{"no FI_CONTEXT2", [](fi_info *h) { h->mode = FI_CONTEXT; }, false},
		{"mode 0", [](fi_info *h) { h->mode = 0; }, false},
		{"mr_mode without LOCAL", [](fi_info *h) { h->domain_attr->mr_mode &= ~FI_MR_LOCAL; }, false},
		{"mr_mode 0 (Open MPI's mtl)", [](fi_info *h) { h->domain_attr->mr_mode = 0; }, false},
		{"mr_mode + ENDPOINT + HMEM offered", [](fi_info *h) { h->domain_attr->mr_mode |= FI_MR_ENDPOINT | FI_MR_HMEM; }, true},
		{"mr_mode SCALABLE", [](fi_info *h) { h->domain_attr->mr_mode = FI_MR_SCALABLE; }, false},
		{"mr_mode BASIC + FI_LOCAL_MR mode",
		 [](fi_info *h) {
			 h->domain_attr->mr_mode = FI_MR_BASIC;
			 h->mode |= FI_LOCAL_MR;
		 },
		 true},
		{"API 1.4 BASIC without FI_LOCAL_MR",
		 [](fi_info *h) { h->domain_attr->mr_mode = FI_MR_BASIC; }, false, FI_VERSION(1, 4)},
		{"API 1.4 UNSPEC with FI_LOCAL_MR",
		 [](fi_info *h) {
			 h->domain_attr->mr_mode = FI_MR_UNSPEC;
			 h->mode |= FI_LOCAL_MR;
		 },
		 true, FI_VERSION(1, 4)},
		{"msg endpoint", [](fi_info *h) { h->ep_attr->type = FI_EP_MSG; }, false},
		{"dgram endpoint", [](fi_info *h) { h->ep_attr->type = FI_EP_DGRAM; }, false},
		{"addr format sockaddr", [](fi_info *h) { h->addr_format = FI_SOCKADDR_IN; }, false},
		{"fabric efa-direct", [](fi_info *h) { h->fabric_attr->name = strdup("efa-direct"); }, true},
		{"fabric efa: not this prototype", [](fi_info *h) { h->fabric_attr->name = strdup("efa"); }, false},
		{"prov_name efa", [](fi_info *h) { h->fabric_attr->prov_name = strdup("efa"); }, true},
		{"prov_name tcp", [](fi_info *h) { h->fabric_attr->prov_name = strdup("tcp"); }, false},
		{"domain name", [](fi_info *h) { h->domain_attr->name = strdup("efasim0-rdm"); }, true},
		{"wrong domain name", [](fi_info *h) { h->domain_attr->name = strdup("rdmap0s31-rdm"); }, false},
		{"msg_order SAS", [](fi_info *h) { h->tx_attr->msg_order = FI_ORDER_SAS; }, false},
		{"rx msg_order SAS", [](fi_info *h) { h->rx_attr->msg_order = FI_ORDER_SAS; }, false},
		{"threading domain", [](fi_info *h) { h->domain_attr->threading = FI_THREAD_DOMAIN; }, true},
		{"progress manual", [](fi_info *h) { h->domain_attr->data_progress = FI_PROGRESS_MANUAL; }, true},
		{"RM disabled", [](fi_info *h) { h->domain_attr->resource_mgmt = FI_RM_DISABLED; }, true},
		{"av map", [](fi_info *h) { h->domain_attr->av_type = FI_AV_MAP; }, true},
		{"cq_data_size 8", [](fi_info *h) { h->domain_attr->cq_data_size = 8; }, false},
		{"inject 80 (wide inline)", [](fi_info *h) { h->tx_attr->inject_size = 80; }, true},
		{"inject 81", [](fi_info *h) { h->tx_attr->inject_size = 81; }, false},
		{"iov_limit 3", [](fi_info *h) { h->tx_attr->iov_limit = 3; }, false},
		{"rma_iov_limit 2", [](fi_info *h) { h->tx_attr->rma_iov_limit = 2; }, false},
		{"tx size above the device", [](fi_info *h) { h->tx_attr->size = 1u << 20; }, false},
		{"tx size below", [](fi_info *h) { h->tx_attr->size = 64; }, true},
		{"max_msg_size 2 GiB", [](fi_info *h) { h->ep_attr->max_msg_size = size_t(2) << 30; }, false},
		{"ordered RMA sizes", [](fi_info *h) { h->ep_attr->max_order_raw_size = 64; }, false},
		{"scalable endpoint", [](fi_info *h) { h->ep_attr->tx_ctx_cnt = 4; }, false},
		{"delivery complete", [](fi_info *h) { h->tx_attr->op_flags = FI_DELIVERY_COMPLETE; }, true},
		{"multi recv op flag", [](fi_info *h) { h->rx_attr->op_flags = FI_MULTI_RECV; }, false},
		{"protocol EFA", [](fi_info *h) { h->ep_attr->protocol = FI_PROTO_EFA; }, true},
		{"protocol RXM", [](fi_info *h) { h->ep_attr->protocol = FI_PROTO_RXM; }, false},
		{"auth key", [](fi_info *h) { h->domain_attr->auth_key_size = 8; }, false},
		{"low latency traffic class", [](fi_info *h) { h->tx_attr->tclass = FI_TC_LOW_LATENCY; }, true},
	};
	for (const Case &c : cases) {
		std::string why;
		fi_info *out = run(c, &why);
		if (c.ok)
			cr_expect_not_null(out, "%s: refused (%s)", c.name, why.c_str());
		else
			cr_expect_null(out, "%s: accepted", c.name);
		if (!c.ok)
			cr_expect(!why.empty(), "%s: no reason given", c.name);
		fi_freeinfo(out);
	}
}

Test(info, tailoring_results)
{
	std::string why;
	/* caps: requested primary caps, implied modifiers, default secondary caps */
	Case msg_only{"msg only", [](fi_info *h) { h->caps = FI_MSG; }, true};
	fi_info *i = run(msg_only, &why);
	cr_assert_not_null(i);
	cr_assert(i->caps & FI_SEND && i->caps & FI_RECV);
	cr_assert_not(i->caps & FI_RMA, "RMA is primary: only when asked");
	cr_assert(i->caps & FI_LOCAL_COMM && i->caps & FI_REMOTE_COMM);
	cr_assert_eq(i->ep_attr->max_msg_size, 8928u, "without RMA the largest message is one MTU");
	fi_freeinfo(i);
	/* mr_mode: only the bits required, even when more are offered */
	Case more{"more mr bits", [](fi_info *h) { h->domain_attr->mr_mode |= FI_MR_ENDPOINT | FI_MR_RAW; }, true};
	i = run(more, &why);
	cr_assert_eq(i->domain_attr->mr_mode, int(FI_MR_LOCAL | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_VIRT_ADDR));
	fi_freeinfo(i);
	/* the application's threading / av type / tx size are granted as asked */
	Case asked{"asked",
		   [](fi_info *h) {
			   h->domain_attr->threading = FI_THREAD_COMPLETION;
			   h->domain_attr->av_type = FI_AV_MAP;
			   h->tx_attr->size = 100;
			   h->tx_attr->inject_size = 64;
		   },
		   true};
	i = run(asked, &why);
	cr_assert_eq(i->domain_attr->threading, FI_THREAD_COMPLETION);
	cr_assert_eq(i->domain_attr->av_type, FI_AV_MAP);
	cr_assert_eq(i->tx_attr->size, 100u);
	cr_assert_eq(i->tx_attr->inject_size, 64u);
	cr_assert_eq(i->mode, uint64_t(FI_CONTEXT2), "FI_CONTEXT is cleared: not needed");
	fi_freeinfo(i);
	/* API < 1.5: FI_MR_BASIC and FI_LOCAL_MR */
	Case old{"old",
		 [](fi_info *h) {
			 h->mode |= FI_LOCAL_MR;
			 h->domain_attr->mr_mode = FI_MR_BASIC;
		 },
		 true, FI_VERSION(1, 4)};
	i = run(old, &why);
	cr_assert_eq(i->domain_attr->mr_mode, FI_MR_BASIC);
	cr_assert(i->mode & FI_LOCAL_MR);
	fi_freeinfo(i);
}

Test(info, device_without_unsolicited_needs_rx_cq_data, .init = [] {
	log::set_sink(quiet);
	setenv("EFASIM_PROFILE", "no-unsolicited", 1);
})
{
	fi_info *proto = direct_prototype(dev());
	cr_assert(proto->mode & FI_RX_CQ_DATA);
	std::string why;
	fi_info *h = good_hints(); /* asks FI_RMA, does not accept FI_RX_CQ_DATA */
	cr_assert_null(tailor(proto, h, FI_VERSION(1, 17), 80, &why));
	cr_assert(why.find("FI_RX_CQ_DATA") != std::string::npos);
	h->mode |= FI_RX_CQ_DATA;
	fi_info *i = tailor(proto, h, FI_VERSION(1, 17), 80, &why);
	cr_assert_not_null(i);
	cr_assert(i->mode & FI_RX_CQ_DATA);
	fi_freeinfo(i);
	h->mode &= ~FI_RX_CQ_DATA;
	h->caps = 0; /* RMA not asked: offered without it */
	i = tailor(proto, h, FI_VERSION(1, 17), 80, &why);
	cr_assert_not_null(i);
	cr_assert_not(i->caps & FI_RMA);
	fi_freeinfo(i);
	fi_freeinfo(h);
	fi_freeinfo(proto);
}

Test(info, device_without_rdma_write_has_no_rma, .init = [] {
	log::set_sink(quiet);
	setenv("EFASIM_PROFILE", "no-rdma-write", 1);
})
{
	fi_info *proto = direct_prototype(dev());
	cr_assert_not(proto->caps & FI_RMA);
	cr_assert_eq(proto->ep_attr->max_msg_size, 8928u);
	fi_freeinfo(proto);
}

Test(info, build_infos_addresses)
{
	std::vector<const verbs::Device *> devs{&dev()};
	fi_info *out = nullptr;
	/* no hints: the prototypes, efa-direct first as upstream orders them */
	cr_assert_eq(build_infos(FI_VERSION(1, 17), nullptr, nullptr, 0, nullptr, devs, &out), 0);
	cr_assert_not_null(out);
	cr_assert_str_eq(out->fabric_attr->name, "efa-direct");
	cr_assert_not_null(out->next);
	cr_assert_str_eq(out->next->fabric_attr->name, "efa");
	cr_assert_not_null(out->next->next);
	cr_assert_eq(out->next->next->ep_attr->type, FI_EP_DGRAM, "then FI_EP_DGRAM, as upstream");
	cr_assert_null(out->next->next->next);
	fi_freeinfo(out);
	/* a raw dest_addr in hints is copied (fi_pingpong's client) */
	RawAddr peer{};
	std::memcpy(peer.gid, dev().gid().raw, 16);
	peer.qpn = 7;
	peer.qkey = 0x1234;
	fi_info *h = good_hints();
	h->addr_format = FI_ADDR_EFA;
	h->dest_addr = malloc(32);
	std::memcpy(h->dest_addr, &peer, 32);
	h->dest_addrlen = 32;
	cr_assert_eq(build_infos(FI_VERSION(1, 17), nullptr, nullptr, 0, h, devs, &out), 0);
	cr_assert_eq(out->dest_addrlen, 32u);
	cr_assert(std::memcmp(out->dest_addr, &peer, 32) == 0);
	fi_freeinfo(out);
	h->dest_addrlen = 16;
	cr_assert_eq(build_infos(FI_VERSION(1, 17), nullptr, nullptr, 0, h, devs, &out), -FI_ENODATA);
	fi_freeinfo(h);
	/* node = GID text, service = qpn:qkey */
	std::string gid = gid_to_string(dev().gid().raw);
	cr_assert_eq(build_infos(FI_VERSION(1, 17), gid.c_str(), "7:4660", 0, nullptr, devs, &out), 0);
	cr_assert(std::memcmp(out->dest_addr, &peer, 32) == 0);
	fi_freeinfo(out);
	cr_assert_eq(build_infos(FI_VERSION(1, 17), "127.0.0.1", "9228", 0, nullptr, devs, &out), -FI_ENODATA);
	/* FI_SOURCE: the node selects the device */
	cr_assert_eq(build_infos(FI_VERSION(1, 17), gid.c_str(), nullptr, FI_SOURCE, nullptr, devs, &out), 0);
	fi_freeinfo(out);
	cr_assert_eq(build_infos(FI_VERSION(1, 17), "fe80::1", nullptr, FI_SOURCE, nullptr, devs, &out), -FI_ENODATA);
}

Test(info, address_text_forms)
{
	RawAddr a{};
	for (int i = 0; i < 16; i++)
		a.gid[i] = uint8_t(i * 17);
	a.qpn = 513;
	a.qkey = 0x7fffffff;
	std::string s = addr_to_string(a);
	cr_assert(s.rfind("fi_addr_efa://[", 0) == 0, "%s", s.c_str());
	RawAddr b;
	cr_assert(addr_from_string(s.c_str(), b));
	cr_assert(a == b);
	cr_assert_not(addr_from_string("fi_addr_efa://[zz]:1:2", b));
	cr_assert_not(addr_from_string("fi_sockaddr_in://127.0.0.1:9", b));
	cr_assert_not(addr_from_node_service("fe80::1", "70000", b), "QPN is 16 bits");
	cr_assert_not(addr_from_node_service("fe80::1", "12:x", b));
	cr_assert(addr_from_node_service("fe80::1", "12", b));
	cr_assert_eq(b.qpn, 12);
	cr_assert_eq(b.qkey, 0u);
	RawAddr c = a;
	c.qkey = 1;
	cr_assert(a.same_qp(c));
	cr_assert_not(a == c, "a new endpoint on the same QP number is a different address");
}

Test(info, error_table)
{
	cr_assert_eq(efa_status_to_fi(10), FI_ENORX);
	cr_assert_eq(efa_status_to_fi(7), FI_EACCES);
	cr_assert_eq(efa_status_to_fi(11), FI_ETRUNC);
	cr_assert_eq(efa_status_to_fi(13), FI_EHOSTUNREACH);
	cr_assert_eq(efa_status_to_fi(15), FI_EHOSTUNREACH);
	cr_assert_eq(efa_status_to_fi(1), FI_ECANCELED);
	cr_assert_eq(efa_status_to_fi(999), FI_EIO, "unknown codes are I/O errors");
	cr_assert_str_eq(efa_status_name(14), "REMOTE_ERROR_UNKNOWN_PEER");
	cr_assert_null(efa_status_name(16));
	cr_assert(std::string(efa_status_msg(10)).find("Receiver not ready") == 0);
}

namespace {

/* What Open MPI's mtl/ofi asks (clients.md 1.2): tagged, FI_CONTEXT, mr_mode 0. */
fi_info *mtl_hints()
{
	fi_info *h = fi_allocinfo();
	h->caps = FI_TAGGED | FI_DIRECTED_RECV;
	h->mode = FI_CONTEXT;
	h->ep_attr->type = FI_EP_RDM;
	h->domain_attr->mr_mode = 0;
	h->domain_attr->threading = FI_THREAD_DOMAIN;
	h->domain_attr->resource_mgmt = FI_RM_ENABLED;
	h->tx_attr->msg_order = FI_ORDER_SAS;
	h->rx_attr->msg_order = FI_ORDER_SAS;
	return h;
}

void check_table(const Case *cases, size_t n, fi_info *(*hints_of)())
{
	for (size_t k = 0; k < n; k++) {
		const Case &c = cases[k];
		std::string why;
		fi_info *out = run(c, &why, rdm_prototype, hints_of);
		if (c.ok)
			cr_expect_not_null(out, "%s: refused (%s)", c.name, why.c_str());
		else
			cr_expect_null(out, "%s: accepted", c.name);
		if (!c.ok)
			cr_expect(!why.empty(), "%s: no reason given", c.name);
		fi_freeinfo(out);
	}
}

} // namespace

Test(info, prototype_of_the_efa_fabric)
{
	fi_info *i = rdm_prototype(dev());
	cr_assert_str_eq(i->fabric_attr->name, "efa");
	cr_assert_null(i->fabric_attr->prov_name);
	cr_assert_str_eq(i->domain_attr->name, "efasim0-rdm");
	const uint64_t want = FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC | FI_READ | FI_WRITE | FI_REMOTE_READ |
			      FI_REMOTE_WRITE | FI_SEND | FI_RECV | FI_DIRECTED_RECV | FI_MULTI_RECV | FI_SOURCE |
			      FI_LOCAL_COMM | FI_REMOTE_COMM;
	cr_assert_eq(i->caps, want);
	cr_assert_eq(i->mode, 0u, "no mode required");
	cr_assert_eq(i->domain_attr->mr_mode, int(FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_VIRT_ADDR));
	cr_assert_eq(i->tx_attr->msg_order & FI_ORDER_SAS, uint64_t(FI_ORDER_SAS));
	cr_assert_eq(i->ep_attr->max_msg_size, SIZE_MAX);
	cr_assert(i->ep_attr->mem_tag_format >> 63, "tag format with the top bit set");
	cr_assert_eq(i->domain_attr->cq_data_size, 4u);
	cr_assert_eq(i->domain_attr->data_progress, FI_PROGRESS_MANUAL);
	cr_assert_eq(i->domain_attr->threading, FI_THREAD_SAFE);
	cr_assert_eq(i->tx_attr->iov_limit, 4u);
	cr_assert_eq(i->rx_attr->iov_limit, 4u);
	cr_assert_eq(i->tx_attr->rma_iov_limit, 1u);
	cr_assert_gt(i->tx_attr->inject_size, 32u, "an eager packet, not the device's inline size");
	cr_assert_leq(i->tx_attr->inject_size, 4096u);
	cr_assert_gt(i->ep_attr->max_order_waw_size, 0u);
	cr_assert_eq(i->ep_attr->protocol_version, 4u, "EFA RDM protocol v4");
	fi_freeinfo(i);
}

Test(info, efa_fabric_hints_table)
{
	const Case cases[] = {
		{"Open MPI mtl/ofi hints", [](fi_info *) {}, true},
		{"every cap", [](fi_info *h) { h->caps = FI_MSG | FI_TAGGED | FI_MULTI_RECV | FI_SOURCE | FI_DIRECTED_RECV; }, true},
		{"RMA with mr_mode 0", [](fi_info *h) { h->caps |= FI_RMA; }, false},
		{"atomics with mr_mode 0", [](fi_info *h) { h->caps |= FI_ATOMIC; }, false},
		{"RMA with the three bits",
		 [](fi_info *h) {
			 h->caps |= FI_RMA | FI_ATOMIC;
			 h->domain_attr->mr_mode = FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_VIRT_ADDR;
		 },
		 true},
		{"RMA with FI_MR_BASIC", [](fi_info *h) { h->caps |= FI_RMA; h->domain_attr->mr_mode = FI_MR_BASIC; }, true},
		{"mode 0", [](fi_info *h) { h->mode = 0; }, true},
		{"FI_CONTEXT2", [](fi_info *h) { h->mode = FI_CONTEXT2; }, true},
		{"all orderings it has",
		 [](fi_info *h) {
			 h->tx_attr->msg_order = FI_ORDER_SAS | FI_ORDER_ATOMIC_RAW | FI_ORDER_ATOMIC_WAW;
		 },
		 true},
		{"RMA ordering it lacks", [](fi_info *h) { h->tx_attr->msg_order = FI_ORDER_RAW; }, false},
		{"threading safe", [](fi_info *h) { h->domain_attr->threading = FI_THREAD_SAFE; }, true},
		{"threading completion", [](fi_info *h) { h->domain_attr->threading = FI_THREAD_COMPLETION; }, true},
		{"RM disabled", [](fi_info *h) { h->domain_attr->resource_mgmt = FI_RM_DISABLED; }, true},
		{"av map", [](fi_info *h) { h->domain_attr->av_type = FI_AV_MAP; }, true},
		{"max_msg_size 1 TiB", [](fi_info *h) { h->ep_attr->max_msg_size = size_t(1) << 40; }, true},
		{"multi recv op flag", [](fi_info *h) { h->rx_attr->op_flags = FI_MULTI_RECV; }, true},
		{"inject 4096", [](fi_info *h) { h->tx_attr->inject_size = 4096; }, true},
		{"inject 1 MiB", [](fi_info *h) { h->tx_attr->inject_size = 1 << 20; }, false},
		{"iov_limit 4", [](fi_info *h) { h->tx_attr->iov_limit = 4; }, true},
		{"iov_limit 5", [](fi_info *h) { h->rx_attr->iov_limit = 5; }, false},
		{"fabric efa", [](fi_info *h) { h->fabric_attr->name = strdup("efa"); }, true},
		{"fabric efa-direct", [](fi_info *h) { h->fabric_attr->name = strdup("efa-direct"); }, false},
		{"dgram endpoint", [](fi_info *h) { h->ep_attr->type = FI_EP_DGRAM; }, false},
		{"cq_data_size 8", [](fi_info *h) { h->domain_attr->cq_data_size = 8; }, false},
		{"a huge ordered size", [](fi_info *h) { h->ep_attr->max_order_waw_size = size_t(1) << 30; }, false},
		{"API 1.4 with FI_MR_BASIC", [](fi_info *h) { h->domain_attr->mr_mode = FI_MR_BASIC; }, true,
		 FI_VERSION(1, 4)},
	};
	check_table(cases, sizeof cases / sizeof cases[0], mtl_hints);
}

Test(info, efa_fabric_tailoring_results)
{
	std::string why;
	/* mr_mode 0 without asking for RMA: RMA and atomics are dropped, nothing required */
	Case mtl{"mtl", [](fi_info *) {}, true};
	fi_info *i = run(mtl, &why, rdm_prototype, mtl_hints);
	cr_assert_not_null(i, "%s", why.c_str());
	cr_assert_eq(i->domain_attr->mr_mode, 0);
	cr_assert(i->caps & FI_TAGGED);
	cr_assert(i->caps & FI_DIRECTED_RECV);
	cr_assert_not(i->caps & (FI_RMA | FI_ATOMIC));
	cr_assert_eq(i->mode, 0u, "FI_CONTEXT offered, not needed");
	cr_assert_eq(i->tx_attr->msg_order, uint64_t(FI_ORDER_SAS), "ordering as asked");
	cr_assert_eq(i->domain_attr->threading, FI_THREAD_DOMAIN);
	fi_freeinfo(i);
	/* FI_MR_LOCAL offered: not needed, not handed back; what RMA needs is */
	Case local{"local",
		   [](fi_info *h) {
			   h->caps |= FI_RMA;
			   h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_ENDPOINT | FI_MR_ALLOCATED | FI_MR_PROV_KEY |
						     FI_MR_VIRT_ADDR;
		   },
		   true};
	i = run(local, &why, rdm_prototype, mtl_hints);
	cr_assert_not_null(i, "%s", why.c_str());
	cr_assert_eq(i->domain_attr->mr_mode, int(FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_VIRT_ADDR));
	fi_freeinfo(i);
	/* no hints at all: everything */
	fi_info *proto = rdm_prototype(dev());
	i = tailor(proto, nullptr, FI_VERSION(1, 17), 80, &why);
	cr_assert(i->caps & FI_ATOMIC);
	fi_freeinfo(i);
	fi_freeinfo(proto);
}

/* ---------------------------------------------------------------- FI_EP_DGRAM */

namespace {

/* What libfabric's fi_pingpong asks with no -e (its default endpoint type). */
fi_info *pingpong_hints()
{
	fi_info *h = fi_allocinfo();
	h->caps = FI_MSG;
	h->mode = FI_CONTEXT | FI_CONTEXT2 | FI_MSG_PREFIX;
	h->ep_attr->type = FI_EP_DGRAM;
	h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_VIRT_ADDR;
	return h;
}

} // namespace

Test(info, prototype_of_dgram_endpoints)
{
	fi_info *i = dgram_prototype(dev());
	cr_assert_str_eq(i->fabric_attr->name, "efa", "upstream lists DGRAM under the efa fabric");
	cr_assert_str_eq(i->domain_attr->name, "efasim0-dgrm");
	cr_assert_eq(i->ep_attr->type, FI_EP_DGRAM);
	cr_assert_eq(i->caps, uint64_t(FI_MSG | FI_SEND | FI_RECV | FI_SOURCE | FI_LOCAL_COMM | FI_REMOTE_COMM));
	cr_assert_eq(i->mode, uint64_t(FI_CONTEXT2 | FI_MSG_PREFIX));
	cr_assert_eq(i->tx_attr->mode, uint64_t(FI_CONTEXT2 | FI_MSG_PREFIX));
	cr_assert_eq(i->ep_attr->msg_prefix_size, 40u, "the GRH of a UD receive");
	cr_assert_eq(i->ep_attr->max_msg_size, 8928u, "one datagram: the MTU, prefix not counted");
	cr_assert_eq(i->tx_attr->inject_size, 32u, "UD has no wide inline");
	cr_assert_eq(i->tx_attr->rma_iov_limit, 0u);
	cr_assert_eq(i->tx_attr->iov_limit, 2u);
	cr_assert_eq(i->tx_attr->msg_order, 0u, "unordered");
	cr_assert_eq(i->domain_attr->mr_mode, int(FI_MR_LOCAL | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_VIRT_ADDR));
	cr_assert_eq(i->domain_attr->cq_data_size, 4u, "send with immediate");
	cr_assert_eq(i->domain_attr->data_progress, FI_PROGRESS_AUTO);
	cr_assert_eq(i->addr_format, FI_ADDR_EFA);
	std::vector<const verbs::Device *> devs{&dev()};
	bool dgram = false;
	cr_assert_eq(device_of(i, devs, &dgram), &dev());
	cr_assert(dgram, "a -dgrm domain opens DGRAM endpoints");
	fi_info *r = direct_prototype(dev());
	cr_assert_eq(device_of(r, devs, &dgram), &dev());
	cr_assert_not(dgram);
	fi_freeinfo(r);
	fi_freeinfo(i);
}

Test(info, dgram_hints_table)
{
	const Case cases[] = {
		{"fi_pingpong's hints", [](fi_info *) {}, true},
		{"no caps", [](fi_info *h) { h->caps = 0; }, true},
		{"FI_SOURCE", [](fi_info *h) { h->caps |= FI_SOURCE; }, true},
		{"no FI_MSG_PREFIX", [](fi_info *h) { h->mode = FI_CONTEXT | FI_CONTEXT2; }, false},
		{"no FI_CONTEXT2", [](fi_info *h) { h->mode = FI_CONTEXT | FI_MSG_PREFIX; }, false},
		{"tx mode without the prefix", [](fi_info *h) { h->tx_attr->mode = FI_CONTEXT2; }, false},
		{"rx mode with the prefix", [](fi_info *h) { h->rx_attr->mode = FI_CONTEXT2 | FI_MSG_PREFIX; }, true},
		{"RMA", [](fi_info *h) { h->caps |= FI_RMA; }, false},
		{"tagged", [](fi_info *h) { h->caps |= FI_TAGGED; }, false},
		{"multi recv", [](fi_info *h) { h->caps |= FI_MULTI_RECV; }, false},
		{"mr_mode without LOCAL", [](fi_info *h) { h->domain_attr->mr_mode &= ~FI_MR_LOCAL; }, false},
		{"inject 32", [](fi_info *h) { h->tx_attr->inject_size = 32; }, true},
		{"inject 80 (no wide inline on UD)", [](fi_info *h) { h->tx_attr->inject_size = 80; }, false},
		{"max_msg_size the MTU", [](fi_info *h) { h->ep_attr->max_msg_size = 8928; }, true},
		{"max_msg_size above the MTU", [](fi_info *h) { h->ep_attr->max_msg_size = 8929; }, false},
		{"transmit complete", [](fi_info *h) { h->tx_attr->op_flags = FI_TRANSMIT_COMPLETE; }, true},
		{"delivery complete (unreliable)", [](fi_info *h) { h->tx_attr->op_flags = FI_DELIVERY_COMPLETE; }, false},
		{"ordered sends", [](fi_info *h) { h->tx_attr->msg_order = FI_ORDER_SAS; }, false},
		{"rma_iov_limit 1", [](fi_info *h) { h->tx_attr->rma_iov_limit = 1; }, false},
		{"cq_data_size 4", [](fi_info *h) { h->domain_attr->cq_data_size = 4; }, true},
		{"RDM endpoint", [](fi_info *h) { h->ep_attr->type = FI_EP_RDM; }, false},
		{"fabric efa", [](fi_info *h) { h->fabric_attr->name = strdup("efa"); }, true},
		{"fabric efa-direct", [](fi_info *h) { h->fabric_attr->name = strdup("efa-direct"); }, false},
		{"domain -dgrm", [](fi_info *h) { h->domain_attr->name = strdup("efasim0-dgrm"); }, true},
		{"domain -rdm", [](fi_info *h) { h->domain_attr->name = strdup("efasim0-rdm"); }, false},
		{"threading domain", [](fi_info *h) { h->domain_attr->threading = FI_THREAD_DOMAIN; }, true},
		{"RM disabled", [](fi_info *h) { h->domain_attr->resource_mgmt = FI_RM_DISABLED; }, true},
		{"API 1.4: FI_LOCAL_MR", [](fi_info *h) {
			 h->mode |= FI_LOCAL_MR;
			 h->domain_attr->mr_mode = FI_MR_BASIC;
		 }, true, FI_VERSION(1, 4)},
	};
	for (const Case &c : cases) {
		std::string why;
		fi_info *out = run(c, &why, dgram_prototype, pingpong_hints);
		if (c.ok)
			cr_expect_not_null(out, "%s: refused (%s)", c.name, why.c_str());
		else
			cr_expect_null(out, "%s: accepted", c.name);
		if (!c.ok)
			cr_expect(!why.empty(), "%s: no reason given", c.name);
		if (out) {
			cr_expect(out->mode & FI_MSG_PREFIX, "%s: FI_MSG_PREFIX is required", c.name);
			cr_expect_eq(out->ep_attr->msg_prefix_size, 40u, "%s", c.name);
		}
		fi_freeinfo(out);
	}
}

Test(info, dgram_in_the_getinfo_answer)
{
	std::vector<const verbs::Device *> devs{&dev()};
	fi_info *out = nullptr;
	fi_info *h = pingpong_hints();
	h->fabric_attr->prov_name = strdup("efa");
	cr_assert_eq(build_infos(FI_VERSION(1, 17), nullptr, nullptr, 0, h, devs, &out), 0,
		     "fi_pingpong's hints find a DGRAM endpoint");
	cr_assert_not_null(out);
	cr_assert_eq(out->ep_attr->type, FI_EP_DGRAM);
	cr_assert_str_eq(out->domain_attr->name, "efasim0-dgrm");
	cr_assert_null(out->next, "the RDM infos do not match FI_EP_DGRAM");
	fi_freeinfo(out);
	/* Without FI_MSG_PREFIX the application cannot use it: nothing. */
	h->mode = FI_CONTEXT | FI_CONTEXT2;
	cr_assert_eq(build_infos(FI_VERSION(1, 17), nullptr, nullptr, 0, h, devs, &out), -FI_ENODATA);
	fi_freeinfo(h);
	/* An RDM application never gets the DGRAM info. */
	h = good_hints();
	cr_assert_eq(build_infos(FI_VERSION(1, 17), nullptr, nullptr, 0, h, devs, &out), 0);
	for (fi_info *i = out; i; i = i->next)
		cr_assert_eq(i->ep_attr->type, FI_EP_RDM);
	fi_freeinfo(out);
	fi_freeinfo(h);
}
