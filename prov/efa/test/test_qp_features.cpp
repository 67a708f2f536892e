/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The QP features an endpoint relies on, through the public libfabric API on the
 * software device: what the endpoint's mode needs is never silently dropped, processing
 * hints reach the device on the operations they apply to, unsolicited write receive
 * can be turned off (FI_OPT_EFA_USE_UNSOLICITED_WRITE_RECV, FI_EFA_USE_UNSOLICITED_WRITE_RECV),
 * and a message's packets are posted behind one doorbell.
 *
 * Two endpoints of two domains in one process; reading both CQs drives both (manual
 * progress). Each Criterion test runs in its own process.
 */
#include "fitest.h"
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_ext_efa.h>
#include <rdma/fi_rma.h>

#include <criterion/criterion.h>

#include <dlfcn.h>
#include <infiniband/verbs.h>

#include "loaded_sim.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <vector>

namespace {

constexpr size_t kBuf = 65536;

struct Side {
	fid_domain *dom = nullptr;
	fid_av *av = nullptr;
	fid_cq *cq = nullptr;
	fid_ep *ep = nullptr;
	fid_mr *mr = nullptr;
	uint8_t name[64] = {};
	fi_addr_t peer = FI_ADDR_NOTAVAIL;
	std::vector<uint8_t> buf = std::vector<uint8_t>(kBuf);
	std::deque<fi_cq_data_entry> pending; /* read while progressing for the other side */
	void *desc() const { return fi_mr_desc(mr); }
	uint64_t addr(size_t off = 0) { return uint64_t(reinterpret_cast<uintptr_t>(buf.data() + off)); }
};

struct World {
	fi_info *info = nullptr;
	fid_fabric *fab = nullptr;
	Side ini, tgt;
	bool rdm = false;
};

World g;

void env()
{
	fitest::use_provider();
	setenv("EFASIM_PATHS", "1", 1);
}

using EpHook = std::function<void(fid_ep *)>;

void open_side(Side &s, const EpHook &before_enable)
{
	cr_assert_eq(fi_domain(g.fab, g.info, &s.dom, nullptr), 0);
	fi_av_attr aa{};
	aa.type = FI_AV_TABLE;
	cr_assert_eq(fi_av_open(s.dom, &aa, &s.av, nullptr), 0);
	fi_cq_attr ca{};
	ca.format = FI_CQ_FORMAT_DATA;
	ca.size = 64;
	cr_assert_eq(fi_cq_open(s.dom, &ca, &s.cq, nullptr), 0);
	cr_assert_eq(fi_endpoint(s.dom, g.info, &s.ep, nullptr), 0);
	if (before_enable)
		before_enable(s.ep);
	cr_assert_eq(fi_ep_bind(s.ep, &s.cq->fid, FI_TRANSMIT | FI_RECV), 0);
	cr_assert_eq(fi_ep_bind(s.ep, &s.av->fid, 0), 0);
	int ret = fi_enable(s.ep);
	cr_assert_eq(ret, 0, "fi_enable: %s", fi_strerror(-ret));
	size_t len = sizeof s.name;
	cr_assert_eq(fi_getname(&s.ep->fid, s.name, &len), 0);
	cr_assert_eq(fi_mr_reg(s.dom, s.buf.data(), s.buf.size(),
			       FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 0, 0, &s.mr,
			       nullptr),
		     0);
}

/* fi_getinfo for `fabric`; `tweak` may change the info before the endpoints open. */
void open_world(const char *fabric, uint64_t mode, const std::function<void(fi_info *)> &tweak = nullptr,
		const EpHook &before_enable = nullptr)
{
	env();
	g.rdm = !strcmp(fabric, "efa");
	g.info = fitest::getinfo(fabric, FI_MSG | FI_RMA, fitest::kMrMode, [mode](fi_info *h) { h->mode = mode; });
	if (tweak)
		tweak(g.info);
	fitest::open_fabric(g.info, &g.fab);
	open_side(g.ini, before_enable);
	open_side(g.tgt, before_enable);
	cr_assert_eq(fi_av_insert(g.ini.av, g.tgt.name, 1, &g.ini.peer, 0, nullptr), 1);
	cr_assert_eq(fi_av_insert(g.tgt.av, g.ini.name, 1, &g.tgt.peer, 0, nullptr), 1);
}

void close_side(Side &s)
{
	if (s.mr)
		fi_close(&s.mr->fid);
	if (s.ep)
		fi_close(&s.ep->fid);
	if (s.cq)
		fi_close(&s.cq->fid);
	if (s.av)
		fi_close(&s.av->fid);
	if (s.dom)
		fi_close(&s.dom->fid);
}

void close_world()
{
	close_side(g.ini);
	close_side(g.tgt);
	if (g.fab)
		fi_close(&g.fab->fid);
	fi_freeinfo(g.info);
	g = World{};
}

/* One poll of `s`'s CQ into its pending entries (an error entry fails the test). */
void poll_one(Side &s)
{
	fi_cq_data_entry e{};
	ssize_t n = fi_cq_read(s.cq, &e, 1);
	if (n == 1) {
		s.pending.push_back(e);
		return;
	}
	if (n == -FI_EAVAIL) {
		fi_cq_err_entry err{};
		fi_cq_readerr(s.cq, &err, 0);
		cr_assert_fail("error completion: %s (prov_errno %d)", fi_strerror(err.err), err.prov_errno);
	}
	cr_assert_eq(n, -FI_EAGAIN);
}

/* Reads both CQs until `side` has an entry. */
fi_cq_data_entry next(Side &side)
{
	Side &other = &side == &g.ini ? g.tgt : g.ini;
	auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
	while (side.pending.empty() && std::chrono::steady_clock::now() < end) {
		poll_one(side);
		poll_one(other);
	}
	cr_assert(!side.pending.empty(), "no completion within 10 s");
	fi_cq_data_entry e = side.pending.front();
	side.pending.pop_front();
	return e;
}

/* Nothing more on either side for a while (both progressing). */
void nothing_more()
{
	for (int i = 0; i < 20000; i++) {
		poll_one(g.ini);
		poll_one(g.tgt);
	}
	cr_assert(g.ini.pending.empty() && g.tgt.pending.empty(), "unexpected completions: %zu / %zu",
		  g.ini.pending.size(), g.tgt.pending.size());
}

uint64_t key(Side &s) { return fi_mr_key(s.mr); }

efasim_stats device_stats() { return loaded_sim_stats(); }

/* Both sides trade one message, so that each knows the other (the efa fabric's
 * handshake: device RDMA is used once it arrived). */
void warm_up()
{
	fi_context2 r1{}, r2{}, s1{}, s2{};
	cr_assert_eq(fi_recv(g.tgt.ep, g.tgt.buf.data() + 3072, 64, g.tgt.desc(), FI_ADDR_UNSPEC, &r1), 0);
	cr_assert_eq(fi_recv(g.ini.ep, g.ini.buf.data() + 3072, 64, g.ini.desc(), FI_ADDR_UNSPEC, &r2), 0);
	cr_assert_eq(fi_send(g.ini.ep, g.ini.buf.data(), 8, g.ini.desc(), g.ini.peer, &s1), 0);
	cr_assert_eq(next(g.tgt).op_context, &r1);
	cr_assert_eq(fi_send(g.tgt.ep, g.tgt.buf.data(), 8, g.tgt.desc(), g.tgt.peer, &s2), 0);
	cr_assert_eq(next(g.ini).op_context, &s1);
	cr_assert_eq(next(g.ini).op_context, &r2);
	cr_assert_eq(next(g.tgt).op_context, &s2);
}

/* An RDMA operation through fi_writemsg / fi_readmsg with `flags`; waits for it. */
void rma_msg(bool write, uint64_t flags, size_t len = 4096 / 2)
{
	fi_context2 ctx{};
	iovec iov{g.ini.buf.data(), len};
	void *desc = g.ini.desc();
	fi_rma_iov r{g.tgt.addr(), len, key(g.tgt)};
	fi_msg_rma m{};
	m.msg_iov = &iov;
	m.desc = &desc;
	m.iov_count = 1;
	m.addr = g.ini.peer;
	m.rma_iov = &r;
	m.rma_iov_count = 1;
	m.context = &ctx;
	ssize_t ret = write ? fi_writemsg(g.ini.ep, &m, flags | FI_COMPLETION) : fi_readmsg(g.ini.ep, &m, flags | FI_COMPLETION);
	cr_assert_eq(ret, 0, "fi_%smsg with flags %#lx: %s", write ? "write" : "read", (unsigned long)flags,
		     fi_strerror(int(-ret)));
	cr_assert_eq(next(g.ini).op_context, &ctx);
}

/* FI_EFA_WR_HIGH_PPS hints RDMA writes, and only them (as upstream). */
void hints_on_writes_only()
{
	const uint64_t before = device_stats().hinted_wrs;
	rma_msg(true, FI_EFA_WR_HIGH_PPS);
	cr_assert_eq(device_stats().hinted_wrs - before, 1u, "an RDMA write with FI_EFA_WR_HIGH_PPS went without hint");
	rma_msg(false, FI_EFA_WR_HIGH_PPS);
	rma_msg(true, 0);
	cr_assert_eq(device_stats().hinted_wrs - before, 1u, "the hint went on an operation other than the write");
}

/*
 * A remote write with data to the target, then a send: the write's completion carries
 * the data and consumes no receive; the receive the target posted first gets the send.
 */
void write_data_consumes_no_receive(uint64_t data)
{
	fi_context2 rctx{}, wctx{}, sctx{};
	cr_assert_eq(fi_recv(g.tgt.ep, g.tgt.buf.data(), 256, g.tgt.desc(), FI_ADDR_UNSPEC, &rctx), 0);
	memset(g.ini.buf.data(), 0x5a, 64);
	cr_assert_eq(fi_writedata(g.ini.ep, g.ini.buf.data(), 64, g.ini.desc(), data, g.ini.peer, g.tgt.addr(1024),
				  key(g.tgt), &wctx),
		     0);
	fi_cq_data_entry e = next(g.ini);
	cr_assert_eq(e.op_context, &wctx);
	e = next(g.tgt);
	cr_assert_neq(e.op_context, &rctx, "the remote write with data consumed the posted receive");
	cr_assert(e.flags & FI_REMOTE_CQ_DATA, "flags %#lx", (unsigned long)e.flags);
	cr_assert_not(e.flags & FI_RECV, "flags %#lx", (unsigned long)e.flags);
	cr_assert_eq(e.data, data);
	for (size_t i = 0; i < 64; i++)
		cr_assert_eq(g.tgt.buf[1024 + i], 0x5a);
	/* the receive is still there, for the send */
	memset(g.ini.buf.data() + 128, 0x3c, 16);
	cr_assert_eq(fi_send(g.ini.ep, g.ini.buf.data() + 128, 16, g.ini.desc(), g.ini.peer, &sctx), 0);
	e = next(g.tgt);
	cr_assert_eq(e.op_context, &rctx);
	cr_assert(e.flags & FI_RECV);
	cr_assert_eq(e.len, 16u);
	for (size_t i = 0; i < 16; i++)
		cr_assert_eq(g.tgt.buf[i], 0x3c);
	e = next(g.ini);
	cr_assert_eq(e.op_context, &sctx);
}

} // namespace

/*
 * efa-direct without FI_RX_CQ_DATA relies on unsolicited write receive. With an 80-byte
 * inject (wide inline: half the send queue on the device) and the default, full, transmit
 * queue, the QP used to fail with EINVAL and the fallback dropped unsolicited write
 * receive on its way to a QP that fit: a remote write with data then consumed the
 * application's receive.
 */
Test(qp_features, direct_wide_inject_keeps_unsolicited_write_recv, .fini = close_world)
{
	open_world("efa-direct", FI_CONTEXT | FI_CONTEXT2, [](fi_info *i) { i->tx_attr->inject_size = 80; });
	write_data_consumes_no_receive(0x1234);
	/* an 80-byte inject goes out too (inline, wide entry) */
	fi_context2 rctx{};
	cr_assert_eq(fi_recv(g.tgt.ep, g.tgt.buf.data() + 2048, 256, g.tgt.desc(), FI_ADDR_UNSPEC, &rctx), 0);
	memset(g.ini.buf.data() + 512, 0x77, 80);
	cr_assert_eq(fi_inject(g.ini.ep, g.ini.buf.data() + 512, 80, g.ini.peer), 0);
	fi_cq_data_entry e = next(g.tgt);
	cr_assert_eq(e.op_context, &rctx);
	cr_assert_eq(e.len, 80u);
	for (size_t i = 0; i < 80; i++)
		cr_assert_eq(g.tgt.buf[2048 + i], 0x77);
	nothing_more();
}

Test(qp_features, direct_hints_on_rdma_writes_only, .fini = close_world)
{
	open_world("efa-direct", FI_CONTEXT | FI_CONTEXT2);
	hints_on_writes_only();
}

/* The efa fabric's QPs take processing hints too: a device RDMA write with
 * FI_EFA_WR_HIGH_PPS carries it (the flag used to be refused with -FI_EINVAL). */
Test(qp_features, rdm_hints_on_device_rdma_writes, .fini = close_world)
{
	open_world("efa", FI_CONTEXT | FI_CONTEXT2);
	warm_up();
	hints_on_writes_only();
}

/* A MEDIUM message's segments are posted behind one doorbell, which the software device
 * sends with one system call (efasim(7), BATCHED SENDS); the message arrives whole. */
Test(qp_features, rdm_medium_message_rings_one_doorbell, .fini = close_world)
{
	open_world("efa", FI_CONTEXT | FI_CONTEXT2);
	warm_up();
	constexpr size_t kLen = 40000; /* five segments: MEDIUM up to 64 KiB */
	for (size_t i = 0; i < kLen; i++)
		g.ini.buf[i] = uint8_t(i * 13 + i / 251);
	const efasim_stats before = device_stats();
	fi_context2 rctx{}, sctx{};
	cr_assert_eq(fi_recv(g.tgt.ep, g.tgt.buf.data(), kLen, g.tgt.desc(), FI_ADDR_UNSPEC, &rctx), 0);
	cr_assert_eq(fi_send(g.ini.ep, g.ini.buf.data(), kLen, g.ini.desc(), g.ini.peer, &sctx), 0);
	fi_cq_data_entry e = next(g.tgt);
	cr_assert_eq(e.op_context, &rctx);
	cr_assert_eq(e.len, kLen);
	cr_assert_eq(memcmp(g.tgt.buf.data(), g.ini.buf.data(), kLen), 0, "data");
	cr_assert_eq(next(g.ini).op_context, &sctx);
	const efasim_stats after = device_stats();
	cr_assert_geq(after.tx_packets - before.tx_packets, 5u);
	cr_assert_geq(after.tx_batches - before.tx_batches, 1u, "the segments were posted one doorbell each");
	cr_assert_geq(after.rx_coalesced - before.rx_coalesced, 5u, "the segments did not arrive as one batch");
}

/* A MEDIUM message from three iovs, all registered: segments inside one iov go from the
 * application's memory (a second SGE), those across a boundary (in the first iov and in
 * the second) are copied; the receiver gets every byte in place, whichever way each
 * segment went. */
Test(qp_features, rdm_medium_message_from_three_iovs, .fini = close_world)
{
	open_world("efa", FI_CONTEXT | FI_CONTEXT2);
	warm_up();
	constexpr size_t kA = 5000, kB = 10000, kLen = 40000;
	for (size_t i = 0; i < kLen; i++)
		g.ini.buf[i] = uint8_t(i * 29 + i / 97);
	fi_context2 rctx{}, sctx{};
	cr_assert_eq(fi_recv(g.tgt.ep, g.tgt.buf.data(), kLen, g.tgt.desc(), FI_ADDR_UNSPEC, &rctx), 0);
	uint8_t *b = g.ini.buf.data();
	iovec iov[3] = {{b, kA}, {b + kA, kB}, {b + kA + kB, kLen - kA - kB}};
	void *desc[3] = {g.ini.desc(), g.ini.desc(), g.ini.desc()};
	cr_assert_eq(fi_sendv(g.ini.ep, iov, desc, 3, g.ini.peer, &sctx), 0);
	fi_cq_data_entry e = next(g.tgt);
	cr_assert_eq(e.op_context, &rctx);
	cr_assert_eq(e.len, kLen);
	cr_assert_eq(memcmp(g.tgt.buf.data(), g.ini.buf.data(), kLen), 0, "data");
	cr_assert_eq(next(g.ini).op_context, &sctx);
}

namespace {

bool get_unsolicited(fid_ep *ep)
{
	bool v = false;
	size_t len = sizeof v;
	int ret = fi_getopt(&ep->fid, FI_OPT_ENDPOINT, FI_OPT_EFA_USE_UNSOLICITED_WRITE_RECV, &v, &len);
	cr_assert_eq(ret, 0, "fi_getopt(FI_OPT_EFA_USE_UNSOLICITED_WRITE_RECV): %s", fi_strerror(-ret));
	return v;
}

int set_unsolicited(fid_ep *ep, bool v)
{
	return fi_setopt(&ep->fid, FI_OPT_ENDPOINT, FI_OPT_EFA_USE_UNSOLICITED_WRITE_RECV, &v, sizeof v);
}

/* An RDM remote write with data arrives, with its data, whether or not the device took
 * it unsolicited; returns how many unsolicited receives the device counted meanwhile. */
uint64_t rdm_write_data()
{
	warm_up();
	const uint64_t before = device_stats().unsolicited_recvs;
	fi_context2 wctx{};
	memset(g.ini.buf.data(), 0x21, 128);
	cr_assert_eq(fi_writedata(g.ini.ep, g.ini.buf.data(), 128, g.ini.desc(), 0xabcd, g.ini.peer, g.tgt.addr(512),
				  key(g.tgt), &wctx),
		     0);
	fi_cq_data_entry e = next(g.tgt);
	cr_assert(e.flags & FI_REMOTE_CQ_DATA, "flags %#lx", (unsigned long)e.flags);
	cr_assert_eq(e.data, 0xabcdu);
	cr_assert_eq(next(g.ini).op_context, &wctx);
	for (size_t i = 0; i < 128; i++)
		cr_assert_eq(g.tgt.buf[512 + i], 0x21);
	nothing_more();
	return device_stats().unsolicited_recvs - before;
}

} // namespace

/* The QP has unsolicited write receive by default, but the efa fabric never writes with
 * immediate to such a QP of a peer of ours: remote CQ data comes in an EXT_WRITE_DATA
 * packet, which lands in a receive packet holding a CQ entry (protocol.md section
 * 8; test_cq_bound). */
Test(qp_features, rdm_unsolicited_write_recv_is_on_by_default, .fini = close_world)
{
	open_world("efa", FI_CONTEXT | FI_CONTEXT2);
	cr_assert(get_unsolicited(g.tgt.ep));
	cr_assert_eq(rdm_write_data(), 0u, "the device took an unsolicited write: a write with immediate");
}

/* FI_OPT_EFA_USE_UNSOLICITED_WRITE_RECV false (upstream's opt-out): the QP goes without
 * it; writes with data work as ever. */
Test(qp_features, rdm_unsolicited_write_recv_can_be_turned_off, .fini = close_world)
{
	open_world("efa", FI_CONTEXT | FI_CONTEXT2, nullptr, [](fid_ep *ep) {
		cr_assert_eq(set_unsolicited(ep, false), 0);
		cr_assert_not(get_unsolicited(ep));
	});
	cr_assert_not(get_unsolicited(g.tgt.ep), "the enabled QP has unsolicited write receive");
	cr_assert_eq(set_unsolicited(g.tgt.ep, true), -FI_EINVAL, "set after fi_enable");
	cr_assert_eq(rdm_write_data(), 0u, "unsolicited receives with the option off");
}

/* FI_EFA_USE_UNSOLICITED_WRITE_RECV=0 does the same for every endpoint. */
Test(qp_features, rdm_variable_turns_unsolicited_write_recv_off, .fini = close_world,
     .init = [] { setenv("FI_EFA_USE_UNSOLICITED_WRITE_RECV", "0", 1); })
{
	open_world("efa", FI_CONTEXT | FI_CONTEXT2);
	cr_assert_not(get_unsolicited(g.tgt.ep));
	cr_assert_eq(rdm_write_data(), 0u, "unsolicited receives with the variable at 0");
}

/* efa-direct without FI_RX_CQ_DATA cannot go without it: the application posts no
 * receive for remote CQ data. */
Test(qp_features, direct_unsolicited_off_needs_rx_cq_data, .fini = close_world)
{
	open_world("efa-direct", FI_CONTEXT | FI_CONTEXT2, nullptr, [](fid_ep *ep) {
		cr_assert_eq(set_unsolicited(ep, false), -FI_EOPNOTSUPP);
		cr_assert(get_unsolicited(ep));
	});
	write_data_consumes_no_receive(7);
}

/* With the variable at 0, efa-direct asks for FI_RX_CQ_DATA with RMA, and remote CQ
 * data then takes a posted receive. */
Test(qp_features, direct_variable_asks_for_rx_cq_data, .fini = close_world,
     .init = [] { setenv("FI_EFA_USE_UNSOLICITED_WRITE_RECV", "0", 1); })
{
	env();
	fi_info *hints = fi_allocinfo(), *info = nullptr;
	hints->caps = FI_MSG | FI_RMA;
	hints->mode = FI_CONTEXT | FI_CONTEXT2;
	hints->ep_attr->type = FI_EP_RDM;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_VIRT_ADDR;
	hints->fabric_attr->prov_name = strdup("efa");
	hints->fabric_attr->name = strdup("efa-direct");
	cr_assert_eq(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, hints, &info), -FI_ENODATA,
		     "RMA without FI_RX_CQ_DATA offered with the variable at 0");
	fi_freeinfo(hints);
	open_world("efa-direct", FI_CONTEXT | FI_CONTEXT2 | FI_RX_CQ_DATA);
	cr_assert(g.info->mode & FI_RX_CQ_DATA);
	cr_assert_not(get_unsolicited(g.tgt.ep));
	const uint64_t before = device_stats().unsolicited_recvs;
	fi_context2 rctx{}, wctx{};
	cr_assert_eq(fi_recv(g.tgt.ep, g.tgt.buf.data(), 256, g.tgt.desc(), FI_ADDR_UNSPEC, &rctx), 0);
	cr_assert_eq(fi_writedata(g.ini.ep, g.ini.buf.data(), 64, g.ini.desc(), 0x99, g.ini.peer, g.tgt.addr(1024),
				  key(g.tgt), &wctx),
		     0);
	fi_cq_data_entry e = next(g.tgt);
	cr_assert_eq(e.op_context, &rctx, "remote CQ data did not take the posted receive");
	cr_assert(e.flags & FI_REMOTE_CQ_DATA);
	cr_assert_eq(e.data, 0x99u);
	cr_assert_eq(next(g.ini).op_context, &wctx);
	cr_assert_eq(device_stats().unsolicited_recvs, before);
}
