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
 *   - a packet of another protocol version (version 1, an older build of this provider)
 *     from a peer in the AV fails the long send waiting on that peer with
 *     FI_EHOSTUNREACH and PEER_PROTOCOL_MISMATCH, and new sends to it with
 *     -FI_EHOSTUNREACH;
 *   - what the endpoint puts on the wire for a v4 peer, byte by byte: its HANDSHAKE
 *     (exactly the extra features it implements, its connid, our extension's mark), the
 *     raw address header until the peer's HANDSHAKE arrived and the connid header after;
 *   - what it answers to packets as upstream's provider sends them: a delivery-complete
 *     EAGER gets its RECEIPT (send_id and msg_id); an emulated write with a bad key gets
 *     an EXT_ERROR only from a peer that announced our extension.
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

	/* An ordered REQ with our raw address header: EAGER_MSGRTM or MEDIUM_MSGRTM
	 * (msg_len, off). */
	size_t build(Type type, uint32_t id, const uint8_t *data, size_t n, uint64_t msg_len = 0, uint64_t off = 0,
		     size_t slot = 0)
	{
		v4::Writer w(tx(slot), kSlot);
		if (type == Type::MediumMsgRtm) {
			v4::MediumRtm *m = w.header<v4::MediumRtm>(type, v4::kReqRawAddr | v4::kReqMsg);
			m->r.msg_id = id;
			m->msg_length = msg_len;
			m->seg_offset = off;
		} else {
			w.header<v4::EagerRtm>(type, v4::kReqRawAddr | v4::kReqMsg)->r.msg_id = id;
		}
		cr_assert(w.raw_addr(self));
		cr_assert(w.bytes(data, n));
		return w.size();
	}
	/* A HANDSHAKE as a v4 node sends it, with our extension's mark or without. */
	size_t handshake(uint64_t features, bool ext, size_t slot = 0)
	{
		const size_t n = write_handshake(tx(slot), kSlot, features, self.qkey, 0xefa0);
		cr_assert_gt(n, 0u);
		return ext ? n : n - sizeof v4::kExtMagic; /* the mark is last */
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

	/* Before the device: receives stay posted in it until the node is destroyed. */
	std::vector<uint8_t> buf = std::vector<uint8_t>(2 * kSlots * kSlot);
	Node node;
	Addr to{};
	RawAddr self{};
	ibv_ah *ah = nullptr;
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
	f.send(f.build(Type::MediumMsgRtm, 0, msg.data(), kSeg, kLen, 0), t.cq, &got);
	f.send(f.build(Type::MediumMsgRtm, 0, msg.data(), kSeg, kLen, 0), t.cq, &got);
	f.send(f.build(Type::MediumMsgRtm, 0, msg.data() + kSeg, kSeg, kLen, kSeg), t.cq, &got);
	/* Message 1, processed after all that. */
	f.send(f.build(Type::EagerMsgRtm, 1, msg.data(), 64), t.cq, &got);
	cr_assert_eq(got.size(), 1u, "%zu completions; only message 1 is whole", got.size());
	cr_assert_eq(got[0].op_context, &cb, "message 0 completed with a segment missing");
	got.clear();
	f.send(f.build(Type::MediumMsgRtm, 0, msg.data() + 2 * kSeg, kSeg, kLen, 2 * kSeg), t.cq, &got);
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
	f.send(f.build(Type::EagerMsgRtm, 1, msg.data(), kLen), t.cq, &got); /* ahead: kept */
	const size_t before = rss_bytes();
	std::vector<size_t> lens;
	for (size_t i = 0; i < Forger::kSlots; i++)
		lens.push_back(f.build(Type::EagerMsgRtm, 1, msg.data(), kLen, 0, 0, i));
	for (size_t i = 0; i < kDups; i += lens.size())
		f.send_batch(lens, t.cq, &got);
	const size_t grown = rss_bytes() - std::min(before, rss_bytes());
	cr_log_info("%zu duplicates ahead: the process grew by %zu KiB", kDups, grown >> 10);
	cr_assert_lt(grown, size_t(32) << 20, "%zu duplicates ahead grew the process by %zu MiB: they were kept",
		     kDups, grown >> 20);
	cr_assert_eq(got.size(), 0u);
	f.send(f.build(Type::EagerMsgRtm, 0, msg.data(), 100), t.cq, &got);
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
		lens.push_back(f.build(Type::EagerMsgRtm, id, payload, sizeof payload, 0, 0, lens.size()));
		if (lens.size() == Forger::kSlots || id + 1 == kReach + kBeyond) {
			f.send_batch(lens, t.cq, &got);
			lens.clear();
		}
	}
	uint32_t zero = 0;
	std::memcpy(payload, &zero, sizeof zero);
	f.send(f.build(Type::EagerMsgRtm, 0, payload, sizeof payload), t.cq, &got);
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
 * A peer that speaks another RDM protocol version fails fast (protocol.md section 2).
 * The target starts a long message to the forger (a LONGCTS request; it waits for a
 * CTS), then the forger sends a packet of version 1 (what an older build of this
 * provider sent first: its HANDSHAKE, type 1). The waiting send must fail with
 * FI_EHOSTUNREACH and prov_errno PEER_PROTOCOL_MISMATCH, and the next send must return
 * -FI_EHOSTUNREACH at once.
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

	uint8_t v1_handshake[56] = {1, 1, 1, 0};
	std::memcpy(v1_handshake + 4, &f.self.qkey, 4);
	std::memcpy(f.tx(0), v1_handshake, sizeof v1_handshake);
	f.push({sizeof v1_handshake});
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
	cr_assert(failed, "the send to a peer of protocol version 1 is still waiting after 10 s");
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

/* The packets of `type` among `got`, parsed. */
std::vector<Parsed> of_type(const std::vector<std::vector<uint8_t>> &got, Type type)
{
	std::vector<Parsed> out;
	for (const auto &p : got) {
		Parsed pk;
		cr_assert_eq(v4::parse(p.data(), p.size(), pk), v4::Error::None, "the target sent a malformed packet");
		if (pk.type == type)
			out.push_back(pk);
	}
	return out;
}

} // namespace

/*
 * What goes on the wire to a v4 peer (protocol.md sections 2 and 3):
 * the first send brings our HANDSHAKE (the extra features we implement and nothing
 * else, the connid, our mark) and an EAGER_MSGRTM with our raw address header; once the
 * peer's HANDSHAKE has arrived, REQs carry the connid header instead.
 */
Test(rdm_inject, handshake_and_headers_on_the_wire)
{
	Target t;
	open_target(t);
	Forger f(t);
	fi_addr_t fa = FI_ADDR_NOTAVAIL;
	cr_assert_eq(fi_av_insert(t.av, &f.self, 1, &fa, 0, nullptr), 1);
	uint8_t msg[48];
	for (size_t i = 0; i < sizeof msg; i++)
		msg[i] = uint8_t(i * 3 + 1);
	cr_assert_eq(fi_send(t.ep, msg, sizeof msg, nullptr, fa, nullptr), 0);
	auto got = f.received(t.cq, 300);
	for (const auto &p : got)
		cr_assert_eq(p[1], v4::kVersion, "a packet of version %u", p[1]);
	auto hs = of_type(got, Type::Handshake);
	cr_assert_eq(hs.size(), 1u, "%zu HANDSHAKEs", hs.size());
	HandshakeInfo info;
	cr_assert_eq(decode_handshake(hs[0], info), v4::Error::None);
	cr_assert(hs[0].has_connid && hs[0].connid == t.addr.qkey, "the HANDSHAKE's connid");
	cr_assert(info.ext, "no mark of our extension");
	cr_assert(hs[0].has_device_version, "no device version (upstream reads it from every HANDSHAKE)");
	/* Never constant header length (2) or user recv QP (7); never runt (4) or READ_NACK
	 * (6), which we do not implement; always delivery complete and the connid request. */
	const uint64_t must = v4::kExtraDeliveryComplete | v4::kExtraConnIdHeader;
	const uint64_t never = v4::kExtraConstantHeaderLength | v4::kExtraUserRecvQp | v4::kExtraReadNack;
	cr_assert_eq(info.features & must, must, "features %#lx", (unsigned long)info.features);
	cr_assert_eq(info.features & never, 0u, "features %#lx", (unsigned long)info.features);
	cr_assert_eq(info.features >> v4::kExtraCount, 0u, "bits v4 does not define: %#lx", (unsigned long)info.features);
	auto eager = of_type(got, Type::EagerMsgRtm);
	cr_assert_eq(eager.size(), 1u);
	cr_assert(eager[0].has_raw_addr && !(eager[0].flags & v4::kFlagConnId), "flags %#x", eager[0].flags);
	cr_assert(eager[0].flags & v4::kReqMsg, "an RTM without REQ_MSG (upstream asserts it): flags %#x", eager[0].flags);
	cr_assert(eager[0].raw_addr == t.addr, "the raw address header is not the target's name");
	cr_assert_eq(eager[0].payload_len, sizeof msg);
	cr_assert_eq(std::memcmp(eager[0].payload, msg, sizeof msg), 0);
	cr_assert_eq(msg_id_of(eager[0]), 0u);

	/* The peer's HANDSHAKE (as upstream sends it: no mark); then the connid header. */
	f.push({f.handshake(v4::kExtraDeliveryComplete | v4::kExtraConnIdHeader, false)});
	(void)f.received(t.cq, 50);
	cr_assert_eq(fi_send(t.ep, msg, 16, nullptr, fa, nullptr), 0);
	got = f.received(t.cq, 300);
	eager = of_type(got, Type::EagerMsgRtm);
	cr_assert_eq(eager.size(), 1u);
	cr_assert(!eager[0].has_raw_addr && eager[0].has_connid && eager[0].connid == t.addr.qkey, "flags %#x",
		  eager[0].flags);
	cr_assert_eq(msg_id_of(eager[0]), 1u);
	cr_assert_eq(eager[0].payload_len, 16u);
	close_target(t);
}

/*
 * Packets as upstream's provider sends them before it has our HANDSHAKE: a
 * DC_EAGER_MSGRTM with the raw address and CQ data headers. The message is delivered
 * and answered with a RECEIPT naming the sender's send_id and msg_id.
 */
Test(rdm_inject, delivery_complete_eager_gets_its_receipt)
{
	Target t;
	open_target(t);
	Forger f(t);
	uint8_t msg[40], rb[64] = {};
	for (size_t i = 0; i < sizeof msg; i++)
		msg[i] = uint8_t(0xa0 + i);
	fi_context2 ctx{};
	cr_assert_eq(fi_recv(t.ep, rb, sizeof rb, nullptr, FI_ADDR_UNSPEC, &ctx), 0);
	v4::Writer w(f.tx(0), Forger::kSlot);
	v4::DcEagerRtm *h = w.header<v4::DcEagerRtm>(Type::DcEagerMsgRtm, v4::kReqRawAddr | v4::kReqCqData | v4::kReqMsg);
	h->r.msg_id = 0;
	h->send_id = 0x1234;
	w.raw_addr(f.self);
	w.cq_data(0xcafe);
	w.bytes(msg, sizeof msg);
	f.push({w.size()});
	auto got = f.received(t.cq, 300);
	/* received() progressed the target (and read its completion): the buffer says the
	 * message arrived. */
	cr_assert_eq(std::memcmp(rb, msg, sizeof msg), 0, "the message's bytes");
	auto receipts = of_type(got, Type::Receipt);
	cr_assert_eq(receipts.size(), 1u, "%zu RECEIPTs", receipts.size());
	const v4::Receipt r = receipts[0].as<v4::Receipt>();
	cr_assert_eq(r.send_id, 0x1234u);
	cr_assert_eq(r.msg_id, 0u);
	cr_assert(receipts[0].has_connid && receipts[0].connid == t.addr.qkey);
	close_target(t);
}

/*
 * An emulated write whose key the target does not know: refused at the target, and
 * answered with EXT_ERROR only to a peer whose HANDSHAKE announced our extension; a v4
 * peer without it gets nothing (v4 has no such answer).
 */
Test(rdm_inject, refusal_answers_only_peers_of_ours)
{
	for (bool ext : {false, true}) {
		Target t;
		open_target(t);
		Forger f(t);
		v4::Writer w(f.tx(0), Forger::kSlot);
		v4::DcEagerRtw *h = w.header<v4::DcEagerRtw>(Type::DcEagerRtw, v4::kReqRawAddr | v4::kReqRma);
		h->rma_iov_count = 1;
		h->send_id = 0x4321;
		const RmaIov iov{0x1000, 8, 0xdead};
		w.iovs(&iov, 1);
		w.raw_addr(f.self);
		w.u64(7);
		f.push({w.size()});
		/* The target answers the unknown sender with its HANDSHAKE; ours answers that.
		 * Until then the refusal waits: whether the peer takes it is in its HANDSHAKE. */
		auto got = f.received(t.cq, 100);
		cr_assert_eq(of_type(got, Type::Handshake).size(), 1u);
		cr_assert_eq(of_type(got, Type::ExtError).size(), 0u, "an EXT_ERROR before the peer's HANDSHAKE");
		f.push({f.handshake(v4::kExtraDeliveryComplete, ext)});
		got = f.received(t.cq, 300);
		auto errs = of_type(got, Type::ExtError);
		if (!ext) {
			cr_assert_eq(errs.size(), 0u, "an EXT_ERROR to a peer without our extension");
		} else {
			cr_assert_eq(errs.size(), 1u, "%zu EXT_ERRORs", errs.size());
			const v4::ExtError e = errs[0].as<v4::ExtError>();
			cr_assert_eq(e.op_id, 0x4321u);
			cr_assert_eq(e.err, uint32_t(FI_EACCES));
		}
		cr_assert_eq(of_type(got, Type::Receipt).size(), 0u, "a refused write was acknowledged");
		close_target(t);
	}
}
