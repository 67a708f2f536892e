/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Software EFA device: unreliable datagram (UD) QPs through the raw rdma-core API, with
 * rdma-core's EFA rules (providers/efa/verbs.c) and the kernel's UD state table:
 * creation through ibv_create_qp / ibv_create_qp_ex only, SEND and SEND_WITH_IMM only,
 * the 40-byte GRH in front of every received payload, completion at once for any send
 * (a send to nobody succeeds), local errors for oversize sends, silent drops at the
 * receiver (no receive, wrong QKEY) and loss that nothing repairs.
 *
 * Every Criterion test runs in its own process, so each may set EFASIM_* variables
 * before the device reads them.
 */
#include "simtest.h"

#include <set>

using namespace simtest;

namespace {

constexpr uint32_t kGrh = 40;

struct UdOpts {
	uint32_t sq = 64, rq = 64;
	uint32_t inline_size = 0;
	uint32_t qkey = 0x2222;
	bool ex = true;	  /* ibv_create_qp_ex with the extended send API; else ibv_create_qp */
	bool rts = true;  /* walk to RTS */
};

/* A UD QP with its context, PD and one CQ (efadv, so receives can report the sender's GID). */
class UdNode {
public:
	explicit UdNode(const UdOpts &o = UdOpts()) : o_(o)
	{
		int n = 0;
		ibv_device **list = ibv_get_device_list(&n);
		if (!list || n < 1)
			Node::fail("no software EFA device");
		ctx = ibv_open_device(list[0]);
		ibv_free_device_list(list);
		if (!ctx)
			Node::fail("ibv_open_device");
		pd = ibv_alloc_pd(ctx);
		ibv_cq_init_attr_ex ca{};
		ca.cqe = 1024;
		ca.wc_flags = IBV_WC_STANDARD_FLAGS;
		efadv_cq_init_attr_cur ea{};
		ea.wc_flags = EFADV_WC_EX_WITH_SGID;
		cq = efadv_create_cq(ctx, &ca, reinterpret_cast<efadv_cq_init_attr *>(&ea), sizeof ea);
		if (!cq)
			Node::fail("efadv_create_cq");
		dvcq = efadv_cq_from_ibv_cq_ex(cq);
		if (o.ex) {
			ibv_qp_init_attr_ex qa = attr();
			qp = ibv_create_qp_ex(ctx, &qa);
			if (!qp)
				Node::fail("ibv_create_qp_ex(UD)");
			qpx = ibv_qp_to_qp_ex(qp);
			cap = qa.cap;
		} else {
			ibv_qp_init_attr qa{};
			qa.send_cq = ibv_cq_ex_to_cq(cq);
			qa.recv_cq = ibv_cq_ex_to_cq(cq);
			qa.cap.max_send_wr = o.sq;
			qa.cap.max_recv_wr = o.rq;
			qa.cap.max_send_sge = 2;
			qa.cap.max_recv_sge = 2;
			qa.cap.max_inline_data = o.inline_size;
			qa.qp_type = IBV_QPT_UD;
			qa.sq_sig_all = 1;
			qp = ibv_create_qp(pd, &qa);
			if (!qp)
				Node::fail("ibv_create_qp(UD)");
			cap = qa.cap;
		}
		if (o.rts)
			to_rts();
		ibv_query_gid(ctx, 1, 0, &self.gid);
		self.qpn = qp->qp_num;
		self.qkey = o.qkey;
	}
	~UdNode()
	{
		for (ibv_ah *a : ahs)
			ibv_destroy_ah(a);
		for (ibv_mr *m : mrs)
			ibv_dereg_mr(m);
		ibv_destroy_qp(qp);
		ibv_destroy_cq(ibv_cq_ex_to_cq(cq));
		ibv_dealloc_pd(pd);
		ibv_close_device(ctx);
	}
	UdNode(const UdNode &) = delete;
	UdNode &operator=(const UdNode &) = delete;

	ibv_qp_init_attr_ex attr(uint64_t ops = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM) const
	{
		ibv_qp_init_attr_ex a{};
		a.send_cq = ibv_cq_ex_to_cq(cq);
		a.recv_cq = ibv_cq_ex_to_cq(cq);
		a.cap.max_send_wr = o_.sq;
		a.cap.max_recv_wr = o_.rq;
		a.cap.max_send_sge = 2;
		a.cap.max_recv_sge = 2;
		a.cap.max_inline_data = o_.inline_size;
		a.qp_type = IBV_QPT_UD;
		a.sq_sig_all = 1;
		a.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
		a.pd = pd;
		a.send_ops_flags = ops;
		return a;
	}

	void to_rts()
	{
		ibv_qp_attr a{};
		a.qp_state = IBV_QPS_INIT;
		a.pkey_index = 0;
		a.port_num = 1;
		a.qkey = o_.qkey;
		if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
			Node::fail("modify INIT");
		a = ibv_qp_attr{};
		a.qp_state = IBV_QPS_RTR;
		if (ibv_modify_qp(qp, &a, IBV_QP_STATE))
			Node::fail("modify RTR");
		a = ibv_qp_attr{};
		a.qp_state = IBV_QPS_RTS;
		a.sq_psn = 0;
		if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN))
			Node::fail("modify RTS");
	}

	Addr exchange(const Chan &ch) const
	{
		ch.send(self);
		return ch.recv<Addr>();
	}
	ibv_ah *ah_for(const Addr &peer)
	{
		ibv_ah_attr aa{};
		aa.is_global = 1;
		aa.port_num = 1;
		aa.grh.dgid = peer.gid;
		ibv_ah *ah = ibv_create_ah(pd, &aa);
		if (!ah)
			Node::fail("ibv_create_ah");
		ahs.push_back(ah);
		return ah;
	}
	ibv_mr *reg(void *buf, size_t len)
	{
		ibv_mr *m = ibv_reg_mr(pd, buf, len, IBV_ACCESS_LOCAL_WRITE);
		if (!m)
			Node::fail("ibv_reg_mr");
		mrs.push_back(m);
		return m;
	}
	int post_recv(ibv_mr *mr, void *buf, uint32_t len, uint64_t wr_id)
	{
		ibv_sge s{reinterpret_cast<uintptr_t>(buf), len, mr->lkey};
		ibv_recv_wr wr{};
		wr.wr_id = wr_id;
		wr.sg_list = &s;
		wr.num_sge = 1;
		ibv_recv_wr *bad = nullptr;
		return ibv_post_recv(qp, &wr, &bad);
	}
	/* One send through the extended API (imm != 0: with immediate). */
	int send(ibv_ah *ah, const Addr &to, ibv_mr *mr, const void *buf, uint32_t len, uint64_t wr_id,
		 uint32_t imm = 0, bool inl = false)
	{
		ibv_wr_start(qpx);
		qpx->wr_id = wr_id;
		qpx->wr_flags = IBV_SEND_SIGNALED;
		if (imm)
			ibv_wr_send_imm(qpx, htonl(imm));
		else
			ibv_wr_send(qpx);
		if (inl)
			ibv_wr_set_inline_data(qpx, const_cast<void *>(buf), len);
		else
			ibv_wr_set_sge(qpx, mr ? mr->lkey : 0, reinterpret_cast<uintptr_t>(buf), len);
		ibv_wr_set_ud_addr(qpx, ah, to.qpn, to.qkey);
		return ibv_wr_complete(qpx);
	}
	/* Polls until `n` completions or `timeout_ms` (a bound, not a synchronisation). */
	std::vector<Completion> wait(size_t n, int timeout_ms = 10000)
	{
		std::vector<Completion> out;
		auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
		while (out.size() < n && std::chrono::steady_clock::now() < end) {
			ibv_poll_cq_attr pa{};
			if (ibv_start_poll(cq, &pa))
				continue;
			do {
				Completion c{};
				c.wr_id = cq->wr_id;
				c.status = cq->status;
				c.vendor_err = ibv_wc_read_vendor_err(cq);
				c.opcode = ibv_wc_read_opcode(cq);
				c.byte_len = ibv_wc_read_byte_len(cq);
				c.wc_flags = ibv_wc_read_wc_flags(cq);
				c.imm = (c.wc_flags & IBV_WC_WITH_IMM) ? ntohl(ibv_wc_read_imm_data(cq)) : 0;
				c.qp_num = ibv_wc_read_qp_num(cq);
				c.src_qp = ibv_wc_read_src_qp(cq);
				c.slid = ibv_wc_read_slid(cq);
				c.has_sgid = efadv_wc_read_sgid(dvcq, &c.sgid) == 0;
				out.push_back(c);
			} while (out.size() < n && ibv_next_poll(cq) == 0);
			ibv_end_poll(cq);
		}
		return out;
	}
	/* Polls (which drains the QP's socket) until `pred(stats)` or `timeout_ms`; for
	 * datagrams that must vanish, so any completion fails the test. */
	template <typename P> bool poll_until(P pred, int timeout_ms = 10000)
	{
		auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
		while (std::chrono::steady_clock::now() < end) {
			cr_assert(wait(1, 0).empty(), "a completion where the datagram should have been dropped");
			if (pred(stats()))
				return true;
		}
		return false;
	}
	efasim_stats stats() const
	{
		efasim_stats s{};
		efasim_query_stats(ctx, &s, sizeof s);
		return s;
	}

	ibv_context *ctx = nullptr;
	ibv_pd *pd = nullptr;
	ibv_cq_ex *cq = nullptr;
	efadv_cq *dvcq = nullptr;
	ibv_qp *qp = nullptr;
	ibv_qp_ex *qpx = nullptr;
	ibv_qp_cap cap{};
	Addr self{};
	std::vector<ibv_ah *> ahs;
	std::vector<ibv_mr *> mrs;

private:
	UdOpts o_;
};

/* What ibv_grh holds, as the device writes it in front of a UD payload. */
struct GrhView {
	uint32_t version_tclass_flow;
	uint16_t paylen;
	uint8_t next_hdr;
	uint8_t hop_limit;
	uint8_t sgid[16];
	uint8_t dgid[16];
};
static_assert(sizeof(GrhView) == sizeof(ibv_grh), "GRH layout");

} // namespace

Test(sim_ud, creation_follows_rdma_core)
{
	UdNode n(UdOpts{.rts = false});
	cr_assert_eq(n.qp->qp_type, IBV_QPT_UD);
	cr_assert_eq(n.qp->state, IBV_QPS_RESET);
	cr_assert_not_null(n.qpx, "UD with IBV_QP_INIT_ATTR_SEND_OPS_FLAGS has the extended send API");
	cr_assert_geq(n.cap.max_send_wr, 64u);
	cr_assert_eq(n.cap.max_inline_data, 32u, "basic inline size");
	efadv_device_attr_cur ea{};
	efadv_query_device(n.ctx, reinterpret_cast<efadv_device_attr *>(&ea), sizeof ea);

	/* RDMA is SRD's: EOPNOTSUPP on UD */
	auto a = n.attr(IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_READ);
	errno = 0;
	cr_assert_null(ibv_create_qp_ex(n.ctx, &a));
	cr_assert_eq(errno, EOPNOTSUPP);
	a = n.attr(IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE);
	cr_assert_null(ibv_create_qp_ex(n.ctx, &a));
	cr_assert_eq(errno, EOPNOTSUPP);
	/* an unknown comp_mask bit */
	a = n.attr();
	a.comp_mask |= IBV_QP_INIT_ATTR_CREATE_FLAGS;
	cr_assert_null(ibv_create_qp_ex(n.ctx, &a));
	cr_assert_eq(errno, EOPNOTSUPP);
	/* no PD bit */
	a = n.attr();
	a.comp_mask = IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	cr_assert_null(ibv_create_qp_ex(n.ctx, &a));
	cr_assert_eq(errno, EINVAL);
	/* limits: sges, depths, and no wide inline on UD */
	a = n.attr();
	a.cap.max_send_sge = ea.max_sq_sge + 1;
	cr_assert_null(ibv_create_qp_ex(n.ctx, &a));
	cr_assert_eq(errno, EINVAL);
	a = n.attr();
	a.cap.max_recv_wr = ea.max_rq_wr + 1;
	cr_assert_null(ibv_create_qp_ex(n.ctx, &a));
	cr_assert_eq(errno, EINVAL);
	a = n.attr();
	a.cap.max_inline_data = ea.inline_buf_size + 1;
	cr_assert_null(ibv_create_qp_ex(n.ctx, &a));
	cr_assert_eq(errno, EINVAL);
	/* no CQ, or an SRQ */
	a = n.attr();
	a.recv_cq = nullptr;
	cr_assert_null(ibv_create_qp_ex(n.ctx, &a));
	cr_assert_eq(errno, EINVAL);
	/* other types: plain verbs make UD QPs only on EFA */
	a = n.attr();
	a.qp_type = IBV_QPT_DRIVER;
	cr_assert_null(ibv_create_qp_ex(n.ctx, &a));
	cr_assert_eq(errno, EOPNOTSUPP);
	a = n.attr();
	a.qp_type = IBV_QPT_RC;
	cr_assert_null(ibv_create_qp_ex(n.ctx, &a));
	cr_assert_eq(errno, EOPNOTSUPP);
	ibv_qp_init_attr legacy{};
	legacy.send_cq = legacy.recv_cq = ibv_cq_ex_to_cq(n.cq);
	legacy.cap.max_send_wr = legacy.cap.max_recv_wr = 4;
	legacy.cap.max_send_sge = legacy.cap.max_recv_sge = 1;
	legacy.qp_type = IBV_QPT_RC;
	cr_assert_null(ibv_create_qp(n.pd, &legacy));
	cr_assert_eq(errno, EOPNOTSUPP);
	/* the efadv entry points make SRD QPs only: qp_type must be IBV_QPT_DRIVER */
	legacy.qp_type = IBV_QPT_UD;
	cr_assert_null(efadv_create_driver_qp(n.pd, &legacy, EFADV_QP_DRIVER_TYPE_SRD));
	cr_assert_eq(errno, EINVAL);
	a = n.attr();
	efadv_qp_init_attr_cur e{};
	e.driver_qp_type = EFADV_QP_DRIVER_TYPE_SRD;
	cr_assert_null(efadv_create_qp_ex(n.ctx, &a, reinterpret_cast<efadv_qp_init_attr *>(&e), sizeof e));
	cr_assert_eq(errno, EINVAL);
	/* plain ibv_create_qp: a UD QP without the extended send API */
	ibv_qp *q = ibv_create_qp(n.pd, &legacy);
	cr_assert_not_null(q);
	cr_assert_eq(q->qp_type, IBV_QPT_UD);
	cr_assert_null(ibv_qp_to_qp_ex(q));
	cr_assert_geq(legacy.cap.max_send_wr, 4u);
	cr_assert_eq(ibv_destroy_qp(q), 0);
}

Test(sim_ud, state_table)
{
	UdNode n(UdOpts{.rts = false});
	ibv_qp *qp = n.qp;
	ibv_qp_attr a{};
	/* RESET -> RTR skips INIT; RESET -> ERR is not a UD transition */
	a.qp_state = IBV_QPS_RTR;
	cr_assert_eq(ibv_modify_qp(qp, &a, IBV_QP_STATE), EINVAL);
	a.qp_state = IBV_QPS_ERR;
	cr_assert_eq(ibv_modify_qp(qp, &a, IBV_QP_STATE), EINVAL);
	/* posting a receive in RESET */
	static uint8_t buf[256];
	ibv_mr *mr = n.reg(buf, sizeof buf);
	cr_assert_eq(n.post_recv(mr, buf, sizeof buf, 1), EINVAL);
	/* INIT needs pkey index, port and QKEY; the port cannot change */
	a = ibv_qp_attr{};
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qkey = 0x33;
	cr_assert_eq(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PORT | IBV_QP_QKEY), EINVAL);
	a.port_num = 2;
	cr_assert_eq(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PORT | IBV_QP_QKEY | IBV_QP_PKEY_INDEX), EOPNOTSUPP);
	a.port_num = 1;
	cr_assert_eq(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PORT | IBV_QP_QKEY | IBV_QP_PKEY_INDEX | IBV_QP_AV),
		     EOPNOTSUPP, "an attribute EFA does not know");
	cr_assert_eq(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PORT | IBV_QP_QKEY | IBV_QP_PKEY_INDEX), 0);
	cr_assert_eq(qp->state, IBV_QPS_INIT);
	/* a send before RTS is refused when posted */
	ibv_wr_start(n.qpx);
	n.qpx->wr_id = 9;
	ibv_wr_send(n.qpx);
	ibv_wr_set_sge(n.qpx, mr->lkey, uintptr_t(buf), 8);
	ibv_wr_set_ud_addr(n.qpx, n.ah_for(n.self), n.self.qpn, 0x33);
	cr_assert_eq(ibv_wr_complete(n.qpx), EINVAL);
	/* INIT -> RTR may set the QKEY; RTR -> RTS needs the send PSN; no RNR retry on UD */
	a = ibv_qp_attr{};
	a.qp_state = IBV_QPS_RTR;
	a.qkey = 0x44;
	cr_assert_eq(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_QKEY), 0);
	a = ibv_qp_attr{};
	a.qp_state = IBV_QPS_RTS;
	cr_assert_eq(ibv_modify_qp(qp, &a, IBV_QP_STATE), EINVAL, "RTS needs sq_psn");
	a.rnr_retry = 3;
	cr_assert_eq(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_RNR_RETRY), EINVAL,
		     "RNR retry is an SRD attribute");
	cr_assert_eq(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN), 0);
	cr_assert_eq(qp->state, IBV_QPS_RTS);
	a = ibv_qp_attr{};
	a.qkey = 0x80000000;
	cr_assert_eq(ibv_modify_qp(qp, &a, IBV_QP_QKEY), EPERM, "privileged QKEY");
	a.qkey = 0x55;
	cr_assert_eq(ibv_modify_qp(qp, &a, IBV_QP_QKEY), 0, "RTS -> RTS may change the QKEY");
	ibv_qp_init_attr init;
	cr_assert_eq(ibv_query_qp(qp, &a, IBV_QP_STATE | IBV_QP_QKEY, &init), 0);
	cr_assert_eq(a.qkey, 0x55u);
	cr_assert_eq(init.qp_type, IBV_QPT_UD);
	/* ERR flushes posted receives */
	cr_assert_eq(n.post_recv(mr, buf, sizeof buf, 7), 0);
	a = ibv_qp_attr{};
	a.qp_state = IBV_QPS_ERR;
	cr_assert_eq(ibv_modify_qp(qp, &a, IBV_QP_STATE), 0);
	auto c = n.wait(1);
	cr_assert_eq(c.size(), 1u);
	cr_assert_eq(c[0].wr_id, 7u);
	cr_assert_eq(c[0].status, IBV_WC_WR_FLUSH_ERR);
	a.qp_state = IBV_QPS_RESET;
	cr_assert_eq(ibv_modify_qp(qp, &a, IBV_QP_STATE), 0);
	cr_assert_eq(qp->state, IBV_QPS_RESET);
}

Test(sim_ud, datagrams_across_processes_carry_a_grh)
{
	const uint32_t sizes[] = {0, 1, 32, 33, 1000, 4096, 8928};
	const int n = int(sizeof sizes / sizeof sizes[0]);
	run_pair(
		[&](Chan &ch) {
			UdNode a(UdOpts{.inline_size = 32});
			Addr b = a.exchange(ch);
			ibv_ah *ah = a.ah_for(b);
			std::vector<uint8_t> buf(9000);
			ibv_mr *mr = a.reg(buf.data(), buf.size());
			ch.sync(1); /* receives are posted */
			for (int i = 0; i < n; i++) {
				fill(buf.data(), sizes[i], uint32_t(i));
				const bool inl = sizes[i] == 32; /* the basic inline size */
				const uint32_t imm = (i % 2) ? 0xabc00000u + uint32_t(i) : 0;
				cr_assert_eq(a.send(ah, b, mr, buf.data(), sizes[i], 100 + uint64_t(i), imm, inl), 0);
				if (inl)
					memset(buf.data(), 0, 32); /* inline: the buffer is free at once */
				auto c = a.wait(1);
				cr_assert_eq(c.size(), 1u);
				cr_assert_eq(c[0].status, IBV_WC_SUCCESS, "send %u: vendor %u", sizes[i], c[0].vendor_err);
				cr_assert_eq(c[0].wr_id, 100u + unsigned(i));
				cr_assert_eq(c[0].opcode, IBV_WC_SEND);
			}
			/* A second batch to a receiver that holds no AH for us: the GID comes with it. */
			ch.sync(2);
			for (int i = 0; i < 2; i++) {
				fill(buf.data(), 64, uint32_t(50 + i));
				cr_assert_eq(a.send(ah, b, mr, buf.data(), 64, uint64_t(200 + i)), 0);
			}
			cr_assert_eq(a.wait(2).size(), 2u);
			ch.sync(3);
			efasim_stats s = a.stats();
			cr_assert_eq(s.retransmits, 0u, "nothing is retransmitted on UD");
			cr_assert_eq(s.acks_sent, 0u);
			cr_assert_geq(s.ud_sent, uint64_t(n + 2));
		},
		[&](Chan &ch) {
			UdNode b;
			Addr a = b.exchange(ch);
			ibv_ah *ah = b.ah_for(a);
			efadv_ah_attr aa{};
			PEER_CHECK(efadv_query_ah(ah, &aa, sizeof aa) == 0);
			const size_t slot = 9000 + kGrh;
			std::vector<uint8_t> bufs(size_t(n) * slot);
			ibv_mr *mr = b.reg(bufs.data(), bufs.size());
			for (int i = 0; i < n; i++)
				PEER_CHECK(b.post_recv(mr, bufs.data() + size_t(i) * slot, uint32_t(slot), uint64_t(i)) == 0);
			ch.sync(1);
			auto c = b.wait(size_t(n));
			PEER_CHECK(c.size() == size_t(n));
			std::set<uint64_t> seen;
			for (auto &e : c) {
				/* Datagrams may overtake each other: match by content, not by order. */
				const uint8_t *p = bufs.data() + e.wr_id * slot;
				int i = -1;
				for (int k = 0; k < n; k++)
					if (e.byte_len == kGrh + sizes[k] && !seen.count(uint64_t(k)) && check(p + kGrh, sizes[k], uint32_t(k)))
						i = k;
				PEER_CHECK(i >= 0);
				seen.insert(uint64_t(i));
				PEER_CHECK(e.status == IBV_WC_SUCCESS);
				PEER_CHECK(e.opcode == IBV_WC_RECV);
				PEER_CHECK(e.src_qp == a.qpn);
				PEER_CHECK(e.slid == aa.ahn);
				PEER_CHECK(!e.has_sgid);
				if (i % 2)
					PEER_CHECK((e.wc_flags & IBV_WC_WITH_IMM) && e.imm == 0xabc00000u + uint32_t(i));
				else
					PEER_CHECK(!(e.wc_flags & IBV_WC_WITH_IMM));
				GrhView g;
				memcpy(&g, p, sizeof g);
				PEER_CHECK(ntohl(g.version_tclass_flow) >> 28 == 6);
				PEER_CHECK(ntohs(g.paylen) == sizes[i]);
				PEER_CHECK(memcmp(g.sgid, a.gid.raw, 16) == 0);
				PEER_CHECK(memcmp(g.dgid, b.self.gid.raw, 16) == 0);
			}
			/* Without an AH for the sender: slid 0xffff and the sender's GID. */
			ibv_destroy_ah(ah);
			b.ahs.clear();
			for (int i = 0; i < 2; i++)
				PEER_CHECK(b.post_recv(mr, bufs.data() + size_t(i) * slot, uint32_t(slot), uint64_t(i)) == 0);
			ch.sync(2);
			c = b.wait(2);
			PEER_CHECK(c.size() == 2);
			for (auto &e : c) {
				PEER_CHECK(e.status == IBV_WC_SUCCESS && e.byte_len == kGrh + 64);
				PEER_CHECK(e.slid == 0xffff && e.has_sgid && memcmp(e.sgid.raw, a.gid.raw, 16) == 0);
			}
			ch.sync(3);
			efasim_stats s = b.stats();
			PEER_CHECK(s.ud_received == uint64_t(n + 2));
			PEER_CHECK(s.acks_sent == 0);
			return 0;
		});
}

Test(sim_ud, sends_complete_at_once_local_errors_fail)
{
	UdNode a;
	std::vector<uint8_t> buf(10000);
	ibv_mr *mr = a.reg(buf.data(), buf.size());
	ibv_ah *ah = a.ah_for(a.self);
	/* A QPN nobody holds: the datagram goes nowhere, the send succeeds. */
	uint32_t nobody;
	{
		UdNode gone(UdOpts{.rts = false});
		nobody = gone.qp->qp_num;
	}
	Addr to{a.self.gid, nobody, 0x2222};
	cr_assert_eq(a.send(ah, to, mr, buf.data(), 100, 1), 0);
	/* longer than the MTU: a local error */
	cr_assert_eq(a.send(ah, a.self, mr, buf.data(), 8929, 2), 0);
	/* an lkey that is not registered */
	cr_assert_eq(a.send(ah, a.self, nullptr, buf.data(), 10, 3), 0);
	auto c = a.wait(3);
	cr_assert_eq(c.size(), 3u);
	for (auto &e : c) {
		cr_assert_eq(e.opcode, IBV_WC_SEND);
		if (e.wr_id == 1) {
			cr_assert_eq(e.status, IBV_WC_SUCCESS, "a send to nobody completes: vendor %u", e.vendor_err);
		} else if (e.wr_id == 2) {
			cr_assert_eq(e.vendor_err, 6u);
			cr_assert_eq(e.status, IBV_WC_LOC_LEN_ERR);
		} else {
			cr_assert_eq(e.vendor_err, 5u);
			cr_assert_eq(e.status, IBV_WC_LOC_PROT_ERR);
		}
	}
	/* RDMA and inline beyond the QP's size: the batch is refused */
	ibv_wr_start(a.qpx);
	a.qpx->wr_id = 4;
	ibv_wr_rdma_write(a.qpx, 1, 0);
	ibv_wr_set_sge(a.qpx, mr->lkey, uintptr_t(buf.data()), 8);
	ibv_wr_set_ud_addr(a.qpx, ah, a.self.qpn, a.self.qkey);
	cr_assert_eq(ibv_wr_complete(a.qpx), EOPNOTSUPP);
	cr_assert_eq(a.send(ah, a.self, nullptr, buf.data(), 33, 5, 0, true), EINVAL);
	cr_assert_eq(a.wait(1, 200).size(), 0u, "a refused batch completes nothing");
}

Test(sim_ud, receiver_drops_silently)
{
	/* Two QPs in one process: the sender's completions say nothing about delivery. */
	UdNode tx, rx;
	ibv_ah *ah = tx.ah_for(rx.self);
	std::vector<uint8_t> sbuf(256), rbuf(4 * 256);
	ibv_mr *smr = tx.reg(sbuf.data(), sbuf.size());
	ibv_mr *rmr = rx.reg(rbuf.data(), rbuf.size());

	/* 1. No receive posted: dropped, not kept for a later receive. */
	fill(sbuf.data(), 16, 1);
	cr_assert_eq(tx.send(ah, rx.self, smr, sbuf.data(), 16, 1), 0);
	auto c = tx.wait(1);
	cr_assert_eq(c.size(), 1u);
	cr_assert_eq(c[0].status, IBV_WC_SUCCESS);
	cr_assert(rx.poll_until([](const efasim_stats &s) { return s.ud_no_recv == 1; }), "the datagram never arrived");

	/* 2. The wrong QKEY: dropped, the receive stays posted. */
	cr_assert_eq(rx.post_recv(rmr, rbuf.data(), 256, 10), 0);
	Addr wrong = rx.self;
	wrong.qkey ^= 1;
	cr_assert_eq(tx.send(ah, wrong, smr, sbuf.data(), 16, 2), 0);
	cr_assert(rx.poll_until([](const efasim_stats &s) { return s.qkey_drops == 1; }), "no QKEY drop");

	/* 3. The right QKEY: this one consumes the receive posted above. */
	fill(sbuf.data(), 16, 3);
	cr_assert_eq(tx.send(ah, rx.self, smr, sbuf.data(), 16, 3), 0);
	c = rx.wait(1);
	cr_assert_eq(c.size(), 1u);
	cr_assert_eq(c[0].wr_id, 10u);
	cr_assert_eq(c[0].status, IBV_WC_SUCCESS);
	cr_assert_eq(c[0].byte_len, kGrh + 16);
	cr_assert(check(rbuf.data() + kGrh, 16, 3), "not the third datagram's data");

	/* 4. A receive too short for GRH + payload completes with a length error. */
	cr_assert_eq(rx.post_recv(rmr, rbuf.data(), kGrh + 8, 11), 0);
	cr_assert_eq(tx.send(ah, rx.self, smr, sbuf.data(), 9, 4), 0);
	c = rx.wait(1);
	cr_assert_eq(c.size(), 1u);
	cr_assert_eq(c[0].wr_id, 11u);
	cr_assert_eq(c[0].status, IBV_WC_LOC_LEN_ERR);
	cr_assert_eq(c[0].vendor_err, 6u);
	cr_assert_eq(tx.wait(3).size(), 3u, "every send completed successfully");

	/* 5. A UD datagram for an SRD QP is not SRD traffic: dropped there. */
	Node srd;
	cr_assert_eq(tx.send(ah, srd.self, smr, sbuf.data(), 16, 5), 0);
	cr_assert(srd.wait(1, 0).empty());
	auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
	while (srd.stats().ud_dropped == 0 && std::chrono::steady_clock::now() < end)
		srd.wait(1, 1); /* polling drains the SRD QP's socket */
	cr_assert_eq(srd.stats().ud_dropped, 1u);
	cr_assert(srd.wait(1, 0).empty(), "nothing completes at the SRD QP");
	cr_assert_eq(tx.wait(1).size(), 1u);
}

Test(sim_ud, loss_is_final, .init = [] {
	setenv("EFASIM_LOSS", "0.25", 1);
	setenv("EFASIM_SEED", "7", 1);
})
{
	const int count = 200;
	UdNode tx(UdOpts{.sq = 16});
	UdNode rx(UdOpts{.rq = 256});
	ibv_ah *ah = tx.ah_for(rx.self);
	std::vector<uint8_t> sbuf(64), rbuf(size_t(count) * 128);
	ibv_mr *smr = tx.reg(sbuf.data(), sbuf.size());
	ibv_mr *rmr = rx.reg(rbuf.data(), rbuf.size());
	for (int i = 0; i < count; i++)
		cr_assert_eq(rx.post_recv(rmr, rbuf.data() + size_t(i) * 128, 128, uint64_t(i)), 0);
	for (int i = 0; i < count; i++) {
		memcpy(sbuf.data(), &i, sizeof i);
		cr_assert_eq(tx.send(ah, rx.self, smr, sbuf.data(), 64, uint64_t(i)), 0);
		auto c = tx.wait(1);
		cr_assert_eq(c.size(), 1u);
		cr_assert_eq(c[0].status, IBV_WC_SUCCESS, "a lost datagram's send still succeeds");
	}
	/* Both QPs share this process's device: every datagram was either dropped by the
	 * injected loss or received, once. */
	const uint64_t lost = tx.stats().fault_dropped;
	cr_assert_gt(lost, 0u);
	cr_assert_lt(lost, uint64_t(count));
	auto c = rx.wait(size_t(count) - lost);
	cr_assert_eq(c.size(), size_t(count) - lost);
	std::set<int> got;
	for (auto &e : c) {
		cr_assert_eq(e.status, IBV_WC_SUCCESS);
		int idx;
		memcpy(&idx, rbuf.data() + e.wr_id * 128 + kGrh, sizeof idx);
		cr_assert(got.insert(idx).second, "datagram %d delivered twice", idx);
	}
	cr_assert_eq(rx.wait(1, 300).size(), 0u, "nothing lost comes back");
	efasim_stats s = tx.stats();
	cr_assert_eq(s.retransmits, 0u);
	cr_assert_eq(s.ud_received, uint64_t(count) - lost);
}

Test(sim_ud, legacy_post_send)
{
	UdNode a(UdOpts{.ex = false});
	std::vector<uint8_t> buf(512);
	ibv_mr *mr = a.reg(buf.data(), buf.size());
	ibv_ah *ah = a.ah_for(a.self);
	cr_assert_eq(a.post_recv(mr, buf.data() + 256, 256, 1), 0);
	fill(buf.data(), 100, 5);
	ibv_sge s{uintptr_t(buf.data()), 100, mr->lkey};
	ibv_send_wr wr{};
	wr.wr_id = 2;
	wr.sg_list = &s;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND_WITH_IMM;
	wr.imm_data = htonl(77);
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = a.self.qpn;
	wr.wr.ud.remote_qkey = a.self.qkey;
	ibv_send_wr *bad = nullptr;
	cr_assert_eq(ibv_post_send(a.qp, &wr, &bad), 0);
	auto c = a.wait(2);
	cr_assert_eq(c.size(), 2u);
	for (auto &e : c) {
		cr_assert_eq(e.status, IBV_WC_SUCCESS);
		if (e.opcode == IBV_WC_RECV) {
			cr_assert_eq(e.byte_len, kGrh + 100);
			cr_assert_eq(e.imm, 77u);
			cr_assert(check(buf.data() + 256 + kGrh, 100, 5));
		}
	}
	wr.opcode = IBV_WR_RDMA_WRITE;
	cr_assert_eq(ibv_post_send(a.qp, &wr, &bad), EINVAL);
	cr_assert_eq(bad, &wr);
}

/* Datagrams sent back to back arrive each exactly once (no loss injected), in any order. */
Test(sim_ud, burst_two_processes)
{
	constexpr int n = 64;
	constexpr uint32_t len = 1024, slot = kGrh + len;
	run_pair(
		[&](Chan &ch) {
			UdNode tx(UdOpts{.sq = 128});
			Addr b = tx.exchange(ch);
			ibv_ah *ah = tx.ah_for(b);
			std::vector<uint8_t> sbuf(size_t(n) * len);
			ibv_mr *smr = tx.reg(sbuf.data(), sbuf.size());
			ch.sync(1);
			for (int i = 0; i < n; i++) {
				fill(sbuf.data() + size_t(i) * len, len, uint32_t(1000 + i));
				cr_assert_eq(tx.send(ah, b, smr, sbuf.data() + size_t(i) * len, len, uint64_t(i)), 0);
			}
			cr_assert_eq(tx.wait(n).size(), size_t(n));
			ch.sync(2);
		},
		[&](Chan &ch) {
			UdNode rx(UdOpts{.rq = 128});
			Addr a = rx.exchange(ch);
			(void)a;
			std::vector<uint8_t> rbuf(size_t(n) * slot);
			ibv_mr *rmr = rx.reg(rbuf.data(), rbuf.size());
			for (int i = 0; i < n; i++)
				PEER_CHECK(rx.post_recv(rmr, rbuf.data() + size_t(i) * slot, slot, uint64_t(i)) == 0);
			ch.sync(1);
			auto c = rx.wait(n);
			PEER_CHECK(c.size() == size_t(n));
			std::set<int> seen;
			for (auto &e : c) {
				const uint8_t *p = rbuf.data() + e.wr_id * slot + kGrh;
				int got = -1;
				for (int s = 0; s < n && got < 0; s++)
					if (check(p, len, uint32_t(1000 + s)))
						got = s;
				PEER_CHECK(got >= 0);
				PEER_CHECK(seen.insert(got).second); /* exactly once */
			}
			PEER_CHECK(seen.size() == size_t(n));
			ch.sync(2);
			return 0;
		});
}
