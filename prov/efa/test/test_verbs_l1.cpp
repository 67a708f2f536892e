/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * L1 (the efadv layer) against the software device, and against a failing entry-point
 * table: each fallback (QP flags, sl, hints, efadv CQ, efadv query layout) and each error
 * path gives the documented result and a log line.
 */
#include "log.h"
#include "verbs/qp.h"

#include "../sim/efasim.h"

#include <criterion/criterion.h>

#include <poll.h>

#include <cstring>
#include <string>
#include <vector>

using namespace efa;
using namespace efa::verbs;

namespace {

std::vector<std::string> g_logs;

void capture(log::Level, log::Sub, const char *, int, const char *msg) { g_logs.emplace_back(msg); }

bool logged(const char *needle)
{
	for (const auto &l : g_logs)
		if (l.find(needle) != std::string::npos)
			return true;
	return false;
}

const Api &sim()
{
	std::string why;
	const Api *a = load_sim(EFA_TEST_SIM_PATH, &why);
	cr_assert_not_null(a, "%s", why.c_str());
	return *a;
}

void setup() { log::set_sink(capture); }

/* A device, PD, CQ and QP built over `api`. */
struct Stack {
	std::unique_ptr<Device> dev;
	Pd pd;
	Cq cq;
	Qp qp;
	explicit Stack(const Api &api, QpAttr qa = QpAttr{}, CqAttr ca = CqAttr{})
	{
		auto devs = Device::discover(api);
		cr_assert_eq(devs.size(), 1u);
		dev = std::move(devs[0]);
		auto p = Pd::alloc(*dev);
		cr_assert(p.ok());
		pd = p.take();
		auto c = Cq::create(*dev, ca);
		cr_assert(c.ok(), "cq: %d", c.error());
		cq = c.take();
		if (!qa.qkey)
			qa.qkey = 0x42;
		auto q = Qp::create_srd(*dev, pd, cq, cq, qa);
		cr_assert(q.ok(), "qp: %d", q.error());
		qp = q.take();
	}
	std::vector<Wc> wait(size_t n)
	{
		std::vector<Wc> out;
		for (int spins = 0; out.size() < n && spins < 10000000; spins++)
			cr_assert_geq(cq.poll(16, [&](const Wc &w) { out.push_back(w); }), 0);
		return out;
	}
};

/* ---- a failing table: the software device with chosen entry points replaced */
Api g_real;
int g_qp_refuse; /* bit 0: unsolicited flag, 1: wr_flags, 2: sl, 3: everything, 4: inline write,
		    5: everything, with ENOMEM */
int g_qp_attempts;

ibv_qp *picky_create_qp(ibv_context *ctx, ibv_qp_init_attr_ex *a, efadv_qp_init_attr *e, uint32_t inlen)
{
	auto *cur = reinterpret_cast<efadv_qp_init_attr_cur *>(e);
	g_qp_attempts++;
	if (g_qp_refuse & 32) {
		errno = ENOMEM;
		return nullptr;
	}
	if (((g_qp_refuse & 1) && (cur->flags & EFADV_QP_FLAGS_UNSOLICITED_WRITE_RECV)) ||
	    ((g_qp_refuse & 2) && cur->wr_flags) || ((g_qp_refuse & 4) && cur->sl) || (g_qp_refuse & 8) ||
	    ((g_qp_refuse & 16) && (cur->flags & EFADV_QP_FLAGS_INLINE_WRITE))) {
		errno = EOPNOTSUPP;
		return nullptr;
	}
	return g_real.efadv_create_qp_ex(ctx, a, e, inlen);
}
ibv_cq_ex *failing_create_cq(ibv_context *, ibv_cq_init_attr_ex *, efadv_cq_init_attr *, uint32_t)
{
	errno = EOPNOTSUPP;
	return nullptr;
}
ibv_pd *failing_alloc_pd(ibv_context *)
{
	errno = ENOMEM;
	return nullptr;
}
ibv_mr *failing_reg_mr(ibv_pd *, void *, size_t, int)
{
	errno = ENOMEM;
	return nullptr;
}
ibv_ah *failing_create_ah(ibv_pd *, ibv_ah_attr *)
{
	errno = EINVAL;
	return nullptr;
}
int failing_query_ah(ibv_ah *, efadv_ah_attr *, uint32_t) { return EOPNOTSUPP; }
int failing_modify_qp(ibv_qp *, ibv_qp_attr *, int) { return EINVAL; }
ibv_context *failing_open(ibv_device *)
{
	errno = EACCES;
	return nullptr;
}
ibv_device **null_list(int *n)
{
	*n = 0;
	errno = ENOSYS;
	return nullptr;
}
int not_efa(ibv_context *, efadv_device_attr *, uint32_t) { return EOPNOTSUPP; }
int old_efadv_query(ibv_context *ctx, efadv_device_attr *a, uint32_t inlen)
{
	/* an rdma-core that only knows the 24-byte layout */
	if (inlen != EFADV_DEVICE_ATTR_V1_SIZE)
		return EINVAL;
	int ret = g_real.efadv_query_device(ctx, a, inlen);
	reinterpret_cast<efadv_device_attr_cur *>(a)->inline_buf_size_ex = 0; /* reserved there */
	return ret;
}
ibv_comp_channel *failing_channel(ibv_context *)
{
	errno = EMFILE;
	return nullptr;
}

Api failing(void (*patch)(Api &))
{
	g_real = sim();
	Api a = g_real;
	patch(a);
	return a;
}

} // namespace

TestSuite(l1, .init = setup);

Test(l1, discover_the_software_device)
{
	const Api &api = sim();
	cr_assert(api.software);
	auto devs = Device::discover(api);
	cr_assert_eq(devs.size(), 1u);
	cr_assert_str_eq(devs[0]->name().c_str(), "efasim0");
	cr_assert(devs[0]->software());
	cr_assert(devs[0]->rdma_read() && devs[0]->rdma_write());
	cr_assert_eq(devs[0]->mtu(), 8928u);
	cr_assert_eq(devs[0]->inline_size_ex(), 80);
	cr_assert(devs[0]->describe().find("software") != std::string::npos);
	cr_assert_eq(Device::discover(api, "rdmap0s1").size(), 0u, "FI_EFA_IFACE filter");
	cr_assert(logged("not in FI_EFA_IFACE"));
	cr_assert_eq(Device::discover(api, "foo,efasim0").size(), 1u);
}

Test(l1, qp_features_on_the_default_profile)
{
	QpAttr qa;
	qa.max_inline = 80;
	qa.unsolicited_write_recv = true;
	qa.processing_hints = true;
	qa.sl = 8;
	CqAttr ca;
	ca.unsolicited = true;
	Stack s(sim(), qa, ca);
	const QpFeatures &f = s.qp.features();
	cr_assert(s.cq.efadv() && s.cq.sgid_enabled() && s.cq.unsolicited_enabled());
	cr_assert(f.unsolicited_write_recv);
	cr_assert(f.inline_write);
	cr_assert_eq(f.max_inline, 80u);
	cr_assert(f.processing_hints);
	cr_assert_eq(f.sl, 8);
	cr_assert(f.rdma_read && f.rdma_write);
	cr_assert_eq(f.rnr_retry, 7);
}

Test(l1, unsolicited_needs_a_cq_that_reports_it)
{
	QpAttr qa;
	qa.unsolicited_write_recv = true;
	Stack s(sim(), qa); /* CQ without the unsolicited flag */
	cr_assert_not(s.qp.features().unsolicited_write_recv);
	cr_assert(logged("unsolicited write receive not available"));
}

Test(l1, profile_without_unsolicited_or_wide_inline,
     .init = [] {
	     setup();
	     setenv("EFASIM_PROFILE", "no-rdma-write", 1);
     })
{
	QpAttr qa;
	qa.max_inline = 80;
	qa.unsolicited_write_recv = true;
	qa.processing_hints = true;
	CqAttr ca;
	ca.unsolicited = true;
	Stack s(sim(), qa, ca);
	const QpFeatures &f = s.qp.features();
	cr_assert_not(s.cq.unsolicited_enabled());
	cr_assert_not(f.unsolicited_write_recv);
	cr_assert_not(f.inline_write);
	cr_assert_eq(f.max_inline, 32u);
	cr_assert_not(f.rdma_write);
	cr_assert(f.rdma_read);
	/* processing hints are accepted on every generation (rdma-core) */
	cr_assert(f.processing_hints);
}

Test(l1, data_path_send_batch_inline_rdma_hints)
{
	QpAttr qa;
	qa.max_inline = 80;
	qa.processing_hints = true;
	Stack s(sim(), qa);
	std::vector<uint8_t> mem(1 << 20);
	auto mr = Mr::reg(s.pd, mem.data(), mem.size(),
			  IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE);
	cr_assert(mr.ok());
	auto ah = Ah::create(s.pd, s.dev->gid());
	cr_assert(ah.ok());
	Dest self{ah->get(), s.qp.qpn(), s.qp.qkey()};
	/* 8 receives, then 8 sends posted as one batch (FI_MORE), the doorbell rung once */
	for (int i = 0; i < 8; i++) {
		Sge sg{uintptr_t(mem.data() + 4096 * i), 4096, mr->lkey()};
		cr_assert_eq(s.qp.post_recv(100 + i, {&sg, 1}), 0);
	}
	for (int i = 0; i < 8; i++) {
		memset(mem.data() + 65536 + 100 * i, i + 1, 100);
		Sge sg{uintptr_t(mem.data() + 65536 + 100 * i), 100, mr->lkey()};
		cr_assert_eq(s.qp.send(i, self, {&sg, 1}, uint32_t(i), (i < 7 ? uint32_t(kMore) : 0u) | kWithImm), 0);
		cr_assert_eq(s.qp.batch_open(), i < 7);
	}
	auto wc = s.wait(16);
	cr_assert_eq(wc.size(), 16u);
	int recvs = 0;
	for (auto &w : wc) {
		cr_assert_eq(w.status, IBV_WC_SUCCESS, "vendor %u", w.vendor_err);
		if (w.is_recv()) {
			recvs++;
			cr_assert(w.has_imm);
			cr_assert_eq(w.byte_len, 100u);
			cr_assert_eq(mem[4096 * (w.wr_id - 100)], uint8_t(w.imm + 1));
		}
	}
	cr_assert_eq(recvs, 8);
	/* inline send; the data may change as soon as the call returns */
	char msg[80];
	memset(msg, 'x', sizeof msg);
	Sge sg{uintptr_t(mem.data()), 4096, mr->lkey()};
	cr_assert_eq(s.qp.post_recv(1, {&sg, 1}), 0);
	DataBuf db{msg, sizeof msg};
	cr_assert_eq(s.qp.send_inline(2, self, {&db, 1}, 0, 0), 0);
	memset(msg, 0, sizeof msg);
	wc = s.wait(2);
	cr_assert_eq(wc.size(), 2u);
	cr_assert_eq(mem[79], 'x');
	/* RDMA write (with the processing hint), inline write, read back */
	memset(mem.data() + 200000, 7, 50000);
	Sge src{uintptr_t(mem.data() + 200000), 50000, mr->lkey()};
	cr_assert_eq(s.qp.write(3, self, {&src, 1}, mr->rkey(), uintptr_t(mem.data() + 400000), 0, kHighPps), 0);
	cr_assert_eq(s.qp.write_inline(4, self, {&db, 1}, mr->rkey(), uintptr_t(mem.data() + 500000), 0, 0), 0);
	wc = s.wait(2);
	cr_assert_eq(wc.size(), 2u);
	for (auto &w : wc)
		cr_assert_eq(w.status, IBV_WC_SUCCESS);
	/* the burst hint is for RDMA writes only (as upstream): a read or send with it
	 * goes without */
	Sge dst{uintptr_t(mem.data() + 600000), 50000, mr->lkey()};
	cr_assert_eq(s.qp.read(5, self, {&dst, 1}, mr->rkey(), uintptr_t(mem.data() + 400000), kHighPps), 0);
	wc = s.wait(1);
	cr_assert_eq(wc.size(), 1u);
	cr_assert_eq(wc[0].status, IBV_WC_SUCCESS);
	cr_assert_eq(memcmp(mem.data() + 600000, mem.data() + 200000, 50000), 0);
	cr_assert_eq(s.qp.post_recv(6, {&sg, 1}), 0);
	Sge small{uintptr_t(mem.data() + 200000), 100, mr->lkey()};
	cr_assert_eq(s.qp.send(7, self, {&small, 1}, 0, kHighPps), 0);
	wc = s.wait(2);
	cr_assert_eq(wc.size(), 2u);
	for (auto &w : wc)
		cr_assert_eq(w.status, IBV_WC_SUCCESS);
	efasim_stats st{};
	cr_assert_eq(s.dev->api().efasim_query_stats(s.dev->ctx(), &st, sizeof st), 0);
	cr_assert_eq(st.hinted_wrs, 1u, "%lu work requests hinted", (unsigned long)st.hinted_wrs);
	/* RNR retry can be changed on an RTS QP */
	cr_assert_eq(s.qp.set_rnr_retry(0), 0);
	cr_assert_eq(s.qp.features().rnr_retry, 0);
}

Test(l1, completion_channel_events)
{
	const Api &api = sim();
	auto devs = Device::discover(api);
	auto ch = CompChannel::create(*devs[0]);
	cr_assert(ch.ok());
	CqAttr ca;
	ca.channel = &*ch;
	auto cq = Cq::create(*devs[0], ca);
	cr_assert(cq.ok());
	auto pd = Pd::alloc(*devs[0]);
	QpAttr qa;
	qa.qkey = 1;
	qa.rnr_retry = 0;
	auto qp = Qp::create_srd(*devs[0], *pd, *cq, *cq, qa);
	cr_assert(qp.ok());
	auto ah = Ah::create(*pd, devs[0]->gid());
	cr_assert_eq(cq->arm(), 0);
	Dest self{ah->get(), qp->qpn(), 1};
	char b[8] = {};
	DataBuf db{b, 8};
	cr_assert_eq(qp->send_inline(1, self, {&db, 1}, 0, 0), 0);
	pollfd pfd{ch->fd(), POLLIN, 0};
	cr_assert_eq(poll(&pfd, 1, 10000), 1);
	cr_assert_eq(cq->get_event(), 0);
	int n = 0;
	while (n == 0)
		n = cq->poll(4, [](const Wc &w) { cr_assert_eq(w.vendor_err, 10u, "no receive posted: RNR"); });
	(void)n;
}

/* ---- fallbacks and error paths through a failing table */

Test(l1, qp_flag_refused_is_dropped_and_logged)
{
	Api a = failing([](Api &x) { x.efadv_create_qp_ex = picky_create_qp; });
	g_qp_refuse = 1;
	QpAttr qa;
	qa.unsolicited_write_recv = true;
	CqAttr ca;
	ca.unsolicited = true;
	Stack s(a, qa, ca);
	cr_assert_not(s.qp.features().unsolicited_write_recv);
	cr_assert(logged("refused unsolicited write receive"));
}

Test(l1, hints_refused_are_dropped_and_logged)
{
	Api a = failing([](Api &x) { x.efadv_create_qp_ex = picky_create_qp; });
	g_qp_refuse = 2;
	QpAttr qa;
	qa.processing_hints = true;
	Stack s(a, qa);
	cr_assert_not(s.qp.features().processing_hints);
	cr_assert(logged("refused processing hints"));
}

Test(l1, service_level_refused_falls_back_to_zero)
{
	Api a = failing([](Api &x) { x.efadv_create_qp_ex = picky_create_qp; });
	g_qp_refuse = 4;
	QpAttr qa;
	qa.sl = 8;
	Stack s(a, qa);
	cr_assert_eq(s.qp.features().sl, 0);
	cr_assert(logged("service level"));
}

Test(l1, inline_write_refused_shrinks_inline)
{
	Api a = failing([](Api &x) { x.efadv_create_qp_ex = picky_create_qp; });
	g_qp_refuse = 16;
	QpAttr qa;
	qa.max_inline = 80;
	Stack s(a, qa);
	cr_assert_not(s.qp.features().inline_write);
	cr_assert_eq(s.qp.features().max_inline, 32u);
	cr_assert(logged("inline RDMA write"));
}

Test(l1, qp_creation_failure_is_an_error)
{
	Api a = failing([](Api &x) { x.efadv_create_qp_ex = picky_create_qp; });
	g_qp_refuse = 8;
	auto devs = Device::discover(a);
	auto pd = Pd::alloc(*devs[0]);
	auto cq = Cq::create(*devs[0], CqAttr{});
	auto qp = Qp::create_srd(*devs[0], *pd, *cq, *cq, QpAttr{});
	cr_assert_not(qp.ok());
	cr_assert_eq(qp.error(), -EOPNOTSUPP);
	cr_assert(logged("efadv_create_qp_ex failed"));
}

Test(l1, modify_failure_is_an_error)
{
	Api a = failing([](Api &x) { x.modify_qp = failing_modify_qp; });
	auto devs = Device::discover(a);
	auto pd = Pd::alloc(*devs[0]);
	auto cq = Cq::create(*devs[0], CqAttr{});
	auto qp = Qp::create_srd(*devs[0], *pd, *cq, *cq, QpAttr{});
	cr_assert_eq(qp.error(), -EINVAL);
	cr_assert(logged("to RTS failed"));
}

Test(l1, efadv_cq_unavailable_falls_back)
{
	Api a = failing([](Api &x) { x.efadv_create_cq = nullptr; });
	auto devs = Device::discover(a);
	auto cq = Cq::create(*devs[0], CqAttr{});
	cr_assert(cq.ok());
	cr_assert_not(cq->efadv());
	cr_assert_not(cq->sgid_enabled());
	cr_assert(logged("efadv_create_cq unavailable"));
}

Test(l1, efadv_cq_failure_falls_back)
{
	Api a = failing([](Api &x) { x.efadv_create_cq = failing_create_cq; });
	Stack s(a); /* a QP works on the plain CQ too */
	cr_assert_not(s.cq.efadv());
	cr_assert(logged("efadv_create_cq failed"));
}

Test(l1, resource_failures)
{
	Api a = failing([](Api &x) {
		x.alloc_pd = failing_alloc_pd;
		x.reg_mr = failing_reg_mr;
		x.reg_mr_iova2 = nullptr;
		x.create_comp_channel = failing_channel;
	});
	auto devs = Device::discover(a);
	auto pd = Pd::alloc(*devs[0]);
	cr_assert_eq(pd.error(), -ENOMEM);
	auto ch = CompChannel::create(*devs[0]);
	cr_assert_eq(ch.error(), -EMFILE);
	Api b = failing([](Api &x) {
		x.reg_mr = failing_reg_mr;
		x.reg_mr_iova2 = nullptr;
		x.create_ah = failing_create_ah;
	});
	auto devs2 = Device::discover(b);
	auto pd2 = Pd::alloc(*devs2[0]);
	cr_assert(pd2.ok());
	char buf[64];
	auto mr = Mr::reg(*pd2, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE);
	cr_assert_eq(mr.error(), -ENOMEM);
	cr_assert(logged("ulimit -l"), "the locked-memory hint is missing");
	auto ah = Ah::create(*pd2, devs2[0]->gid());
	cr_assert_eq(ah.error(), -EINVAL);
	Api c = failing([](Api &x) { x.efadv_query_ah = failing_query_ah; });
	auto devs3 = Device::discover(c);
	auto pd3 = Pd::alloc(*devs3[0]);
	auto ah3 = Ah::create(*pd3, devs3[0]->gid());
	cr_assert_eq(ah3.error(), -EOPNOTSUPP);
	cr_assert(logged("efadv_query_ah"));
}

Test(l1, discovery_failures)
{
	Api a = failing([](Api &x) { x.open_device = failing_open; });
	cr_assert_eq(Device::discover(a).size(), 0u);
	cr_assert(logged("cannot open device efasim0"));
	Api b = failing([](Api &x) { x.get_device_list = null_list; });
	cr_assert_eq(Device::discover(b).size(), 0u);
	cr_assert(logged("no device list"));
	Api c = failing([](Api &x) { x.efadv_query_device = not_efa; });
	cr_assert_eq(Device::discover(c).size(), 0u, "a non-EFA device must be skipped");
}

Test(l1, old_efadv_query_layout)
{
	Api a = failing([](Api &x) { x.efadv_query_device = old_efadv_query; });
	auto devs = Device::discover(a);
	cr_assert_eq(devs.size(), 1u);
	/* the first layout has no capabilities: no RDMA, no wide inline */
	cr_assert_not(devs[0]->rdma_read());
	cr_assert_eq(devs[0]->inline_size_ex(), devs[0]->inline_size());
	cr_assert_eq(devs[0]->inline_size(), 32);
}

/*
 * QP creation falls back only from an error that can name a feature, and only by the
 * feature named: a device that refuses the service level keeps hints, unsolicited write
 * receive and inline write (the fallback used to drop hints first, then sl, ...).
 */
Test(l1, refusal_drops_only_the_feature_refused)
{
	Api a = failing([](Api &x) { x.efadv_create_qp_ex = picky_create_qp; });
	g_qp_refuse = 4;
	QpAttr qa;
	qa.sl = 8;
	qa.processing_hints = true;
	qa.unsolicited_write_recv = true;
	qa.max_inline = 80;
	CqAttr ca;
	ca.unsolicited = true;
	Stack s(a, qa, ca);
	const QpFeatures &f = s.qp.features();
	cr_assert_eq(f.sl, 0);
	cr_assert(f.processing_hints, "processing hints dropped for a refused service level");
	cr_assert(f.unsolicited_write_recv, "unsolicited write receive dropped for a refused service level");
	cr_assert(f.inline_write);
	cr_assert(logged("service level"));
	cr_assert_not(logged("refused processing hints"));
}

/* An error that names no feature (ENOMEM) fails at once: no retry drops anything. */
Test(l1, other_errors_drop_nothing)
{
	Api a = failing([](Api &x) { x.efadv_create_qp_ex = picky_create_qp; });
	g_qp_refuse = 32;
	auto devs = Device::discover(a);
	cr_assert_eq(devs.size(), 1u);
	auto pd = Pd::alloc(*devs[0]);
	cr_assert(pd.ok());
	Pd p = pd.take();
	CqAttr ca;
	auto c = Cq::create(*devs[0], ca);
	cr_assert(c.ok());
	Cq cq = c.take();
	QpAttr qa;
	qa.sl = 8;
	qa.processing_hints = true;
	qa.unsolicited_write_recv = true;
	g_qp_attempts = 0;
	auto q = Qp::create_srd(*devs[0], p, cq, cq, qa);
	cr_assert_not(q.ok());
	cr_assert_eq(q.error(), -ENOMEM);
	cr_assert_eq(g_qp_attempts, 1, "%d attempts for an error that names no feature", g_qp_attempts);
	cr_assert(logged("efadv_create_qp_ex failed"));
}

/* A feature the caller requires is never dropped: creation fails, saying what to do. */
Test(l1, required_unsolicited_is_never_dropped)
{
	Api a = failing([](Api &x) { x.efadv_create_qp_ex = picky_create_qp; });
	g_qp_refuse = 1;
	auto devs = Device::discover(a);
	auto pd = Pd::alloc(*devs[0]);
	Pd p = pd.take();
	CqAttr ca;
	ca.unsolicited = true;
	auto c = Cq::create(*devs[0], ca);
	Cq cq = c.take();
	QpAttr qa;
	qa.unsolicited_write_recv = true;
	qa.require_unsolicited_write_recv = true;
	qa.processing_hints = true;
	auto q = Qp::create_srd(*devs[0], p, cq, cq, qa);
	cr_assert_not(q.ok());
	cr_assert_eq(q.error(), -EOPNOTSUPP);
	cr_assert(logged("FI_RX_CQ_DATA"));
	/* and a CQ that cannot report it is refused before any attempt */
	CqAttr plain;
	auto c2 = Cq::create(*devs[0], plain);
	Cq cq2 = c2.take();
	g_qp_refuse = 0;
	g_qp_attempts = 0;
	auto q2 = Qp::create_srd(*devs[0], p, cq2, cq2, qa);
	cr_assert_not(q2.ok());
	cr_assert_eq(g_qp_attempts, 0);
}

/*
 * A wide inline size with the full send queue: the device allows half as many wide
 * entries (efadv_get_max_sq_depth), so L1 asks for that and keeps every feature. (It used
 * to ask for the full queue, fail with EINVAL and drop unsolicited write receive, then
 * inline write, until creation succeeded.)
 */
Test(l1, wide_inline_queue_is_sized_by_the_device)
{
	QpAttr qa;
	qa.sq_depth = 4096;
	qa.rq_depth = 1u << 20;
	qa.max_inline = 80;
	qa.unsolicited_write_recv = true;
	CqAttr ca;
	ca.unsolicited = true;
	Stack s(sim(), qa, ca);
	const QpFeatures &f = s.qp.features();
	cr_assert(f.unsolicited_write_recv, "unsolicited write receive was dropped");
	cr_assert(f.inline_write);
	cr_assert_eq(f.max_inline, 80u);
	cr_assert_eq(f.sq_depth, 2048u, "send queue %u", f.sq_depth);
	cr_assert_eq(f.rq_depth, 16384u, "receive queue %u (32768 descriptors, 2 per receive)", f.rq_depth);
	cr_assert_not(logged("refused"));
}

int g_depth_calls;
int fake_sq_depth(ibv_context *, efadv_sq_depth_attr *a, uint32_t)
{
	g_depth_calls++;
	return a->flags & EFADV_SQ_DEPTH_ATTR_INLINE_WRITE ? 64 : 128;
}
int fake_rq_depth(ibv_context *, efadv_rq_depth_attr *a, uint32_t) { return 256 / int(a->max_recv_sge); }

/* The depths rdma-core reports are the ones used. */
Test(l1, queue_depths_come_from_rdma_core)
{
	Api a = failing([](Api &x) {
		x.efadv_get_max_sq_depth = fake_sq_depth;
		x.efadv_get_max_rq_depth = fake_rq_depth;
	});
	QpAttr qa;
	qa.sq_depth = 4096;
	qa.rq_depth = 4096;
	qa.max_inline = 80;
	Stack s(a, qa);
	cr_assert_gt(g_depth_calls, 0);
	cr_assert_eq(s.qp.features().sq_depth, 64u);
	cr_assert_eq(s.qp.features().rq_depth, 128u);
}

/* Without the queries (rdma-core before 2026): EFA's rule, said once in the log. */
Test(l1, queue_depths_without_rdma_core_queries)
{
	Api a = failing([](Api &x) {
		x.efadv_get_max_sq_depth = nullptr;
		x.efadv_get_max_rq_depth = nullptr;
	});
	QpAttr qa;
	qa.sq_depth = 4096;
	qa.rq_depth = 1u << 20;
	qa.max_inline = 80;
	qa.unsolicited_write_recv = true;
	CqAttr ca;
	ca.unsolicited = true;
	Stack s1(a, qa, ca);
	Stack s2(a, qa, ca);
	for (const Stack *s : {&s1, &s2}) {
		cr_assert(s->qp.features().unsolicited_write_recv);
		cr_assert(s->qp.features().inline_write);
		cr_assert_eq(s->qp.features().sq_depth, 2048u);
		cr_assert_eq(s->qp.features().rq_depth, 16384u);
	}
	int n = 0;
	for (const auto &l : g_logs)
		n += l.find("has no efadv_get_max_sq_depth") != std::string::npos;
	cr_assert_eq(n, 1, "said %d times", n);
}

Test(l1, hints_unavailable_without_efadv_qp)
{
	Api a = failing([](Api &x) { x.efadv_qp_from_ibv_qp_ex = nullptr; });
	QpAttr qa;
	qa.processing_hints = true;
	Stack s(a, qa);
	cr_assert_not(s.qp.features().processing_hints);
}
