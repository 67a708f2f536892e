/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* Software EFA device: sends between two processes. */
#include "simtest.h"

using namespace simtest;

Test(sim_send, sizes_across_processes)
{
	const uint32_t sizes[] = {0, 1, 31, 32, 33, 80, 1000, 4096, 8000, 8928};
	const int n = int(sizeof sizes / sizeof sizes[0]);
	run_pair(
		[&](Chan &ch) {
			Node a;
			Addr b = a.exchange(ch);
			ibv_ah *ah = a.ah_for(b);
			std::vector<uint8_t> buf(9000);
			ibv_mr *mr = a.reg(buf.data(), buf.size());
			ch.sync(1); /* receives are posted */
			for (int i = 0; i < n; i++) {
				fill(buf.data(), sizes[i], uint32_t(i));
				cr_assert_eq(a.post(IBV_WR_SEND, ah, b, mr, buf.data(), sizes[i], 100 + uint64_t(i)), 0);
				auto c = a.wait(1);
				cr_assert_eq(c.size(), 1u);
				cr_assert_eq(c[0].status, IBV_WC_SUCCESS, "send %u: status %d vendor %u", sizes[i],
					     c[0].status, c[0].vendor_err);
				cr_assert_eq(c[0].wr_id, 100u + unsigned(i));
				cr_assert_eq(c[0].opcode, IBV_WC_SEND);
			}
			ch.sync(2);
		},
		[&](Chan &ch) {
			Node b;
			Addr a = b.exchange(ch);
			ibv_ah *ah = b.ah_for(a);
			uint16_t ahn = 0;
			efadv_ah_attr aa{};
			PEER_CHECK(efadv_query_ah(ah, &aa, sizeof aa) == 0);
			ahn = aa.ahn;
			std::vector<std::vector<uint8_t>> bufs(n, std::vector<uint8_t>(9000));
			for (int i = 0; i < n; i++)
				PEER_CHECK(b.post_recv(b.reg(bufs[i].data(), 9000), bufs[i].data(), 9000, uint64_t(i)) == 0);
			ch.sync(1);
			auto c = b.wait(size_t(n));
			PEER_CHECK(c.size() == size_t(n));
			for (auto &e : c) {
				PEER_CHECK(e.status == IBV_WC_SUCCESS);
				PEER_CHECK(e.opcode == IBV_WC_RECV);
				PEER_CHECK(e.byte_len == sizes[e.wr_id]);
				PEER_CHECK(check(bufs[e.wr_id].data(), e.byte_len, uint32_t(e.wr_id)));
				PEER_CHECK(e.src_qp == a.qpn);
				PEER_CHECK(e.slid == ahn);
				PEER_CHECK(!e.has_sgid);
			}
			ch.sync(2);
			return 0;
		});
}

Test(sim_send, immediate_multi_sge_inline_and_unknown_ah)
{
	run_pair(
		[&](Chan &ch) {
			Node a(NodeOpts{.inline_size = 32});
			Addr b = a.exchange(ch);
			ibv_ah *ah = a.ah_for(b);
			std::vector<uint8_t> buf(4096);
			ibv_mr *mr = a.reg(buf.data(), buf.size());
			ch.sync(1);
			/* send with immediate */
			fill(buf.data(), 100, 7);
			cr_assert_eq(a.post(IBV_WR_SEND_WITH_IMM, ah, b, mr, buf.data(), 100, 1, 0, 0, 0xabcdef01), 0);
			/* two SGEs */
			fill(buf.data(), 1000, 8);
			ibv_wr_start(a.qpx);
			a.qpx->wr_id = 2;
			a.qpx->wr_flags = IBV_SEND_SIGNALED;
			ibv_wr_send(a.qpx);
			ibv_sge sg[2] = {{uintptr_t(buf.data()), 600, mr->lkey}, {uintptr_t(buf.data() + 600), 400, mr->lkey}};
			ibv_wr_set_sge_list(a.qpx, 2, sg);
			ibv_wr_set_ud_addr(a.qpx, ah, b.qpn, b.qkey);
			cr_assert_eq(ibv_wr_complete(a.qpx), 0);
			/* inline: the buffer may change right after posting */
			uint8_t small[32];
			fill(small, 32, 9);
			cr_assert_eq(a.post(IBV_WR_SEND, ah, b, nullptr, small, 32, 3, 0, 0, 0, true), 0);
			memset(small, 0, sizeof small);
			/* inline larger than the QP's max_inline_data: the batch is refused */
			uint8_t big[64] = {};
			cr_assert_eq(a.post(IBV_WR_SEND, ah, b, nullptr, big, 64, 4, 0, 0, 0, true), EINVAL);
			auto c = a.wait(3);
			cr_assert_eq(c.size(), 3u);
			for (auto &e : c)
				cr_assert_eq(e.status, IBV_WC_SUCCESS);
			ch.sync(2);
		},
		[&](Chan &ch) {
			/* no AH for the sender: completions carry its GID */
			Node b;
			Addr a = b.exchange(ch);
			std::vector<uint8_t> buf(3 * 4096);
			ibv_mr *mr = b.reg(buf.data(), buf.size());
			for (int i = 0; i < 3; i++)
				PEER_CHECK(b.post_recv(mr, buf.data() + i * 4096, 4096, uint64_t(i + 1)) == 0);
			ch.sync(1);
			auto c = b.wait(3);
			PEER_CHECK(c.size() == 3);
			for (auto &e : c) {
				PEER_CHECK(e.status == IBV_WC_SUCCESS);
				PEER_CHECK(e.has_sgid && memcmp(e.sgid.raw, a.gid.raw, 16) == 0);
				PEER_CHECK(e.slid == 0xffff);
				uint8_t *p = buf.data() + (e.wr_id - 1) * 4096;
				if (e.wr_id == 1) {
					PEER_CHECK(e.byte_len == 100 && check(p, 100, 7));
					PEER_CHECK((e.wc_flags & IBV_WC_WITH_IMM) && e.imm == 0xabcdef01);
				} else if (e.wr_id == 2) {
					PEER_CHECK(e.byte_len == 1000 && check(p, 1000, 8));
					PEER_CHECK(!(e.wc_flags & IBV_WC_WITH_IMM));
				} else {
					PEER_CHECK(e.byte_len == 32 && check(p, 32, 9));
				}
			}
			ch.sync(2);
			return 0;
		});
}

Test(sim_send, local_errors_complete_with_efa_codes)
{
	Node a;
	std::vector<uint8_t> buf(10000);
	ibv_mr *mr = a.reg(buf.data(), buf.size());
	ibv_ah *ah = a.ah_for(a.self);
	/* longer than the MTU */
	cr_assert_eq(a.post(IBV_WR_SEND, ah, a.self, mr, buf.data(), 8929, 1), 0);
	/* an lkey that is not registered */
	cr_assert_eq(a.post(IBV_WR_SEND, ah, a.self, nullptr, buf.data(), 10, 2), 0);
	/* a buffer outside the MR */
	static uint8_t other[64];
	cr_assert_eq(a.post(IBV_WR_SEND, ah, a.self, mr, other, 10, 3), 0);
	auto c = a.wait(3);
	cr_assert_eq(c.size(), 3u);
	for (auto &e : c) {
		if (e.wr_id == 1) {
			cr_assert_eq(e.vendor_err, 6u);
			cr_assert_eq(e.status, IBV_WC_LOC_LEN_ERR);
		} else {
			cr_assert_eq(e.vendor_err, 5u);
			cr_assert_eq(e.status, IBV_WC_LOC_PROT_ERR);
		}
	}
}

Test(sim_send, send_to_self_and_receive_too_short)
{
	Node a;
	std::vector<uint8_t> tx(2000), rx(100);
	ibv_mr *mt = a.reg(tx.data(), tx.size());
	ibv_mr *mrx = a.reg(rx.data(), rx.size());
	ibv_ah *ah = a.ah_for(a.self);
	cr_assert_eq(a.post_recv(mrx, rx.data(), 100, 77), 0);
	cr_assert_eq(a.post_recv(mrx, rx.data(), 100, 78), 0);
	fill(tx.data(), 50, 3);
	cr_assert_eq(a.post(IBV_WR_SEND, ah, a.self, mt, tx.data(), 50, 1), 0);
	cr_assert_eq(a.post(IBV_WR_SEND, ah, a.self, mt, tx.data(), 2000, 2), 0);
	auto c = a.wait(4);
	cr_assert_eq(c.size(), 4u);
	int seen = 0;
	for (auto &e : c) {
		switch (e.wr_id) {
		case 1: cr_assert_eq(e.status, IBV_WC_SUCCESS); seen |= 1; break;
		case 2: cr_assert_eq(e.vendor_err, 11u, "sender of a too long message"); seen |= 2; break;
		case 77:
			cr_assert_eq(e.status, IBV_WC_SUCCESS);
			cr_assert_eq(e.byte_len, 50u);
			seen |= 4;
			break;
		case 78: cr_assert_eq(e.vendor_err, 6u, "receive buffer too short"); seen |= 8; break;
		}
	}
	cr_assert_eq(seen, 15);
}

Test(sim_send, rnr_retry_zero_fails_with_rnr)
{
	run_pair(
		[&](Chan &ch) {
			Node a(NodeOpts{.rnr_retry = 0});
			Addr b = a.exchange(ch);
			ibv_ah *ah = a.ah_for(b);
			uint8_t buf[64];
			ibv_mr *mr = a.reg(buf, sizeof buf);
			cr_assert_eq(a.post(IBV_WR_SEND, ah, b, mr, buf, 64, 1), 0);
			auto c = a.wait(1);
			cr_assert_eq(c.size(), 1u);
			cr_assert_eq(c[0].vendor_err, 10u);
			cr_assert_eq(c[0].status, IBV_WC_RNR_RETRY_EXC_ERR);
			cr_assert_geq(a.stats().rnr_naks_received, 1u);
			ch.sync(1);
		},
		[&](Chan &ch) {
			Node b;
			b.exchange(ch);
			ch.sync(1); /* no receive was ever posted */
			PEER_CHECK(b.stats().rnr_naks_sent >= 1);
			return 0;
		});
}

Test(sim_send, rnr_retry_forever_succeeds_when_receiver_posts_late)
{
	run_pair(
		[&](Chan &ch) {
			Node a; /* rnr_retry 7 */
			Addr b = a.exchange(ch);
			ibv_ah *ah = a.ah_for(b);
			uint8_t buf[64];
			fill(buf, 64, 5);
			ibv_mr *mr = a.reg(buf, sizeof buf);
			cr_assert_eq(a.post(IBV_WR_SEND, ah, b, mr, buf, 64, 1), 0);
			/* Tell the receiver once the device has seen an RNR NAK. */
			while (a.stats().rnr_naks_received == 0)
				a.wait(0, 1);
			ch.sync(1);
			auto c = a.wait(1);
			cr_assert_eq(c.size(), 1u);
			cr_assert_eq(c[0].status, IBV_WC_SUCCESS);
			ch.sync(2);
		},
		[&](Chan &ch) {
			Node b;
			b.exchange(ch);
			ch.sync(1);
			uint8_t rx[64];
			PEER_CHECK(b.post_recv(b.reg(rx, sizeof rx), rx, sizeof rx, 9) == 0);
			auto c = b.wait(1);
			PEER_CHECK(c.size() == 1 && c[0].status == IBV_WC_SUCCESS && check(rx, 64, 5));
			ch.sync(2);
			return 0;
		});
}

Test(sim_send, wrong_qkey_is_dropped_and_counted)
{
	Node a;
	uint8_t tx[16], rx[16];
	ibv_mr *mt = a.reg(tx, sizeof tx);
	ibv_mr *mrx = a.reg(rx, sizeof rx);
	ibv_ah *ah = a.ah_for(a.self);
	cr_assert_eq(a.post_recv(mrx, rx, sizeof rx, 50), 0);
	Addr wrong = a.self;
	wrong.qkey = a.self.qkey + 1;
	cr_assert_eq(a.post(IBV_WR_SEND, ah, wrong, mt, tx, 16, 1), 0);
	auto c = a.wait(1);
	cr_assert_eq(c.size(), 1u);
	cr_assert_eq(c[0].wr_id, 1u, "the receive must not complete");
	cr_assert_eq(c[0].status, IBV_WC_SUCCESS, "SRD delivered it; the QP dropped it");
	cr_assert_eq(a.stats().qkey_drops, 1u);
	/* the receive is still there for a correct send */
	cr_assert_eq(a.post(IBV_WR_SEND, ah, a.self, mt, tx, 16, 2), 0);
	c = a.wait(2);
	cr_assert_eq(c.size(), 2u);
}

Test(sim_send, completion_channel_wakes_an_armed_cq)
{
	run_pair(
		[&](Chan &ch) {
			Node a(NodeOpts{.channel = true});
			ch.send(a.self);
			ch.recv<Addr>();
			uint8_t rx[64];
			cr_assert_eq(a.post_recv(a.reg(rx, sizeof rx), rx, sizeof rx, 1), 0);
			cr_assert_eq(ibv_req_notify_cq(ibv_cq_ex_to_cq(a.cq), 0), 0);
			pollfd pfd{a.channel->fd, POLLIN, 0};
			cr_assert_eq(poll(&pfd, 1, 0), 0, "readable before any completion");
			ch.sync(1);
			cr_assert_eq(poll(&pfd, 1, 10000), 1, "no event within 10 s");
			ibv_cq *ev_cq;
			void *ev_ctx;
			cr_assert_eq(ibv_get_cq_event(a.channel, &ev_cq, &ev_ctx), 0);
			cr_assert_eq(ev_cq, ibv_cq_ex_to_cq(a.cq));
			ibv_ack_cq_events(ev_cq, 1);
			auto c = a.wait(1);
			cr_assert_eq(c.size(), 1u);
			cr_assert_eq(c[0].opcode, IBV_WC_RECV);
			cr_assert_eq(poll(&pfd, 1, 0), 0, "one event per arming");
			ch.sync(2);
		},
		[&](Chan &ch) {
			Node b;
			Addr a = b.exchange(ch);
			ch.sync(1);
			uint8_t tx[64] = {1};
			PEER_CHECK(b.post(IBV_WR_SEND, b.ah_for(a), a, b.reg(tx, 64), tx, 64, 1) == 0);
			auto c = b.wait(1);
			PEER_CHECK(c.size() == 1 && c[0].status == IBV_WC_SUCCESS);
			ch.sync(2);
			return 0;
		});
}

Test(sim_send, legacy_post_send_and_poll_cq)
{
	Node a;
	uint8_t tx[32], rx[32];
	fill(tx, 32, 4);
	ibv_mr *mt = a.reg(tx, sizeof tx);
	ibv_mr *mrx = a.reg(rx, sizeof rx);
	ibv_ah *ah = a.ah_for(a.self);
	cr_assert_eq(a.post_recv(mrx, rx, sizeof rx, 2), 0);
	ibv_sge s{uintptr_t(tx), 32, mt->lkey};
	ibv_send_wr wr{};
	wr.wr_id = 1;
	wr.sg_list = &s;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = a.self.qpn;
	wr.wr.ud.remote_qkey = a.self.qkey;
	ibv_send_wr *bad = nullptr;
	cr_assert_eq(ibv_post_send(a.qp, &wr, &bad), 0);
	ibv_wc wc[4];
	int got = 0;
	for (int i = 0; i < 1000000 && got < 2; i++) {
		int n = ibv_poll_cq(ibv_cq_ex_to_cq(a.cq), 4 - got, wc + got);
		cr_assert_geq(n, 0);
		got += n;
	}
	cr_assert_eq(got, 2);
	cr_assert(check(rx, 32, 4));
}

/*
 * A grace period of 100 ms keeps a poller that a busy test machine (make -j2 check on 2
 * cores, with other suites' processes spinning) deschedules for a while from counting as
 * gone; the default, 200 us, behaves the same on an idle machine (about 20 engine
 * wake-ups for these 2000 round trips). An engine that woke for each packet would wake
 * about 4000 times.
 */
Test(sim_send, polling_application_pays_no_wakeup_per_packet,
     .init = [] { setenv("EFASIM_POLL_GRACE_US", "100000", 1); })
{
	const int iters = 2000;
	run_pair(
		[&](Chan &ch) {
			Node a;
			Addr b = a.exchange(ch);
			ibv_ah *ah = a.ah_for(b);
			uint8_t tx[8], rx[8];
			ibv_mr *mt = a.reg(tx, 8), *mrx = a.reg(rx, 8);
			ch.sync(1);
			auto t0 = std::chrono::steady_clock::now();
			for (int i = 0; i < iters; i++) {
				cr_assert_eq(a.post_recv(mrx, rx, 8, 0), 0);
				cr_assert_eq(a.post(IBV_WR_SEND, ah, b, mt, tx, 8, 1), 0);
				auto c = a.wait(2);
				cr_assert_eq(c.size(), 2u);
			}
			double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
			efasim_stats s = a.stats();
			/* The engine only checks now and then whether the application still polls. */
			cr_assert_lt(s.engine_wakeups, s.rx_packets / 4, "engine woke %lu times for %lu packets in %.0f ms",
				     s.engine_wakeups, s.rx_packets, ms);
			cr_assert_leq(double(s.engine_wakeups), ms / 2 + 50, "engine woke %lu times in %.0f ms",
				      s.engine_wakeups, ms);
			cr_assert_geq(s.poll_drains, uint64_t(iters));
			ch.sync(2);
		},
		[&](Chan &ch) {
			Node b;
			Addr a = b.exchange(ch);
			ibv_ah *ah = b.ah_for(a);
			uint8_t tx[8], rx[8];
			ibv_mr *mt = b.reg(tx, 8), *mrx = b.reg(rx, 8);
			PEER_CHECK(b.post_recv(mrx, rx, 8, 0) == 0);
			ch.sync(1);
			for (int i = 0; i < iters; i++) {
				auto c = b.wait(1);
				PEER_CHECK(c.size() == 1 && c[0].opcode == IBV_WC_RECV);
				if (i + 1 < iters)
					PEER_CHECK(b.post_recv(mrx, rx, 8, 0) == 0);
				PEER_CHECK(b.post(IBV_WR_SEND, ah, a, mt, tx, 8, 1) == 0);
				c = b.wait(1);
				PEER_CHECK(c.size() == 1 && c[0].status == IBV_WC_SUCCESS);
			}
			ch.sync(2);
			return 0;
		});
}

Test(sim_send, invalid_ah_and_destination_in_error)
{
	run_pair(
		[&](Chan &ch) {
			Node a;
			Addr b = a.exchange(ch);
			uint8_t buf[16] = {};
			ibv_mr *mr = a.reg(buf, sizeof buf);
			/* an AH of another protection domain */
			ibv_pd *other = ibv_alloc_pd(a.ctx);
			ibv_ah_attr aa{};
			aa.is_global = 1;
			aa.port_num = 1;
			aa.grh.dgid = b.gid;
			ibv_ah *foreign = ibv_create_ah(other, &aa);
			cr_assert_eq(a.post(IBV_WR_SEND, foreign, b, mr, buf, 16, 1), 0);
			auto c = a.wait(1);
			cr_assert_eq(c[0].vendor_err, 4u);
			cr_assert_eq(c[0].status, IBV_WC_LOC_QP_OP_ERR);
			ibv_destroy_ah(foreign);
			ibv_dealloc_pd(other);
			ch.sync(1); /* the peer's QP is now in the error state */
			cr_assert_eq(a.post(IBV_WR_SEND, a.ah_for(b), b, mr, buf, 16, 2), 0);
			c = a.wait(1);
			cr_assert_eq(c[0].vendor_err, 9u, "vendor %u", c[0].vendor_err);
			cr_assert_eq(c[0].status, IBV_WC_REM_INV_RD_REQ_ERR);
			ch.sync(2);
		},
		[&](Chan &ch) {
			Node b;
			b.exchange(ch);
			ibv_qp_attr qa{};
			qa.qp_state = IBV_QPS_ERR;
			PEER_CHECK(ibv_modify_qp(b.qp, &qa, IBV_QP_STATE) == 0);
			ch.sync(1);
			ch.sync(2);
			return 0;
		});
}

Test(sim_send, rdma_write_to_an_older_device_is_a_feature_mismatch)
{
	run_pair(
		[&](Chan &ch) {
			Node a; /* default profile: has RDMA write */
			Addr t = a.exchange(ch);
			RemoteMr rm = ch.recv<RemoteMr>();
			uint8_t buf[64] = {};
			ibv_mr *mr = a.reg(buf, sizeof buf);
			cr_assert_eq(a.post(IBV_WR_RDMA_WRITE, a.ah_for(t), t, mr, buf, 64, 1, rm.rkey, rm.addr), 0);
			auto c = a.wait(1);
			cr_assert_eq(c[0].vendor_err, 18u, "vendor %u", c[0].vendor_err);
			cr_assert_eq(c[0].status, IBV_WC_REM_INV_REQ_ERR);
			ch.sync(1);
		},
		[&](Chan &ch) {
			setenv("EFASIM_PROFILE", "no-rdma-write", 1); /* this process's device is older */
			Node t;
			Addr a = t.exchange(ch);
			t.ah_for(a);
			static uint8_t mem[64];
			ibv_mr *mr = t.reg(mem, sizeof mem, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
			ch.send(RemoteMr{uintptr_t(mem), mr->rkey, 64});
			ch.sync(1);
			for (uint8_t v : mem)
				PEER_CHECK(v == 0);
			return 0;
		});
}

Test(sim_send, two_devices_on_two_addresses, .init = [] {
	setenv("EFASIM_DEVICES", "2", 1);
	setenv("EFASIM_ADDR", "127.0.0.1,127.0.0.2", 1);
})
{
	run_pair(
		[&](Chan &ch) {
			Node a(NodeOpts{.device = 0});
			Addr b = a.exchange(ch);
			cr_assert_neq(memcmp(a.self.gid.raw, b.gid.raw, 16), 0);
			uint8_t buf[100];
			fill(buf, 100, 17);
			cr_assert_eq(a.post(IBV_WR_SEND, a.ah_for(b), b, a.reg(buf, 100), buf, 100, 1), 0);
			auto c = a.wait(1);
			cr_assert_eq(c[0].status, IBV_WC_SUCCESS);
			ch.sync(2);
		},
		[&](Chan &ch) {
			Node b(NodeOpts{.device = 1});
			Addr a = ch.recv<Addr>();
			PEER_CHECK(b.self.gid.raw[15] == 2); /* bound to 127.0.0.2 */
			uint8_t rx[100];
			PEER_CHECK(b.post_recv(b.reg(rx, 100), rx, 100, 5) == 0);
			ch.send(b.self);
			auto c = b.wait(1);
			PEER_CHECK(c.size() == 1 && c[0].status == IBV_WC_SUCCESS && check(rx, 100, 17));
			PEER_CHECK(memcmp(c[0].sgid.raw, a.gid.raw, 16) == 0);
			ch.sync(2);
			return 0;
		});
}

/*
 * A retransmitted copy that crosses the receiver-not-ready NAK must not be delivered
 * once the sender gave up on it (rnr_retry 0): with a 50 us retransmission timeout and
 * 300 us of delay, copies of the refused send are still in flight when the receiver
 * posts buffers; the receiver must see only the later messages.
 */
Test(sim_send, refused_send_is_never_delivered_later, .init = [] {
	setenv("EFASIM_RTO_US", "50", 1);
	setenv("EFASIM_DELAY_US", "300", 1);
})
{
	run_pair(
		[&](Chan &ch) {
			Node a(NodeOpts{.rnr_retry = 0});
			Addr b = a.exchange(ch);
			ibv_ah *ah = a.ah_for(b);
			uint8_t buf[3][64];
			for (int i = 0; i < 3; i++)
				fill(buf[i], 64, uint32_t(i + 1));
			ibv_mr *mr = a.reg(buf, sizeof buf);
			cr_assert_eq(a.post(IBV_WR_SEND, ah, b, mr, buf[0], 64, 1), 0);
			auto c = a.wait(1);
			cr_assert_eq(c[0].vendor_err, 10u, "the first send must be refused (vendor %u)", c[0].vendor_err);
			cr_assert_gt(a.stats().retransmits, 0u, "no copy crossed the NAK: the test proves nothing");
			ch.sync(1); /* the receiver posts its buffers now */
			ch.sync(2);
			for (int i = 1; i < 3; i++) {
				cr_assert_eq(a.post(IBV_WR_SEND, ah, b, mr, buf[i], 64, uint64_t(i + 1)), 0);
				cr_assert_eq(a.wait(1)[0].status, IBV_WC_SUCCESS);
			}
			ch.sync(3);
		},
		[&](Chan &ch) {
			Node b;
			b.exchange(ch);
			ch.sync(1);
			uint8_t rx[2][64];
			ibv_mr *mr = b.reg(rx, sizeof rx);
			PEER_CHECK(b.post_recv(mr, rx[0], 64, 10) == 0);
			PEER_CHECK(b.post_recv(mr, rx[1], 64, 11) == 0);
			ch.sync(2);
			auto c = b.wait(2);
			PEER_CHECK(c.size() == 2);
			for (auto &e : c)
				PEER_CHECK(e.status == IBV_WC_SUCCESS);
			/* both buffers hold the later messages, never the refused one */
			PEER_CHECK((check(rx[0], 64, 2) && check(rx[1], 64, 3)) || (check(rx[0], 64, 3) && check(rx[1], 64, 2)));
			ch.sync(3);
			return 0;
		});
}

/*
 * Receive completions report service level 0, as rdma-core does (its CQE has no sl),
 * whatever sl the sender's QP was created with: through ibv_wc_read_sl() and through
 * ibv_poll_cq(), for a send and for an RDMA write with immediate.
 */
Test(sim_send, receive_completions_report_sl_zero)
{
	Node a(NodeOpts{.sl = 8});
	Node b(NodeOpts{.efa_flags = EFADV_QP_FLAGS_UNSOLICITED_WRITE_RECV, .unsolicited_cq = true});
	static uint8_t rx[256], tx[64];
	ibv_mr *mrx = b.reg(rx, sizeof rx, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	ibv_mr *mtx = a.reg(tx, sizeof tx);
	b.ah_for(a.self); /* RDMA needs the target to know the initiator */
	ibv_ah *ah = a.ah_for(b.self);
	cr_assert_eq(b.post_recv(mrx, rx, 64, 1), 0);
	cr_assert_eq(b.post_recv(mrx, rx + 64, 64, 2), 0);
	cr_assert_eq(a.post(IBV_WR_SEND, ah, b.self, mtx, tx, sizeof tx, 10), 0);
	cr_assert_eq(a.post(IBV_WR_SEND, ah, b.self, mtx, tx, sizeof tx, 11), 0);
	cr_assert_eq(a.post(IBV_WR_RDMA_WRITE_WITH_IMM, ah, b.self, mtx, tx, sizeof tx, 12, mrx->rkey,
			    uintptr_t(rx + 128), 5),
		     0);
	auto sc = a.wait(3);
	cr_assert_eq(sc.size(), 3u);
	for (const Completion &e : sc)
		cr_assert_eq(e.status, IBV_WC_SUCCESS, "vendor %u", e.vendor_err);
	/* one through the legacy poll */
	ibv_wc wc{};
	wc.sl = 0xff;
	int n = 0;
	for (int spins = 0; n == 0 && spins < 1000000; spins++)
		n = ibv_poll_cq(ibv_cq_ex_to_cq(b.cq), 1, &wc);
	cr_assert_eq(n, 1);
	cr_assert_eq(wc.status, IBV_WC_SUCCESS);
	cr_assert_eq(wc.sl, 0, "ibv_poll_cq reported sl %u", wc.sl);
	/* the others through the extended API */
	auto rc = b.wait(2);
	cr_assert_eq(rc.size(), 2u);
	bool saw_imm = false;
	for (const Completion &e : rc) {
		cr_assert_eq(e.status, IBV_WC_SUCCESS);
		cr_assert_eq(e.sl, 0, "ibv_wc_read_sl reported sl %u (opcode %d)", e.sl, e.opcode);
		saw_imm = saw_imm || e.opcode == IBV_WC_RECV_RDMA_WITH_IMM;
	}
	cr_assert(saw_imm || wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM);
	cr_assert_eq(a.stats().sl_nonzero_wrs, 3u, "the sender's work requests carried its sl");
}

/*
 * Batched sends (efasim(7)): the work requests of one doorbell leave toward their peer
 * in one sendmsg with UDP segmentation offload and arrive as one buffer, which the
 * device cuts back into datagrams. Doorbell 1: six full packets and a shorter last one
 * (one batch). Doorbell 2: two short packets (a batch whose second datagram the receiver
 * finds at an offset its header cannot be read at in place: 188 bytes in), then a full
 * one (larger than the batch's segment: a second call). Every message must arrive whole,
 * in its own receive, whichever way it travelled; `batched` says whether the device was
 * asked to batch.
 */
static void doorbell_batches(bool batched)
{
	constexpr int kFirst = 7, kAll = 10;
	const uint32_t mtu = 8928;
	const uint32_t sizes[kAll] = {mtu, mtu, mtu, mtu, mtu, mtu, 100, 100, 100, mtu};
	run_pair(
		[&](Chan &ch) {
			Node a;
			Addr b = a.exchange(ch);
			ibv_ah *ah = a.ah_for(b);
			std::vector<uint8_t> buf(size_t(kAll) * mtu);
			ibv_mr *mr = a.reg(buf.data(), buf.size());
			for (int i = 0; i < kAll; i++)
				fill(buf.data() + size_t(i) * mtu, sizes[i], uint32_t(40 + i));
			ch.sync(1); /* receives are posted */
			for (auto [from, to] : {std::pair{0, kFirst}, std::pair{kFirst, kAll}}) {
				ibv_wr_start(a.qpx);
				for (int i = from; i < to; i++) {
					a.qpx->wr_id = uint64_t(i);
					a.qpx->wr_flags = IBV_SEND_SIGNALED;
					ibv_wr_send(a.qpx);
					ibv_wr_set_sge(a.qpx, mr->lkey, uintptr_t(buf.data() + size_t(i) * mtu), sizes[i]);
					ibv_wr_set_ud_addr(a.qpx, ah, b.qpn, b.qkey);
				}
				cr_assert_eq(ibv_wr_complete(a.qpx), 0);
			}
			auto c = a.wait(kAll);
			cr_assert_eq(c.size(), size_t(kAll));
			for (auto &e : c)
				cr_assert_eq(e.status, IBV_WC_SUCCESS, "send %lu: status %d", (unsigned long)e.wr_id, e.status);
			const efasim_stats s = a.stats();
			if (batched)
				cr_assert_geq(s.tx_batches, 2u, "a doorbell's packets left one by one");
			else
				cr_assert_eq(s.tx_batches, 0u);
			ch.sync(2);
		},
		[&](Chan &ch) {
			Node b;
			b.exchange(ch);
			std::vector<uint8_t> buf(size_t(kAll) * mtu);
			ibv_mr *mr = b.reg(buf.data(), buf.size());
			for (int i = 0; i < kAll; i++)
				PEER_CHECK(b.post_recv(mr, buf.data() + size_t(i) * mtu, mtu, uint64_t(i)) == 0);
			ch.sync(1);
			auto c = b.wait(kAll);
			PEER_CHECK(c.size() == size_t(kAll));
			/* Receives are consumed in arrival order: find each message by its length
			 * and contents, each exactly once. */
			bool seen[kAll] = {};
			for (auto &e : c) {
				PEER_CHECK(e.status == IBV_WC_SUCCESS && e.opcode == IBV_WC_RECV);
				const uint8_t *p = buf.data() + e.wr_id * mtu;
				int found = -1;
				for (int i = 0; i < kAll && found < 0; i++)
					if (!seen[i] && sizes[i] == e.byte_len && check(p, e.byte_len, uint32_t(40 + i)))
						found = i;
				PEER_CHECK(found >= 0);
				seen[found] = true;
			}
			const efasim_stats s = b.stats();
			/* The first doorbell's seven arrive in one buffer, the two short ones of
			 * the second in another. */
			PEER_CHECK(batched ? s.rx_coalesced >= uint64_t(kFirst + 2) : s.rx_coalesced == 0);
			ch.sync(2);
			return 0;
		});
}

Test(sim_send, one_doorbell_leaves_in_one_system_call) { doorbell_batches(true); }

Test(sim_send, batching_off_sends_datagram_by_datagram, .init = [] { setenv("EFASIM_GSO", "0", 1); })
{
	doorbell_batches(false);
}
