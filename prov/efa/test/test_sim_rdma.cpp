/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Software EFA device: RDMA read / write / write-with-immediate between two processes,
 * executed by the target device while the target application does not call anything;
 * key, bounds, access and address-handle checks; unsolicited write receive; inline
 * write; processing hints and service levels.
 */
#include "simtest.h"

#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

using namespace simtest;

namespace {

constexpr int kAllRemote = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;

/* Lets any process of ours copy into this one where Yama's ptrace scope 1 would allow
 * only its parent (run_pair's target is this process's child): loopback DMA tests expect
 * the copies. Without Yama, EINVAL, and nothing is needed. */
void allow_loopback_dma() { prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0); }

/* Drops CAP_SYS_PTRACE from this thread (and the threads it creates later: the device's
 * engine): copies from a process that is not dumpable are then refused by the kernel. */
bool drop_ptrace_capability()
{
	__user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
	__user_cap_data_struct data[2] = {};
	if (syscall(SYS_capget, &hdr, data))
		return false;
	data[CAP_SYS_PTRACE / 32].effective &= ~(1u << (CAP_SYS_PTRACE % 32));
	data[CAP_SYS_PTRACE / 32].permitted &= ~(1u << (CAP_SYS_PTRACE % 32));
	return syscall(SYS_capset, &hdr, data) == 0;
}

/*
 * The target: registers `len` bytes filled with pattern `seed`, publishes its address
 * and MR, creates an AH for the initiator unless told not to, then only waits on the
 * channel: the device serves every RDMA without the application. On sync(2) it checks
 * the memory holds `expect_seed` (or the original pattern when expect_seed == 0).
 */
int passive_target(Chan &ch, size_t len, uint32_t seed, int access, bool make_ah, uint32_t expect_seed,
		   NodeOpts o = NodeOpts())
{
	std::vector<uint8_t> mem(len); /* outlives the device (simtest.h, Node) */
	Node t(o);
	Addr init = t.exchange(ch);
	if (make_ah)
		t.ah_for(init);
	fill(mem.data(), len, seed);
	ibv_mr *mr = t.reg(mem.data(), len, access);
	ch.send(RemoteMr{uintptr_t(mem.data()), mr->rkey, uint32_t(len)});
	ch.sync(1);
	ch.sync(2);
	PEER_CHECK(check(mem.data(), len, expect_seed ? expect_seed : seed));
	return 0;
}

} // namespace

Test(sim_rdma, write_then_read_back_large_passive_target)
{
	const size_t len = 16u << 20;
	run_pair(
		[&](Chan &ch) {
			Initiator in(ch);
			auto &[a, t, rm, ah] = in;
			std::vector<uint8_t> src(len), dst(len);
			fill(src.data(), len, 42);
			ibv_mr *ms = a.reg(src.data(), len), *md = a.reg(dst.data(), len);
			ch.sync(1);
			cr_assert_eq(a.post(IBV_WR_RDMA_WRITE, ah, t, ms, src.data(), uint32_t(len), 1, rm.rkey, rm.addr), 0);
			auto c = a.wait(1, 30000);
			cr_assert_eq(c.size(), 1u);
			cr_assert_eq(c[0].status, IBV_WC_SUCCESS, "write: vendor %u", c[0].vendor_err);
			cr_assert_eq(c[0].opcode, IBV_WC_RDMA_WRITE);
			cr_assert_eq(a.post(IBV_WR_RDMA_READ, ah, t, md, dst.data(), uint32_t(len), 2, rm.rkey, rm.addr), 0);
			c = a.wait(1, 30000);
			cr_assert_eq(c.size(), 1u);
			cr_assert_eq(c[0].status, IBV_WC_SUCCESS, "read: vendor %u", c[0].vendor_err);
			cr_assert_eq(c[0].opcode, IBV_WC_SEND, "EFA reports RDMA read as IBV_WC_SEND");
			cr_assert(check(dst.data(), len, 42));
			/* small and odd sizes, at offsets */
			const uint32_t sizes[] = {0, 1, 7, 4096, 32769, 100000};
			for (uint32_t sz : sizes) {
				fill(src.data(), sz, sz + 1);
				cr_assert_eq(a.post(IBV_WR_RDMA_WRITE, ah, t, ms, src.data(), sz, 3, rm.rkey, rm.addr + 12345), 0);
				cr_assert_eq(a.wait(1)[0].status, IBV_WC_SUCCESS);
				memset(dst.data(), 0, sz);
				cr_assert_eq(a.post(IBV_WR_RDMA_READ, ah, t, md, dst.data(), sz, 4, rm.rkey, rm.addr + 12345), 0);
				cr_assert_eq(a.wait(1)[0].status, IBV_WC_SUCCESS);
				cr_assert(check(dst.data(), sz, sz + 1), "size %u", sz);
			}
			/* restore the pattern the target checks */
			fill(src.data(), len, 42);
			cr_assert_eq(a.post(IBV_WR_RDMA_WRITE, ah, t, ms, src.data(), uint32_t(len), 5, rm.rkey, rm.addr), 0);
			cr_assert_eq(a.wait(1, 30000)[0].status, IBV_WC_SUCCESS);
			ch.sync(2);
		},
		[&](Chan &ch) { return passive_target(ch, len, 1, kAllRemote, true, 42); });
}

Test(sim_rdma, violations_fail_and_touch_nothing)
{
	const size_t len = 65536;
	run_pair(
		[&](Chan &ch) {
			Initiator in(ch);
			auto &[a, t, rm, ah] = in;
			std::vector<uint8_t> buf(len * 2);
			ibv_mr *m = a.reg(buf.data(), buf.size());
			ch.sync(1);
			struct Case {
				ibv_wr_opcode op;
				uint32_t rkey;
				uint64_t raddr;
				uint32_t len;
			} cases[] = {
				{IBV_WR_RDMA_WRITE, rm.rkey + 1, rm.addr, 64},              /* unknown key */
				{IBV_WR_RDMA_WRITE, rm.rkey, rm.addr + len - 10, 64},      /* past the end */
				{IBV_WR_RDMA_WRITE, rm.rkey, rm.addr - 8, 64},             /* before the start */
				{IBV_WR_RDMA_WRITE, rm.rkey, rm.addr, uint32_t(len * 2)},  /* multi-segment, too long */
				{IBV_WR_RDMA_WRITE_WITH_IMM, rm.rkey, rm.addr + len, 1},   /* past the end, with imm */
				{IBV_WR_RDMA_READ, rm.rkey, rm.addr + len - 1, 2},         /* read past the end */
				{IBV_WR_RDMA_READ, rm.rkey ^ 0x1000000, rm.addr, 8},       /* stale generation */
			};
			uint64_t id = 1;
			for (auto &k : cases) {
				cr_assert_eq(a.post(k.op, ah, t, m, buf.data(), k.len, id, k.rkey, k.raddr, 1), 0);
				auto c = a.wait(1);
				cr_assert_eq(c.size(), 1u);
				cr_assert_eq(c[0].vendor_err, 7u, "case %lu: vendor %u", id, c[0].vendor_err);
				cr_assert_eq(c[0].status, IBV_WC_REM_ACCESS_ERR);
				id++;
			}
			ch.sync(2);
		},
		[&](Chan &ch) { return passive_target(ch, len, 9, kAllRemote, true, 0); });
}

Test(sim_rdma, access_flags_are_enforced)
{
	const size_t len = 4096;
	run_pair(
		[&](Chan &ch) {
			Initiator in(ch);
			auto &[a, t, rm, ah] = in;
			std::vector<uint8_t> buf(len);
			ibv_mr *m = a.reg(buf.data(), len);
			ch.sync(1);
			/* the MR allows remote read only */
			cr_assert_eq(a.post(IBV_WR_RDMA_WRITE, ah, t, m, buf.data(), 16, 1, rm.rkey, rm.addr), 0);
			cr_assert_eq(a.wait(1)[0].vendor_err, 7u);
			cr_assert_eq(a.post(IBV_WR_RDMA_READ, ah, t, m, buf.data(), 16, 2, rm.rkey, rm.addr), 0);
			cr_assert_eq(a.wait(1)[0].status, IBV_WC_SUCCESS);
			cr_assert(check(buf.data(), 16, 3));
			ch.sync(2);
		},
		[&](Chan &ch) { return passive_target(ch, len, 3, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ, true, 0); });
}

Test(sim_rdma, target_without_address_handle_is_unknown_peer)
{
	run_pair(
		[&](Chan &ch) {
			Initiator in(ch);
			auto &[a, t, rm, ah] = in;
			uint8_t buf[64];
			ibv_mr *m = a.reg(buf, sizeof buf);
			ch.sync(1);
			cr_assert_eq(a.post(IBV_WR_RDMA_WRITE, ah, t, m, buf, 64, 1, rm.rkey, rm.addr), 0);
			auto c = a.wait(1);
			cr_assert_eq(c[0].vendor_err, 14u);
			cr_assert_eq(c[0].status, IBV_WC_REM_OP_ERR);
			cr_assert_eq(a.post(IBV_WR_RDMA_READ, ah, t, m, buf, 64, 2, rm.rkey, rm.addr), 0);
			cr_assert_eq(a.wait(1)[0].vendor_err, 14u);
			ch.sync(2);
		},
		[&](Chan &ch) { return passive_target(ch, 4096, 5, kAllRemote, false, 0); });
}

Test(sim_rdma, revoked_key_is_refused)
{
	run_pair(
		[&](Chan &ch) {
			Initiator in(ch);
			auto &[a, t, rm, ah] = in;
			uint8_t buf[64] = {};
			ibv_mr *m = a.reg(buf, sizeof buf);
			ch.sync(1); /* the target deregistered its MR */
			cr_assert_eq(a.post(IBV_WR_RDMA_WRITE, ah, t, m, buf, 64, 1, rm.rkey, rm.addr), 0);
			cr_assert_eq(a.wait(1)[0].vendor_err, 7u);
			ch.sync(2);
		},
		[&](Chan &ch) {
			Node t;
			Addr init = t.exchange(ch);
			t.ah_for(init);
			std::vector<uint8_t> mem(4096, 0x5a);
			ibv_mr *mr = ibv_reg_mr(t.pd, mem.data(), mem.size(), kAllRemote);
			ch.send(RemoteMr{uintptr_t(mem.data()), mr->rkey, 4096});
			PEER_CHECK(ibv_dereg_mr(mr) == 0);
			ch.sync(1);
			ch.sync(2);
			for (uint8_t v : mem)
				PEER_CHECK(v == 0x5a);
			return 0;
		});
}

Test(sim_rdma, write_with_immediate_consumes_a_receive)
{
	const size_t len = 100000;
	run_pair(
		[&](Chan &ch) {
			Initiator in(ch);
			auto &[a, t, rm, ah] = in;
			std::vector<uint8_t> src(len);
			fill(src.data(), len, 77);
			ibv_mr *m = a.reg(src.data(), len);
			ch.sync(1);
			cr_assert_eq(a.post(IBV_WR_RDMA_WRITE_WITH_IMM, ah, t, m, src.data(), uint32_t(len), 1, rm.rkey,
					    rm.addr, 0x11223344),
				     0);
			auto c = a.wait(1);
			cr_assert_eq(c[0].status, IBV_WC_SUCCESS);
			cr_assert_eq(c[0].opcode, IBV_WC_RDMA_WRITE);
			ch.sync(2);
		},
		[&](Chan &ch) {
			Node t;
			Addr init = t.exchange(ch);
			ibv_ah *ah = t.ah_for(init);
			efadv_ah_attr aa{};
			efadv_query_ah(ah, &aa, sizeof aa);
			std::vector<uint8_t> mem(len);
			ibv_mr *mr = t.reg(mem.data(), len, kAllRemote);
			ch.send(RemoteMr{uintptr_t(mem.data()), mr->rkey, uint32_t(len)});
			uint8_t dummy[8];
			PEER_CHECK(t.post_recv(t.reg(dummy, 8), dummy, 8, 555) == 0);
			ch.sync(1);
			auto c = t.wait(1);
			PEER_CHECK(c.size() == 1);
			PEER_CHECK(c[0].opcode == IBV_WC_RECV_RDMA_WITH_IMM);
			PEER_CHECK(c[0].wr_id == 555);
			PEER_CHECK(c[0].imm == 0x11223344 && (c[0].wc_flags & IBV_WC_WITH_IMM));
			PEER_CHECK(c[0].byte_len == len);
			PEER_CHECK(c[0].slid == aa.ahn);
			/* the completion means the whole write is in place */
			PEER_CHECK(check(mem.data(), len, 77));
			ch.sync(2);
			return 0;
		});
}

Test(sim_rdma, unsolicited_write_recv_needs_no_receive)
{
	run_pair(
		[&](Chan &ch) {
			Initiator in(ch);
			auto &[a, t, rm, ah] = in;
			uint8_t src[256];
			fill(src, sizeof src, 12);
			ibv_mr *m = a.reg(src, sizeof src);
			ch.sync(1);
			for (int i = 0; i < 3; i++) {
				cr_assert_eq(a.post(IBV_WR_RDMA_WRITE_WITH_IMM, ah, t, m, src, 256, 1, rm.rkey, rm.addr,
						    uint32_t(i)),
					     0);
				cr_assert_eq(a.wait(1)[0].status, IBV_WC_SUCCESS);
			}
			ch.sync(2);
		},
		[&](Chan &ch) {
			NodeOpts o;
			o.efa_flags = EFADV_QP_FLAGS_UNSOLICITED_WRITE_RECV;
			o.unsolicited_cq = true;
			Node t(o);
			Addr init = t.exchange(ch);
			t.ah_for(init);
			std::vector<uint8_t> mem(256);
			ibv_mr *mr = t.reg(mem.data(), 256, kAllRemote);
			ch.send(RemoteMr{uintptr_t(mem.data()), mr->rkey, 256});
			ch.sync(1); /* no receive posted at all */
			auto c = t.wait(3);
			PEER_CHECK(c.size() == 3);
			for (auto &e : c) {
				PEER_CHECK(e.unsolicited);
				PEER_CHECK(e.opcode == IBV_WC_RECV_RDMA_WITH_IMM);
				PEER_CHECK(e.byte_len == 256);
			}
			PEER_CHECK(check(mem.data(), 256, 12));
			PEER_CHECK(t.stats().unsolicited_recvs == 3);
			ch.sync(2);
			return 0;
		});
}

Test(sim_rdma, write_with_immediate_without_receive_is_rnr)
{
	run_pair(
		[&](Chan &ch) {
			Initiator in(ch, NodeOpts{.rnr_retry = 1});
			auto &[a, t, rm, ah] = in;
			uint8_t src[16] = {1};
			ibv_mr *m = a.reg(src, 16);
			ch.sync(1);
			cr_assert_eq(a.post(IBV_WR_RDMA_WRITE_WITH_IMM, ah, t, m, src, 16, 1, rm.rkey, rm.addr, 5), 0);
			auto c = a.wait(1);
			cr_assert_eq(c[0].vendor_err, 10u);
			ch.sync(2);
		},
		[&](Chan &ch) { return passive_target(ch, 16, 4, kAllRemote, true, 0); });
}

Test(sim_rdma, inline_write_needs_the_qp_flag)
{
	run_pair(
		[&](Chan &ch) {
			NodeOpts o;
			o.inline_size = 80;
			o.efa_flags = EFADV_QP_FLAGS_INLINE_WRITE;
			Node a(o);
			Node plain(NodeOpts{.inline_size = 64});
			Addr t = a.exchange(ch);
			RemoteMr rm = ch.recv<RemoteMr>();
			ibv_ah *ah = a.ah_for(t);
			uint8_t src[80];
			fill(src, 80, 21);
			ch.sync(1);
			cr_assert_eq(a.post(IBV_WR_RDMA_WRITE, ah, t, nullptr, src, 80, 1, rm.rkey, rm.addr, 0, true), 0);
			memset(src, 0, sizeof src);
			cr_assert_eq(a.wait(1)[0].status, IBV_WC_SUCCESS);
			/* without INLINE_WRITE, an inline RDMA write is refused at posting */
			ibv_ah *ah2 = plain.ah_for(t);
			cr_assert_eq(plain.post(IBV_WR_RDMA_WRITE, ah2, t, nullptr, src, 16, 2, rm.rkey, rm.addr, 0, true),
				     EINVAL);
			ch.sync(2);
		},
		[&](Chan &ch) { return passive_target(ch, 80, 3, kAllRemote, true, 21); });
}

Test(sim_rdma, processing_hints_and_service_level)
{
	NodeOpts o;
	o.sl = 8;
	o.wr_flags = EFADV_WR_EX_WITH_PROCESSING_HINTS;
	Node a(o);
	static uint8_t mem[4096];
	ibv_mr *mr = a.reg(mem, sizeof mem, kAllRemote);
	ibv_ah *ah = a.ah_for(a.self);
	cr_assert_eq(a.post(IBV_WR_RDMA_WRITE, ah, a.self, mr, mem, 64, 1, mr->rkey, uintptr_t(mem) + 1024, 0, false,
			    EFADV_WR_PROCESSING_HINT_BURST_PPS_SENSITIVE),
		     0);
	cr_assert_eq(a.wait(1)[0].status, IBV_WC_SUCCESS);
	/* hint bits the device does not know are ignored (rdma-core passes them on) */
	cr_assert_eq(a.post(IBV_WR_RDMA_WRITE, ah, a.self, mr, mem, 64, 2, mr->rkey, uintptr_t(mem), 0, false, 1u << 7),
		     0);
	cr_assert_eq(a.wait(1)[0].status, IBV_WC_SUCCESS);
	cr_assert_eq(a.post(IBV_WR_SEND, ah, a.self, mr, mem, 64, 3, 0, 0, 0, false,
			    EFADV_WR_PROCESSING_HINT_BURST_PPS_SENSITIVE | (1u << 7)),
		     0);
	cr_assert_eq(a.post_recv(mr, mem + 2048, 64, 4), 0);
	auto c = a.wait(2);
	cr_assert_eq(c.size(), 2u);
	for (const Completion &e : c)
		cr_assert_eq(e.status, IBV_WC_SUCCESS);
	efasim_stats s = a.stats();
	cr_assert_eq(s.hinted_wrs, 2u, "hinted work requests %lu", (unsigned long)s.hinted_wrs);
	cr_assert_eq(s.sl_nonzero_wrs, 3u);
	/* a QP created without EFADV_WR_EX_WITH_PROCESSING_HINTS refuses hints */
	Node b;
	ibv_ah *bah = b.ah_for(b.self);
	ibv_mr *bmr = b.reg(mem, sizeof mem, kAllRemote);
	cr_assert_eq(b.post(IBV_WR_RDMA_WRITE, bah, b.self, bmr, mem, 64, 1, bmr->rkey, uintptr_t(mem), 0, false,
			    EFADV_WR_PROCESSING_HINT_BURST_PPS_SENSITIVE),
		     EINVAL);
}

/*
 * A packet received while an earlier sequence number is still open, which the sender then
 * abandons (receiver not ready, no retries left): the receiver learns from the sender's
 * snd_una that the earlier one is gone and must then count what it already received
 * after it, or that packet is never acknowledged and the sender retransmits it until the
 * receiver counts as unresponsive. One path keeps the packets in order; acknowledgements
 * wait 200 ms, so the write's first acknowledgement comes after the sender abandoned the
 * send.
 */
Test(sim_rdma, packet_after_an_abandoned_sequence_is_acknowledged, .init = [] {
	setenv("EFASIM_PATHS", "1", 1);
	setenv("EFASIM_ACK_DELAY_US", "200000", 1);
	setenv("EFASIM_ACK_EVERY", "1024", 1);
	setenv("EFASIM_TIMEOUT_MS", "3000", 1);
})
{
	run_pair(
		[&](Chan &ch) {
			Initiator in(ch, NodeOpts{.rnr_retry = 0});
			auto &[a, t, rm, ah] = in;
			uint8_t src[64];
			fill(src, 64, 9);
			ibv_mr *m = a.reg(src, 64);
			ch.sync(1);
			/* seq n: a send the target has no buffer for; seq n + 1: a write it takes */
			cr_assert_eq(a.post(IBV_WR_SEND, ah, t, m, src, 64, 1), 0);
			cr_assert_eq(a.post(IBV_WR_RDMA_WRITE, ah, t, m, src, 64, 2, rm.rkey, rm.addr), 0);
			auto c = a.wait(2, 2500);
			cr_assert_eq(c.size(), 2u, "%zu of 2 completions", c.size());
			for (auto &e : c) {
				if (e.wr_id == 1)
					cr_assert_eq(e.vendor_err, 10u, "the send: vendor %u, expected RNR", e.vendor_err);
				else
					cr_assert_eq(e.status, IBV_WC_SUCCESS, "the write: vendor %u", e.vendor_err);
			}
			ch.sync(2);
		},
		[&](Chan &ch) { return passive_target(ch, 64, 4, kAllRemote, true, 9); });
}

namespace {

/*
 * A 1 MiB + 3 byte RDMA read from another process on the same device into two scatter
 * entries with untouched guard bytes around them. With loopback DMA (the default) the
 * target's device places the data with one copy: the target counts every byte in
 * dma_bytes. Without it (EFASIM_LOOPBACK_DMA=0) the data streams through the channel and
 * dma_bytes stays 0. Either way the data, the completion and the guards are the same.
 */
void read_from_another_process(bool dma)
{
	const uint32_t len = (1u << 20) + 3, first = 4097;
	run_pair(
		[&](Chan &ch) {
			Initiator in(ch);
			auto &[a, t, rm, ah] = in;
			allow_loopback_dma();
			std::vector<uint8_t> dst(len + 64, 0xee);
			ibv_mr *md = a.reg(dst.data(), dst.size());
			ch.sync(1);
			/* two entries: [16, 16 + first) and [32 + first, 32 + len) */
			ibv_sge sge[2] = {{uintptr_t(dst.data() + 16), first, md->lkey},
					  {uintptr_t(dst.data() + 32 + first), len - first, md->lkey}};
			ibv_wr_start(a.qpx);
			a.qpx->wr_id = 7;
			a.qpx->wr_flags = IBV_SEND_SIGNALED;
			ibv_wr_rdma_read(a.qpx, rm.rkey, rm.addr);
			ibv_wr_set_sge_list(a.qpx, 2, sge);
			ibv_wr_set_ud_addr(a.qpx, ah, t.qpn, t.qkey);
			cr_assert_eq(ibv_wr_complete(a.qpx), 0);
			auto c = a.wait(1, 30000);
			cr_assert_eq(c.size(), 1u);
			cr_assert_eq(c[0].status, IBV_WC_SUCCESS, "read: vendor %u", c[0].vendor_err);
			cr_assert_eq(c[0].wr_id, 7u);
			std::vector<uint8_t> want(len);
			fill(want.data(), len, 5);
			cr_assert(!memcmp(dst.data() + 16, want.data(), first));
			cr_assert(!memcmp(dst.data() + 32 + first, want.data() + first, len - first));
			for (size_t i : {size_t(0), size_t(15), size_t(16 + first), size_t(31 + first), size_t(32 + len),
					 dst.size() - 1})
				cr_assert_eq(dst[i], 0xee, "guard byte %zu written", i);
			ch.sync(2);
		},
		[&](Chan &ch) {
			std::vector<uint8_t> mem(len); /* outlives the device (simtest.h, Node) */
			fill(mem.data(), len, 5);
			PassiveTarget t(ch, mem, kAllRemote);
			ch.sync(1);
			ch.sync(2);
			const efasim_stats s = t.node.stats();
			PEER_CHECK(s.rdma_read_bytes == len);
			PEER_CHECK(s.dma_bytes == (dma ? len : 0));
			return 0;
		});
}

} // namespace

Test(sim_rdma, read_on_one_device_is_placed_by_one_copy) { read_from_another_process(true); }

Test(sim_rdma, read_without_loopback_dma_streams, .init = [] { setenv("EFASIM_LOOPBACK_DMA", "0", 1); })
{
	read_from_another_process(false);
}

namespace {

enum class Pull { Yes, Off, Refused };

/*
 * A 3 MiB + 5 byte RDMA write with immediate from two scatter entries to another process
 * on the same device, then a second one. With loopback DMA the target's device copies
 * each segment (up to 1 MiB) itself from the initiator (Pull::Yes: dma_bytes = both
 * writes). With EFASIM_LOOPBACK_DMA=0 the data streams (Off: 0). When the kernel refuses
 * the target's copies (Refused: the initiator is not dumpable and the target has no
 * CAP_SYS_PTRACE), the first refusal makes the initiator send the whole write again with
 * its data, and every later write to that peer streams: 0 placed, the data intact, and
 * each immediate delivered once.
 */
void write_to_another_process(Pull mode)
{
	const uint32_t len = (3u << 20) + 5, first = 70000;
	run_pair(
		[&](Chan &ch) {
			Initiator in(ch);
			auto &[a, t, rm, ah] = in;
			if (mode == Pull::Refused)
				cr_assert_eq(prctl(PR_SET_DUMPABLE, 0, 0, 0, 0), 0);
			else
				allow_loopback_dma();
			std::vector<uint8_t> src(len);
			ibv_mr *ms = a.reg(src.data(), len);
			ch.sync(1);
			for (uint32_t round = 0; round < 2; round++) {
				fill(src.data(), len, 20 + round);
				ibv_sge sge[2] = {{uintptr_t(src.data()), first, ms->lkey},
						  {uintptr_t(src.data() + first), len - first, ms->lkey}};
				ibv_wr_start(a.qpx);
				a.qpx->wr_id = 30 + round;
				a.qpx->wr_flags = IBV_SEND_SIGNALED;
				ibv_wr_rdma_write_imm(a.qpx, rm.rkey, rm.addr + 8, htonl(0x5150 + round));
				ibv_wr_set_sge_list(a.qpx, 2, sge);
				ibv_wr_set_ud_addr(a.qpx, ah, t.qpn, t.qkey);
				cr_assert_eq(ibv_wr_complete(a.qpx), 0);
				auto c = a.wait(1, 30000);
				cr_assert_eq(c.size(), 1u, "round %u", round);
				cr_assert_eq(c[0].status, IBV_WC_SUCCESS, "round %u: vendor %u", round, c[0].vendor_err);
				cr_assert_eq(c[0].opcode, IBV_WC_RDMA_WRITE);
				ch.sync(10 + round); /* the target checks its memory */
			}
		},
		[&](Chan &ch) {
			if (mode == Pull::Refused)
				PEER_CHECK(drop_ptrace_capability());
			std::vector<uint8_t> mem(len + 16, 0xee); /* outlives the device (simtest.h, Node) */
			PassiveTarget target(ch, mem, kAllRemote);
			Node &t = target.node;
			uint8_t dummy[8];
			ibv_mr *md = t.reg(dummy, 8);
			PEER_CHECK(t.post_recv(md, dummy, 8, 600) == 0 && t.post_recv(md, dummy, 8, 601) == 0);
			ch.sync(1);
			for (uint32_t round = 0; round < 2; round++) {
				auto c = t.wait(1, 30000);
				PEER_CHECK(c.size() == 1);
				PEER_CHECK(c[0].opcode == IBV_WC_RECV_RDMA_WITH_IMM && c[0].wr_id == 600 + round);
				PEER_CHECK(c[0].imm == 0x5150 + round && c[0].byte_len == len); /* host order (simtest.h) */
				PEER_CHECK(check(mem.data() + 8, len, 20 + round));
				for (size_t i : {size_t(0), size_t(7), size_t(8 + len), mem.size() - 1})
					PEER_CHECK(mem[i] == 0xee);
				ch.sync(10 + round);
			}
			PEER_CHECK(t.wait(1, 0).empty()); /* each immediate once */
			const efasim_stats s = t.stats();
			PEER_CHECK(s.rdma_write_bytes >= 2ull * len);
			PEER_CHECK(s.dma_bytes == (mode == Pull::Yes ? 2ull * len : 0));
			/* Refused: the first segment's pull, then that peer gets data only. */
			PEER_CHECK(mode == Pull::Refused ? s.dma_refused >= 1 : s.dma_refused == 0);
			return 0;
		});
}

} // namespace

Test(sim_rdma, write_on_one_device_is_pulled_by_the_target) { write_to_another_process(Pull::Yes); }

Test(sim_rdma, write_without_loopback_dma_streams, .init = [] { setenv("EFASIM_LOOPBACK_DMA", "0", 1); })
{
	write_to_another_process(Pull::Off);
}

Test(sim_rdma, write_whose_pull_is_refused_is_sent_again_with_its_data)
{
	write_to_another_process(Pull::Refused);
}
