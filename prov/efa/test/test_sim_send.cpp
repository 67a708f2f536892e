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
			ch.send(a.self);
			Addr b = ch.recv<Addr>();
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
			Addr a = ch.recv<Addr>();
			ch.send(b.self);
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
