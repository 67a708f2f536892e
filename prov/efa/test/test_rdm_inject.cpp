/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The efa fabric's receive path against a peer that breaks the protocol: a raw SRD
 * queue pair of the software device (simtest.h's Node), in this process, sends packets
 * built by hand (rdm/pkt.h) to an efa endpoint opened through libfabric. Each packet is
 * acknowledged by the endpoint's device before the endpoint reads its CQ once, so the
 * endpoint processes the packets one by one, in the order sent (no sleeps).
 *
 *   - a duplicated MEDIUM segment, while another segment is missing, does not complete
 *     the message early: it completes once, whole, when the missing one arrives;
 *   - duplicates of a request ahead of the expected id are dropped, not kept: 20 000 of
 *     them leave the process's memory where it was;
 *   - requests reach() = max(rx window, 16384) or more ids ahead are refused: the ones
 *     within the reach are delivered once the gap closes, the others never;
 *   - a packet of another protocol version (upstream's v4 HANDSHAKE) from a peer in the
 *     AV fails the long send waiting on that peer with FI_EHOSTUNREACH and
 *     PEER_PROTOCOL_MISMATCH, and new sends to it with -FI_EHOSTUNREACH.
 */
#include "fitest.h"
#include "efa_errno.h"
#include "rdm/pkt.h"
#include "simtest.h"

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <memory>

using namespace efa;
using namespace efa::rdm;
using namespace simtest;

namespace {

struct Target {
	fi_info *info = nullptr;
	fid_fabric *fab = nullptr;
	fid_domain *dom = nullptr;
	fid_av *av = nullptr;
	fid_cq *cq = nullptr;
	fid_ep *ep = nullptr;
	RawAddr addr{};
};

void open_target(Target &t)
{
	t.info = fitest::getinfo("efa", FI_MSG | FI_SEND | FI_RECV, fitest::kMrMode & ~uint64_t(FI_MR_LOCAL));
	fitest::open_fabric(t.info, &t.fab, &t.dom);
	fi_av_attr aa{};
	aa.type = FI_AV_TABLE;
	cr_assert_eq(fi_av_open(t.dom, &aa, &t.av, nullptr), 0);
	fi_cq_attr ca{};
	ca.format = FI_CQ_FORMAT_MSG;
	cr_assert_eq(fi_cq_open(t.dom, &ca, &t.cq, nullptr), 0);
	cr_assert_eq(fi_endpoint(t.dom, t.info, &t.ep, nullptr), 0);
	cr_assert_eq(fi_ep_bind(t.ep, &t.cq->fid, FI_TRANSMIT | FI_RECV), 0);
	cr_assert_eq(fi_ep_bind(t.ep, &t.av->fid, 0), 0);
	cr_assert_eq(fi_enable(t.ep), 0);
	size_t len = sizeof t.addr;
	cr_assert_eq(fi_getname(&t.ep->fid, &t.addr, &len), 0);
}

void close_target(Target &t)
{
	fi_close(&t.ep->fid);
	fi_close(&t.cq->fid);
	fi_close(&t.av->fid);
	fi_close(&t.dom->fid);
	fi_close(&t.fab->fid);
	fi_freeinfo(t.info);
}

/* The forging peer: a raw SRD QP that sends hand-built packets to the target. */
struct Forger {
	explicit Forger(const Target &t) : node(opts())
	{
		std::memcpy(to.gid.raw, t.addr.gid, 16);
		to.qpn = t.addr.qpn;
		to.qkey = t.addr.qkey;
		ah = node.ah_for(to);
		mr = node.reg(buf.data(), buf.size());
		std::memcpy(self.gid, node.self.gid.raw, 16);
		self.qpn = uint16_t(node.self.qpn);
		self.qkey = node.self.qkey;
		self.pad = kRdmNameMark; /* it poses as one of ours (protocol.md 12.2) */
		/* Room for what the target sends back (its HANDSHAKE). */
		for (uint32_t i = 0; i < 32; i++)
			node.post_recv(mr, rx(i), 9000, 1000 + i);
	}
	static NodeOpts opts()
	{
		NodeOpts o;
		o.sq = 64;
		o.rq = 64;
		o.qkey = 0x51515151;
		o.rnr_retry = 7;
		return o;
	}
	static constexpr size_t kSlot = 9000, kSlots = 8;
	uint8_t *tx(size_t i) { return buf.data() + i * kSlot; }
	uint8_t *rx(uint32_t i) { return buf.data() + (kSlots + i) * kSlot; }

	/* An ordered REQ: EAGER (seg_off unused) or MEDIUM (msg_len, seg_off). */
	size_t build(PktType type, uint32_t id, const uint8_t *data, size_t n, uint64_t msg_len = 0, uint64_t off = 0,
		     size_t slot = 0)
	{
		PktWriter w(tx(slot), kSlot);
		RtmHdr *h;
		if (type == PktType::MediumMsg) {
			MediumHdr *m = w.header<MediumHdr>(type, self.qkey, kFlagRawAddr);
			m->msg_len = msg_len;
			m->seg_off = off;
			h = &m->rtm;
		} else {
			h = &w.header<EagerHdr>(type, self.qkey, kFlagRawAddr)->rtm;
		}
		h->msg_id = id;
		h->seg_len = uint32_t(n);
		cr_assert(w.raw_addr(self));
		cr_assert(w.bytes(data, n));
		return w.size();
	}

	/* Sends the packet in slot 0; returns once the target's device has it (acknowledged),
	 * then lets the target process it (one CQ read). */
	void send(size_t len, fid_cq *target_cq, std::vector<fi_cq_msg_entry> *got)
	{
		send_batch(std::vector<size_t>{len}, target_cq, got);
	}

	/* The packets in slots 0 .. lens.size() - 1, in any order among themselves; returns
	 * once the target's device has them all, then lets the target process them. */
	void send_batch(const std::vector<size_t> &lens, fid_cq *target_cq, std::vector<fi_cq_msg_entry> *got)
	{
		push(lens);
		drain(target_cq, got);
	}

	/* The packets in slots 0 .. lens.size() - 1; returns once the target's device has
	 * them all (the target has not read its CQ). */
	void push(const std::vector<size_t> &lens)
	{
		cr_assert_leq(lens.size(), kSlots);
		for (size_t i = 0; i < lens.size(); i++)
			cr_assert_eq(node.post(IBV_WR_SEND, ah, to, mr, tx(i), uint32_t(lens[i]), i + 1), 0);
		for (size_t acked = 0; acked < lens.size();) {
			for (const Completion &c : node.wait(1)) {
				if (c.wr_id >= 1 && c.wr_id <= lens.size()) {
					cr_assert_eq(c.status, IBV_WC_SUCCESS, "the target's device refused the packet");
					acked++;
				} else if (c.wr_id >= 1000) {
					const uint32_t i = uint32_t(c.wr_id - 1000);
					node.post_recv(mr, rx(i), 9000, c.wr_id);
				}
			}
		}
	}

	/* The packets the target sent us within `ms` (their bytes), while it progresses. */
	std::vector<std::vector<uint8_t>> received(fid_cq *target_cq, int ms)
	{
		std::vector<std::vector<uint8_t>> out;
		for (auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
		     std::chrono::steady_clock::now() < end;) {
			fi_cq_msg_entry e[4];
			(void)fi_cq_read(target_cq, e, 4);
			for (const Completion &c : node.wait(1, 1)) {
				if (c.wr_id < 1000)
					continue;
				const uint32_t i = uint32_t(c.wr_id - 1000);
				cr_assert_eq(c.status, IBV_WC_SUCCESS);
				out.emplace_back(rx(i), rx(i) + c.byte_len);
				node.post_recv(mr, rx(i), 9000, c.wr_id);
			}
		}
		return out;
	}

	/* Reads the target's CQ until it has nothing to report several times in a row: one
	 * read handles a bounded number of device completions. */
	static void drain(fid_cq *cq, std::vector<fi_cq_msg_entry> *got)
	{
		fi_cq_msg_entry e[16];
		for (int idle = 0; idle < 8;) {
			ssize_t n = fi_cq_read(cq, e, 16);
			if (n == -FI_EAGAIN) {
				idle++;
				continue;
			}
			idle = 0;
			cr_assert_gt(n, 0, "fi_cq_read: %zd (%s)", n, fi_strerror(int(-n)));
			if (got)
				got->insert(got->end(), e, e + n);
		}
	}

	Node node;
	Addr to{};
	RawAddr self{};
	ibv_ah *ah = nullptr;
	std::vector<uint8_t> buf = std::vector<uint8_t>(2 * kSlots * kSlot);
	ibv_mr *mr = nullptr;
};

size_t rss_bytes()
{
	std::ifstream f("/proc/self/statm");
	size_t pages = 0, resident = 0;
	f >> pages >> resident;
	return resident * size_t(sysconf(_SC_PAGESIZE));
}

} // namespace

Test(rdm_inject, duplicate_medium_segment_does_not_complete_early)
{
	Target t;
	open_target(t);
	Forger f(t);
	constexpr size_t kSeg = 1000, kLen = 3 * kSeg;
	std::vector<uint8_t> msg(kLen), a(kLen), b(64);
	for (size_t i = 0; i < kLen; i++)
		msg[i] = uint8_t(i * 31 + 5);
	fi_context2 ca{}, cb{};
	cr_assert_eq(fi_recv(t.ep, a.data(), a.size(), nullptr, FI_ADDR_UNSPEC, &ca), 0);
	cr_assert_eq(fi_recv(t.ep, b.data(), b.size(), nullptr, FI_ADDR_UNSPEC, &cb), 0);
	std::vector<fi_cq_msg_entry> got;
	/* Message 0: segment 0, segment 0 again, segment 1; segment 2 missing. */
	f.send(f.build(PktType::MediumMsg, 0, msg.data(), kSeg, kLen, 0), t.cq, &got);
	f.send(f.build(PktType::MediumMsg, 0, msg.data(), kSeg, kLen, 0), t.cq, &got);
	f.send(f.build(PktType::MediumMsg, 0, msg.data() + kSeg, kSeg, kLen, kSeg), t.cq, &got);
	/* Message 1, processed after all that. */
	f.send(f.build(PktType::EagerMsg, 1, msg.data(), 64), t.cq, &got);
	cr_assert_eq(got.size(), 1u, "%zu completions; only message 1 is whole", got.size());
	cr_assert_eq(got[0].op_context, &cb, "message 0 completed with a segment missing");
	got.clear();
	f.send(f.build(PktType::MediumMsg, 0, msg.data() + 2 * kSeg, kSeg, kLen, 2 * kSeg), t.cq, &got);
	cr_assert_eq(got.size(), 1u);
	cr_assert_eq(got[0].op_context, &ca);
	cr_assert_eq(got[0].len, kLen);
	cr_assert_eq(memcmp(a.data(), msg.data(), kLen), 0, "message 0's bytes");
	Forger::drain(t.cq, &got);
	cr_assert_eq(got.size(), 1u, "a completion after the last one");
	close_target(t);
}

Test(rdm_inject, duplicates_ahead_are_dropped_not_kept)
{
	Target t;
	open_target(t);
	Forger f(t);
	constexpr size_t kDups = 20000 / Forger::kSlots * Forger::kSlots, kLen = 8000;
	std::vector<uint8_t> msg(kLen, 0x6b), r0(kLen), r1(kLen), r2(kLen);
	fi_context2 c[3]{};
	cr_assert_eq(fi_recv(t.ep, r0.data(), kLen, nullptr, FI_ADDR_UNSPEC, &c[0]), 0);
	cr_assert_eq(fi_recv(t.ep, r1.data(), kLen, nullptr, FI_ADDR_UNSPEC, &c[1]), 0);
	cr_assert_eq(fi_recv(t.ep, r2.data(), kLen, nullptr, FI_ADDR_UNSPEC, &c[2]), 0);
	std::vector<fi_cq_msg_entry> got;
	f.send(f.build(PktType::EagerMsg, 1, msg.data(), kLen), t.cq, &got); /* ahead: kept */
	const size_t before = rss_bytes();
	std::vector<size_t> lens;
	for (size_t i = 0; i < Forger::kSlots; i++)
		lens.push_back(f.build(PktType::EagerMsg, 1, msg.data(), kLen, 0, 0, i));
	for (size_t i = 0; i < kDups; i += lens.size())
		f.send_batch(lens, t.cq, &got);
	const size_t grown = rss_bytes() - std::min(before, rss_bytes());
	cr_log_info("%zu duplicates ahead: the process grew by %zu KiB", kDups, grown >> 10);
	cr_assert_lt(grown, size_t(32) << 20, "%zu duplicates ahead grew the process by %zu MiB: they were kept",
		     kDups, grown >> 20);
	cr_assert_eq(got.size(), 0u);
	f.send(f.build(PktType::EagerMsg, 0, msg.data(), 100), t.cq, &got);
	cr_assert_eq(got.size(), 2u, "%zu completions: messages 0 and 1, once each", got.size());
	cr_assert_eq(got[0].op_context, &c[0]);
	cr_assert_eq(got[0].len, 100u);
	cr_assert_eq(got[1].op_context, &c[1]);
	cr_assert_eq(got[1].len, kLen);
	close_target(t);
}

Test(rdm_inject, requests_beyond_the_reach_are_refused)
{
	setenv("FI_EFA_RECVWIN_SIZE", "16", 1);
	Target t;
	open_target(t);
	Forger f(t);
	constexpr uint32_t kReach = 16384, kBeyond = 100;
	std::vector<fi_cq_msg_entry> got;
	uint8_t payload[16];
	/* Ids 1 .. reach + kBeyond - 1, with 0 missing: the last kBeyond are too far. */
	std::vector<size_t> lens;
	for (uint32_t id = 1; id < kReach + kBeyond; id++) {
		std::memcpy(payload, &id, sizeof id);
		lens.push_back(f.build(PktType::EagerMsg, id, payload, sizeof payload, 0, 0, lens.size()));
		if (lens.size() == Forger::kSlots || id + 1 == kReach + kBeyond) {
			f.send_batch(lens, t.cq, &got);
			lens.clear();
		}
	}
	uint32_t zero = 0;
	std::memcpy(payload, &zero, sizeof zero);
	f.send(f.build(PktType::EagerMsg, 0, payload, sizeof payload), t.cq, &got);
	cr_assert_eq(got.size(), 0u);
	/* Every message within the reach is there, in order; then nothing. */
	std::vector<uint8_t> rb(16);
	fi_context2 ctx{};
	for (uint32_t k = 0;; k++) {
		cr_assert_eq(fi_recv(t.ep, rb.data(), rb.size(), nullptr, FI_ADDR_UNSPEC, &ctx), 0);
		got.clear();
		Forger::drain(t.cq, &got);
		if (k == kReach) {
			cr_assert_eq(got.size(), 0u, "message %u, beyond the reach, was delivered", k);
			cr_assert_eq(fi_cancel(&t.ep->fid, &ctx), 0);
			break;
		}
		cr_assert_eq(got.size(), 1u, "message %u (within the reach) is missing", k);
		uint32_t id;
		std::memcpy(&id, rb.data(), sizeof id);
		cr_assert_eq(id, k, "message %u came out as %u", k, id);
	}
	close_target(t);
}

/*
 * A peer that speaks another RDM protocol (libfabric's own efa provider: v4) fails
 * fast (protocol.md section 12). The target starts a long message to the forger (a
 * LONGCTS request; it waits for a CTS that a v4 peer never sends), then the forger sends
 * what upstream's provider sends first: a v4 HANDSHAKE (type 9, version 4, nextra_p3 4,
 * extra_info[0] 0). The waiting send must fail with FI_EHOSTUNREACH and prov_errno
 * PEER_PROTOCOL_MISMATCH, and the next send must return -FI_EHOSTUNREACH at once.
 * Before: the packet was dropped as malformed, the send waited forever and the next
 * send was accepted.
 */
Test(rdm_inject, foreign_protocol_peer_fails_fast)
{
	Target t;
	open_target(t);
	Forger f(t);
	fi_addr_t fa = FI_ADDR_NOTAVAIL;
	cr_assert_eq(fi_av_insert(t.av, &f.self, 1, &fa, 0, nullptr), 1);
	std::vector<uint8_t> big(256 * 1024, 0x5a);
	fi_context2 ctx{};
	cr_assert_eq(fi_send(t.ep, big.data(), big.size(), nullptr, fa, &ctx), 0);
	Forger::drain(t.cq, nullptr); /* the request goes out; nothing completes */

	const uint8_t v4_handshake[16] = {9, 4, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
	std::memcpy(f.tx(0), v4_handshake, sizeof v4_handshake);
	f.push({sizeof v4_handshake});
	fi_cq_err_entry err{};
	bool failed = false;
	for (auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
	     !failed && std::chrono::steady_clock::now() < end;) {
		fi_cq_msg_entry e[4];
		ssize_t n = fi_cq_read(t.cq, e, 4);
		cr_assert(n == -FI_EAGAIN || n == -FI_EAVAIL, "fi_cq_read: %zd: the long send completed", n);
		if (n == -FI_EAVAIL) {
			cr_assert_eq(fi_cq_readerr(t.cq, &err, 0), 1);
			failed = true;
		}
	}
	cr_assert(failed, "the send to a peer of protocol v4 is still waiting after 10 s");
	cr_assert_eq(err.op_context, &ctx);
	cr_assert_eq(err.err, FI_EHOSTUNREACH, "err %d (%s)", err.err, fi_strerror(err.err));
	cr_assert_eq(err.prov_errno, int(EfaStatus::PEER_PROTOCOL_MISMATCH), "prov_errno %d", err.prov_errno);
	char buf[256];
	const char *msg = fi_cq_strerror(t.cq, err.prov_errno, err.err_data, buf, sizeof buf);
	cr_assert(msg && strstr(msg, "protocol v4"), "fi_cq_strerror: %s", msg ? msg : "(null)");
	cr_assert_eq(fi_send(t.ep, big.data(), 64, nullptr, fa, &ctx), -FI_EHOSTUNREACH);
	close_target(t);
}

namespace {

/* Inserts the forger's address without our mark (as upstream's names and text forms are). */
fi_addr_t insert_unmarked(const Target &t, const Forger &f)
{
	RawAddr plain = f.self;
	plain.pad = 0;
	fi_addr_t fa = FI_ADDR_NOTAVAIL;
	cr_assert_eq(fi_av_insert(t.av, &plain, 1, &fa, 0, nullptr), 1);
	return fa;
}

/* Sends while the answer is -FI_EAGAIN (the question to the peer is open), progressing
 * the target; the first other answer, or -FI_EAGAIN after 10 s. */
ssize_t send_while_asking(const Target &t, const void *msg, size_t len, fi_addr_t fa)
{
	ssize_t r = -FI_EAGAIN;
	for (auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
	     r == -FI_EAGAIN && std::chrono::steady_clock::now() < end;) {
		fi_cq_msg_entry e[4];
		(void)fi_cq_read(t.cq, e, 4);
		r = fi_send(t.ep, msg, len, nullptr, fa, nullptr);
	}
	return r;
}

} // namespace

/*
 * A peer whose address does not carry our mark (upstream's names, addresses made from
 * text) is asked which protocol it speaks before anything else goes to it, in a packet
 * upstream's protocol v4 parses as a HANDSHAKE announcing nothing (protocol.md 12.2:
 * type 9, version 4, flags: connection id, nextra_p3 4, extra_info[0] 0, the connection
 * id at byte 16); sends wait (-FI_EAGAIN) for the answer. Answered in v4, as upstream's
 * provider answers, the peer is failed: sends return -FI_EHOSTUNREACH, and the probe was
 * the only packet it got. Before: the first send put our HANDSHAKE (v4's retired RTS,
 * on which upstream aborts) and the message on the wire at once.
 */
Test(rdm_inject, unmarked_peer_is_asked_before_anything_is_sent)
{
	Target t;
	open_target(t);
	Forger f(t);
	const fi_addr_t fa = insert_unmarked(t, f);
	uint8_t msg[64] = {};
	cr_assert_eq(fi_send(t.ep, msg, sizeof msg, nullptr, fa, nullptr), -FI_EAGAIN);
	cr_assert_eq(fi_send(t.ep, msg, sizeof msg, nullptr, fa, nullptr), -FI_EAGAIN);
	auto got = f.received(t.cq, 300);
	cr_assert_eq(got.size(), 1u, "%zu packets reached the peer before it answered", got.size());
	const std::vector<uint8_t> &pr = got[0];
	cr_assert_geq(pr.size(), 24u);
	uint16_t flags;
	uint32_t nextra_p3, conn;
	uint64_t extra0;
	std::memcpy(&flags, &pr[2], 2);
	std::memcpy(&nextra_p3, &pr[4], 4);
	std::memcpy(&extra0, &pr[8], 8);
	std::memcpy(&conn, &pr[16], 4);
	cr_assert_eq(pr[0], 9, "type %u", pr[0]);
	cr_assert_eq(pr[1], 4, "version %u", pr[1]);
	cr_assert_eq(flags, 1u << 15, "flags %#x", flags);
	cr_assert_eq(nextra_p3, 4u);
	cr_assert_eq(extra0, 0u);
	cr_assert_eq(conn, t.addr.qkey);

	const uint8_t v4_handshake[24] = {9, 4, 0, 0x80, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
	std::memcpy(f.tx(0), v4_handshake, sizeof v4_handshake);
	std::memcpy(f.tx(0) + 16, &f.self.qkey, 4);
	f.push({sizeof v4_handshake});
	const ssize_t r = send_while_asking(t, msg, sizeof msg, fa);
	cr_assert_eq(r, -FI_EHOSTUNREACH, "fi_send after the v4 answer: %zd", r);
	cr_assert(f.received(t.cq, 100).empty(), "a packet went to the peer after its v4 answer");
	close_target(t);
}

/*
 * The same question from one of ours (its probe) gets our HANDSHAKE, and a send to an
 * unmarked peer that answers with one of ours goes through.
 */
Test(rdm_inject, unmarked_peer_of_ours_is_asked_then_reached)
{
	Target t;
	open_target(t);
	Forger f(t);
	/* The target inserts the forger by an address without the mark: it asks, the forger
	 * answers with our HANDSHAKE, and the send goes out. */
	const fi_addr_t fa = insert_unmarked(t, f);
	uint8_t msg[32];
	std::memset(msg, 0x3c, sizeof msg);
	cr_assert_eq(fi_send(t.ep, msg, sizeof msg, nullptr, fa, nullptr), -FI_EAGAIN);
	auto got = f.received(t.cq, 200);
	cr_assert_eq(got.size(), 1u);
	cr_assert_eq(got[0][0], 9, "the probe");
	HandshakeInfo hs{};
	hs.features = 0;
	hs.max_payload = 8192;
	hs.rx_window = 16384;
	hs.addr = f.self;
	size_t n = write_handshake(f.tx(0), Forger::kSlot, hs);
	cr_assert_gt(n, 0u);
	f.push({n});
	const ssize_t r = send_while_asking(t, msg, sizeof msg, fa);
	cr_assert_eq(r, 0, "fi_send after our answer: %zd", r);
	got = f.received(t.cq, 300);
	bool eager = false;
	for (const auto &p : got) {
		cr_assert_eq(p[1], kProtoVersion);
		if (p[0] == uint8_t(PktType::EagerMsg) && std::memcmp(p.data() + p.size() - sizeof msg, msg, sizeof msg) == 0)
			eager = true;
	}
	cr_assert(eager, "the message did not arrive (%zu packets)", got.size());
	close_target(t);
}

/* One of ours that asks (a probe with its address) gets our HANDSHAKE. */
Test(rdm_inject, probe_is_answered_with_our_handshake)
{
	Target t;
	open_target(t);
	Forger f(t);
	size_t n = write_probe(f.tx(0), Forger::kSlot, f.self);
	cr_assert_eq(n, kProbeLen);
	f.push({n});
	auto got = f.received(t.cq, 300);
	cr_assert_eq(got.size(), 1u, "%zu answers", got.size());
	cr_assert_eq(got[0][0], uint8_t(PktType::Handshake));
	cr_assert_eq(got[0][1], kProtoVersion);
	close_target(t);
}
