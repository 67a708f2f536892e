/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The Sender (rdm/sender.h) without a device: a fake TxPort keeps the packets a call
 * produces (parsed again with the wire parser), the RDMA work requests and the
 * completions; the test plays the peer (CTS, RECEIPT, EOR, READRSP, CTSDATA, ATOMRSP,
 * EXT_ERROR built with v4::Writer) and the device (acknowledging or failing each packet). Checked: the
 * protocol of each size and its headers, the first-burst rule, delivery complete,
 * long-CTS windows, read-based sends, emulated and device RMA with CQ data, atomics,
 * target refusals, device failures and peer failure.
 */
#include "efa_errno.h"
#include "rdm/sender.h"

#include <criterion/criterion.h>

#include <cstring>
#include <memory>
#include <vector>

using namespace efa;
using namespace efa::rdm;

namespace {

constexpr uint32_t kQkey = 0x7a7a;
constexpr size_t kMtu = 1024;
constexpr fi_addr_t kPeerAddr = 7;

void pattern(uint8_t *p, size_t n, uint8_t seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = uint8_t(seed + i * 13);
}

/* A packet the Sender posted: its bytes (8-aligned copy), parsed. */
struct Out {
	std::vector<uint64_t> words;
	uint32_t len = 0;
	Parsed pk{};
	Pkt *pkt = nullptr; /* still "on the device" until the test acknowledges it */

	const uint8_t *bytes() const { return reinterpret_cast<const uint8_t *>(words.data()); }
};

struct Rdma {
	Pkt *pkt;
	bool write;
	uint64_t off, len, raddr;
	uint32_t rkey;
};

struct Done {
	bool error = false;
	void *ctx = nullptr;
	uint64_t flags = 0;
	int err = 0;
	uint32_t prov_errno = 0;
};

Pkt *new_pkt()
{
	Pkt *p = new Pkt();
	p->buf = static_cast<uint8_t *>(aligned_alloc(8, kMtu));
	p->cap = kMtu;
	return p;
}

void free_pkt(Pkt *p)
{
	free(p->buf);
	delete p;
}

class FakePort : public TxPort {
public:
	explicit FakePort(Peer &peer) : peer_(peer) { out.reserve(4096); } /* references stay valid */
	Peer *tx_peer(fi_addr_t dest, bool, ssize_t &err) override
	{
		if (dest != kPeerAddr) {
			err = -FI_EINVAL;
			return nullptr;
		}
		return &peer_;
	}
	size_t tx_avail() override { return size_t(free); }
	Pkt *tx_buf(Peer &p) override
	{
		if (!free)
			return nullptr;
		free--;
		Pkt *k = new_pkt();
		k->peer = &p;
		return k;
	}
	void tx_post(Pkt *pkt) override
	{
		if (refuse_posts > 0 && --refuse_posts == 0) {
			/* As Ep::post does when the device refuses the work request. */
			TxOp *op = pkt->op;
			tx_put(pkt);
			if (op)
				sender->pkt_failed(op, FI_EIO, uint32_t(EfaStatus::POST_FAILED));
			return;
		}
		Out o;
		o.words.resize((pkt->len + 7) / 8);
		std::memcpy(o.words.data(), pkt->buf, pkt->len);
		o.len = pkt->len;
		cr_assert_eq(v4::parse(o.words.data(), o.len, o.pk), v4::Error::None,
			     "the Sender built a packet the parser refuses");
		o.pkt = pkt;
		out.push_back(std::move(o));
	}
	void tx_put(Pkt *pkt) override
	{
		free++;
		free_pkt(pkt);
	}
	void tx_handshake(Peer &p) override
	{
		handshakes++;
		p.hs_sent = true;
	}
	int tx_read_key(void *, size_t, void *, InternalMr &, uint64_t &key) override
	{
		key = 0x500 + keys++;
		return 0;
	}
	bool tx_device_ok(const TxOp &) override { return device_ok; }
	int tx_rdma(Pkt *pkt, const TxOp &, bool write, uint64_t off, uint64_t len, uint64_t raddr, uint32_t rkey) override
	{
		rdma.push_back(Rdma{pkt, write, off, len, raddr, rkey});
		return 0;
	}
	void tx_write_data(Peer &, uint64_t data, uint64_t len) override { write_data.emplace_back(data, len); }
	void tx_complete(const fi_cq_tagged_entry &e) override { done.push_back(Done{false, e.op_context, e.flags, 0, 0}); }
	void tx_error(void *context, uint64_t flags, int err, uint32_t prov_errno, const std::string &, uint64_t,
		      uint64_t, uint64_t) override
	{
		done.push_back(Done{true, context, flags, err, prov_errno});
	}
	void tx_count(CntrIdx c, bool ok) override { counts[c][ok ? 0 : 1]++; }

	int free = 64;
	int refuse_posts = 0; /* n > 0: the post after the next n - 1 is refused */
	Sender *sender = nullptr;
	int handshakes = 0;
	int keys = 0;
	bool device_ok = false;
	std::vector<Out> out;
	std::vector<Rdma> rdma;
	std::vector<std::pair<uint64_t, uint64_t>> write_data;
	std::vector<Done> done;
	int counts[kCntrCount][2] = {};

private:
	Peer &peer_;
};

struct Fixture {
	/* The peer: its HANDSHAKE known or not, its extra features, and whether it is one of
	 * ours (takes EXT_ERROR). */
	explicit Fixture(bool hs_got = true, uint64_t peer_features = v4::kExtraRdmaRead | v4::kExtraRdmaWrite,
			 bool ext = true)
	{
		peer.addr = kPeerAddr;
		peer.hs_sent = true;
		peer.hs_got = hs_got;
		peer.features = peer_features;
		peer.ext = ext;
		TxConfig c;
		c.mtu = kMtu;
		c.inject_size = 64;
		c.max_medium = c.max_medium_foreign = 4096;
		c.min_read = c.min_read_foreign = 16384;
		c.credits = 4;
		c.size = 64;
		c.max_atomic = 512;
		c.max_rdma = 3000;
		c.features = v4::kExtraRdmaRead | v4::kExtraRdmaWrite | v4::kExtraDeliveryComplete |
			     v4::kExtraUnsolicitedWriteRecv;
		c.qkey = kQkey;
		c.self.qpn = 99;
		c.self.qkey = kQkey;
		tx.configure(c);
		port.sender = &tx;
	}
	~Fixture()
	{
		for (Out &o : port.out)
			if (o.pkt)
				port.tx_put(o.pkt);
		for (Rdma &r : port.rdma)
			if (r.pkt)
				port.tx_put(r.pkt);
	}
	/* The device acknowledges every packet posted so far. */
	void ack()
	{
		for (Out &o : port.out)
			if (o.pkt) {
				Pkt *k = std::exchange(o.pkt, nullptr);
				TxOp *op = k->op;
				port.tx_put(k);
				if (op)
					tx.pkt_sent(op);
			}
		for (Rdma &r : port.rdma)
			if (r.pkt) {
				Pkt *k = std::exchange(r.pkt, nullptr);
				TxOp *op = k->op;
				port.tx_put(k);
				tx.pkt_sent(op);
			}
	}
	/* A packet from the peer: built by `build`, parsed, handed to `handle`. */
	template <typename Build> Parsed answer(Build build, std::vector<uint64_t> &mem)
	{
		mem.assign(kMtu / 8, 0);
		v4::Writer w(mem.data(), kMtu);
		build(w);
		Parsed pk;
		cr_assert_eq(v4::parse(mem.data(), w.size(), pk), v4::Error::None, "the test built a bad answer");
		return pk;
	}

	/* The peer's CTS for send_id: `window` more bytes, to its receive `recv_id`. */
	void cts(uint32_t send_id, uint64_t window, uint32_t recv_id = 55)
	{
		std::vector<uint64_t> mem;
		Parsed c = answer(
			[&](v4::Writer &w) {
				v4::Cts *x = w.header<v4::Cts>(Type::Cts, v4::kFlagConnId);
				x->connid = 1;
				x->send_id = send_id;
				x->recv_id = recv_id;
				x->recv_length = window;
			},
			mem);
		tx.handle_cts(peer, c);
	}

	Peer peer{64};
	FakePort port{peer};
	Drops drops;
	Sender tx{port, drops};
};

ssize_t send(Sender &tx, const void *buf, size_t len, void *ctx, uint64_t flags = 0, uint64_t tag = 0,
	     fi_addr_t dest = kPeerAddr)
{
	iovec iov{const_cast<void *>(buf), len};
	void *desc = nullptr;
	return tx.send(SendArgs{&iov, &desc, 1, dest, tag, 0xd00d, flags, ctx, true});
}

} // namespace

Test(sender, eager_is_one_packet_and_completes_when_acknowledged)
{
	Fixture f(false); /* the peer's handshake is not known: our address goes along */
	uint8_t buf[100];
	pattern(buf, sizeof buf, 1);
	int ctx;
	cr_assert_eq(send(f.tx, buf, sizeof buf, &ctx, FI_REMOTE_CQ_DATA, 0xabc), 0);
	cr_assert_eq(f.port.out.size(), 1u);
	const Parsed &pk = f.port.out[0].pk;
	cr_assert_eq(pk.type, Type::EagerTagRtm);
	cr_assert_eq(pk.connid, kQkey);
	cr_assert_eq(msg_id_of(pk), 0u);
	cr_assert_eq(pk.tag, 0xabcu);
	cr_assert(pk.has_raw_addr, "a REQ before the peer's handshake carries our address");
	cr_assert_eq(pk.raw_addr.qpn, 99u);
	cr_assert(pk.has_cq_data);
	cr_assert_eq(pk.cq_data, 0xd00du);
	cr_assert_eq(pk.payload_len, sizeof buf);
	cr_assert(std::memcmp(pk.payload, buf, sizeof buf) == 0);
	cr_assert(f.port.done.empty(), "complete before the device acknowledged it");
	f.ack();
	cr_assert_eq(f.port.done.size(), 1u);
	cr_assert_eq(f.port.done[0].ctx, &ctx);
	cr_assert_eq(f.port.done[0].flags, uint64_t(FI_SEND | FI_TAGGED));
	cr_assert_eq(f.port.counts[kCntrSend][0], 1);
	cr_assert_eq(f.peer.next_tx_id, 1u);
	cr_assert(!f.tx.busy());
}

/* An eager inject: one EAGER packet, no operation entry, nothing to complete (its end
 * is counted by the endpoint). Sender::send takes it through the abstract port; the
 * endpoint calls the template with its own port type, as the second call here does. */
Test(sender, inject_takes_no_entry)
{
	Fixture f;
	uint8_t buf[8];
	pattern(buf, sizeof buf, 3);
	cr_assert_eq(send(f.tx, buf, sizeof buf, nullptr, FI_INJECT, 0x11), 0);
	iovec iov{buf, 1};
	void *desc = nullptr;
	const auto args = [&](uint64_t flags) { return SendArgs{&iov, &desc, 1, kPeerAddr, 0x12, 0, flags, nullptr, true}; };
	ssize_t ret = 1;
	cr_assert(f.tx.inject(f.port, args(FI_INJECT), ret));
	cr_assert_eq(ret, 0);
	cr_assert_eq(f.port.out.size(), 2u);
	for (uint32_t i = 0; i < 2; i++) {
		const Out &o = f.port.out[i];
		cr_assert_eq(o.pk.type, Type::EagerTagRtm);
		cr_assert_eq(msg_id_of(o.pk), i);
		cr_assert_eq(o.pk.tag, 0x11u + i);
		cr_assert(o.pk.has_connid && o.pk.connid == kQkey && !o.pk.has_raw_addr && !o.pk.has_cq_data);
		cr_assert_eq(o.pk.payload_len, i ? 1u : sizeof buf);
		cr_assert(std::memcmp(o.pk.payload, buf, o.pk.payload_len) == 0);
		cr_assert(o.pkt->inject && !o.pkt->op, "the packet carries the inject, no operation");
	}
	cr_assert(!f.tx.busy(), "an inject keeps no operation entry");
	cr_assert_eq(f.tx.counts.inject, 2u);
	f.ack();
	cr_assert(f.port.done.empty(), "an inject has no completion");

	/* Not an inject of this kind: before our HANDSHAKE went, or with delivery complete
	 * (an entry waits for the RECEIPT): nothing sent, no message id spent. */
	f.peer.hs_sent = false;
	cr_assert(!f.tx.inject(f.port, args(FI_INJECT), ret));
	f.peer.hs_sent = true;
	cr_assert(!f.tx.inject(f.port, args(FI_INJECT | FI_DELIVERY_COMPLETE), ret));
	cr_assert_eq(f.port.out.size(), 2u);
	cr_assert_eq(f.peer.next_tx_id, 2u);
	/* No transmit buffer: -FI_EAGAIN, no message id spent. */
	f.port.free = 0;
	cr_assert(f.tx.inject(f.port, args(FI_INJECT), ret));
	cr_assert_eq(ret, -FI_EAGAIN);
	cr_assert_eq(f.peer.next_tx_id, 2u);
	/* Through send(), delivery complete takes an entry and waits. */
	f.port.free = 64;
	cr_assert_eq(send(f.tx, buf, 1, nullptr, FI_INJECT | FI_DELIVERY_COMPLETE), 0);
	cr_assert_eq(f.port.out.back().pk.type, Type::DcEagerTagRtm);
	cr_assert(f.tx.busy());
}

/* The bytes of an EAGER REQ after the peer's HANDSHAKE (written field by field, not by
 * v4::Writer: Sender::eager_fast), checked against protocol v4's layout for each of its
 * shapes: tagged or not, with CQ data or not, as an inject and with an entry. */
Test(sender, eager_bytes_after_handshake)
{
	for (int tagged = 0; tagged < 2; tagged++)
		for (int data = 0; data < 2; data++)
			for (int inject = 0; inject < 2; inject++) {
				Fixture f;
				uint8_t buf[13];
				pattern(buf, sizeof buf, uint8_t(5 + tagged + 2 * data));
				iovec iov{buf, sizeof buf};
				void *desc = nullptr;
				const uint64_t flags = (data ? FI_REMOTE_CQ_DATA : 0) | (inject ? FI_INJECT : 0);
				f.peer.next_tx_id = 0x01020304;
				cr_assert_eq(f.tx.send(SendArgs{&iov, &desc, 1, kPeerAddr, 0x1122334455667788, 0xd00dfeed,
								flags, nullptr, bool(tagged)}),
					     0);
				cr_assert_eq(f.port.out.size(), 1u);
				cr_assert_eq(f.tx.counts.inject, uint64_t(inject));
				std::vector<uint8_t> want;
				const auto put = [&](const void *p, size_t n) {
					want.insert(want.end(), static_cast<const uint8_t *>(p),
						    static_cast<const uint8_t *>(p) + n);
				};
				const uint16_t fl = uint16_t(v4::kReqMsg | (tagged ? v4::kReqTagged : 0) | v4::kFlagConnId |
							     (data ? v4::kReqCqData : 0));
				want.push_back(uint8_t(tagged ? Type::EagerTagRtm : Type::EagerMsgRtm));
				want.push_back(v4::kVersion);
				put(&fl, 2);
				const uint32_t id = 0x01020304;
				put(&id, 4);
				const uint64_t tag = 0x1122334455667788, cq = 0xd00dfeed;
				if (tagged)
					put(&tag, 8);
				if (data)
					put(&cq, 8);
				put(&kQkey, 4);
				put(buf, sizeof buf);
				const Out &o = f.port.out[0];
				cr_assert_eq(o.len, want.size(), "tagged %d data %d inject %d: %u bytes, want %zu", tagged,
					     data, inject, o.len, want.size());
				cr_assert(std::memcmp(o.bytes(), want.data(), want.size()) == 0,
					  "tagged %d data %d inject %d: bytes differ", tagged, data, inject);
				cr_assert_eq(o.pk.payload_len, sizeof buf);
			}
}

Test(sender, medium_segments_cover_the_message)
{
	Fixture f;
	std::vector<uint8_t> buf(2500);
	pattern(buf.data(), buf.size(), 2);
	int ctx;
	cr_assert_eq(send(f.tx, buf.data(), buf.size(), &ctx), 0);
	const size_t seg = kMtu - kMediumHdrMax - req_opt_len(false, false);
	cr_assert_eq(f.port.out.size(), (buf.size() + seg - 1) / seg);
	std::vector<uint8_t> got(buf.size());
	for (const Out &o : f.port.out) {
		cr_assert_eq(o.pk.type, Type::MediumTagRtm);
		cr_assert(!o.pk.has_raw_addr, "no address once the peer's handshake is known");
		cr_assert(o.pk.has_connid && o.pk.connid == kQkey, "the connid header instead");
		const v4::MediumRtm h = o.pk.as<v4::MediumRtm>();
		cr_assert_eq(h.msg_length, buf.size());
		std::memcpy(got.data() + h.seg_offset, o.pk.payload, o.pk.payload_len);
	}
	cr_assert(got == buf);
	f.ack();
	cr_assert_eq(f.port.done.size(), 1u);
}

Test(sender, first_burst_or_nothing)
{
	Fixture f;
	std::vector<uint8_t> buf(2500);
	int ctx;
	f.port.free = 2; /* the medium message needs 3 */
	cr_assert_eq(send(f.tx, buf.data(), buf.size(), &ctx), -FI_EAGAIN);
	cr_assert(f.port.out.empty());
	cr_assert_eq(f.peer.next_tx_id, 0u, "a message id was spent on a message that did not go");
	cr_assert(!f.tx.busy());
	cr_assert_eq(send(f.tx, buf.data(), 100, &ctx, FI_INJECT), -FI_EMSGSIZE, "inject above inject_size");
	cr_assert_eq(send(f.tx, buf.data(), 10, &ctx, 0, 0, 8), -FI_EINVAL, "the port's answer for an unknown peer");
}

Test(sender, delivery_complete_waits_for_the_receipt)
{
	Fixture f;
	uint8_t buf[10] = {};
	int a, b;
	cr_assert_eq(send(f.tx, buf, sizeof buf, &a, FI_DELIVERY_COMPLETE), 0);
	cr_assert_eq(send(f.tx, buf, sizeof buf, &b, FI_DELIVERY_COMPLETE), 0);
	cr_assert_eq(f.port.out[0].pk.type, Type::DcEagerTagRtm);
	const uint32_t second = f.port.out[1].pk.as<v4::DcEagerRtm>().send_id;
	cr_assert_neq(second, f.port.out[0].pk.as<v4::DcEagerRtm>().send_id);
	f.ack();
	cr_assert(f.port.done.empty(), "delivery complete before the RECEIPT");
	std::vector<uint64_t> mem;
	Parsed r = f.answer(
		[&](v4::Writer &w) {
			v4::Receipt *h = w.header<v4::Receipt>(Type::Receipt, 0);
			h->send_id = second; /* the second message first */
			h->msg_id = 1;
		},
		mem);
	f.tx.handle_receipt(f.peer, r);
	cr_assert_eq(f.port.done.size(), 1u);
	cr_assert_eq(f.port.done[0].ctx, &b);
	f.tx.handle_receipt(f.peer, r);
	cr_assert_eq(f.drops.unknown, 1u, "a second RECEIPT for it");
}

Test(sender, long_cts_sends_what_each_window_allows)
{
	Fixture f;
	const size_t len = 6000; /* above max_medium */
	std::vector<uint8_t> buf(len);
	pattern(buf.data(), len, 3);
	int ctx;
	cr_assert_eq(send(f.tx, buf.data(), len, &ctx), 0);
	cr_assert_eq(f.port.out.size(), 1u);
	const Parsed req = f.port.out[0].pk; /* a copy: out grows below */
	cr_assert_eq(req.type, Type::LongCtsTagRtm);
	const v4::LongCtsRtm h = req.as<v4::LongCtsRtm>();
	cr_assert_eq(h.msg_length, len);
	cr_assert_eq(h.credit_request, 4u);
	std::vector<uint8_t> got(len);
	const size_t first = req.payload_len;
	size_t have = first;
	std::memcpy(got.data(), req.payload, have);
	f.ack();
	cr_assert(f.port.done.empty());

	f.cts(h.send_id, 2000);
	size_t from = 1;
	for (; from < f.port.out.size(); from++) {
		const Parsed &d = f.port.out[from].pk;
		cr_assert_eq(d.type, Type::CtsData);
		cr_assert_eq(d.as<v4::CtsData>().recv_id, 55u);
		cr_assert(d.has_connid && d.connid == kQkey);
		std::memcpy(got.data() + d.as<v4::CtsData>().seg_offset, d.payload, d.payload_len);
		have += d.payload_len;
	}
	cr_assert_eq(have, first + 2000, "exactly the window");
	f.ack();
	f.cts(h.send_id, len); /* the rest */
	for (; from < f.port.out.size(); from++) {
		const Parsed &d = f.port.out[from].pk;
		std::memcpy(got.data() + d.as<v4::CtsData>().seg_offset, d.payload, d.payload_len);
		have += d.payload_len;
	}
	cr_assert_eq(have, len);
	cr_assert(got == buf);
	cr_assert(f.port.done.empty(), "complete with DATA on the device");
	f.ack();
	cr_assert_eq(f.port.done.size(), 1u);
	cr_assert(!f.port.done[0].error);
}

Test(sender, long_cts_window_waits_for_buffers)
{
	Fixture f;
	std::vector<uint8_t> buf(6000);
	int ctx;
	cr_assert_eq(send(f.tx, buf.data(), buf.size(), &ctx), 0);
	const uint32_t send_id = f.port.out[0].pk.as<v4::LongCtsRtm>().send_id;
	f.ack();
	f.port.free = 1;
	f.cts(send_id, 6000);
	cr_assert_eq(f.port.out.size(), 2u, "one buffer, one DATA");
	f.ack(); /* frees that buffer: progress sends the next */
	f.port.free = 64;
	f.tx.progress();
	f.ack();
	cr_assert_eq(f.port.done.size(), 1u);
}

Test(sender, read_based_send_names_its_buffer_and_completes_on_eor)
{
	Fixture f;
	std::vector<uint8_t> buf(20000);
	int ctx;
	cr_assert_eq(send(f.tx, buf.data(), buf.size(), &ctx), 0);
	cr_assert_eq(f.port.out.size(), 1u);
	const Parsed &req = f.port.out[0].pk;
	cr_assert_eq(req.type, Type::LongReadTagRtm);
	cr_assert_eq(req.read_iov_count, 1u);
	cr_assert_eq(req.read(0).addr, uint64_t(reinterpret_cast<uintptr_t>(buf.data())));
	cr_assert_eq(req.read(0).len, buf.size());
	cr_assert_eq(req.read(0).key, 0x500u);
	const uint32_t send_id = req.as<v4::LongReadRtm>().send_id;
	f.ack();
	cr_assert(f.port.done.empty());
	std::vector<uint64_t> mem;
	Parsed e = f.answer([&](v4::Writer &w) { w.header<v4::Eor>(Type::Eor, 0)->send_id = send_id; }, mem);
	f.tx.handle_eor(f.peer, e);
	cr_assert_eq(f.port.done.size(), 1u);
	/* Without RDMA read at the peer: long-CTS instead. */
	Fixture g(true, 0);
	cr_assert_eq(send(g.tx, buf.data(), buf.size(), &ctx), 0);
	cr_assert_eq(g.port.out[0].pk.type, Type::LongCtsTagRtm);
}

Test(sender, emulated_write_and_read)
{
	Fixture f;
	uint8_t src[300];
	pattern(src, sizeof src, 4);
	iovec iov{src, sizeof src};
	void *desc = nullptr;
	const fi_rma_iov rma{0x9000, sizeof src, 0x33};
	int w, r;
	cr_assert_eq(f.tx.rma(RmaArgs{&iov, &desc, 1, kPeerAddr, &rma, 1, 0, 0, &w, true}), 0);
	const Parsed &req = f.port.out[0].pk;
	cr_assert_eq(req.type, Type::DcEagerRtw, "to a peer of ours, with its RECEIPT (and refusal)");
	cr_assert_eq(req.rma(0).addr, 0x9000u);
	cr_assert_eq(req.rma(0).key, 0x33u);
	cr_assert(std::memcmp(req.payload, src, sizeof src) == 0);
	const uint32_t send_id = req.as<v4::DcEagerRtw>().send_id;
	f.ack();
	cr_assert(f.port.done.empty(), "an emulated write waits for the target's RECEIPT");
	std::vector<uint64_t> mem;
	f.tx.handle_receipt(f.peer, f.answer([&](v4::Writer &x) { x.header<v4::Receipt>(Type::Receipt, 0)->send_id = send_id; }, mem));
	cr_assert_eq(f.port.done.size(), 1u);
	cr_assert_eq(f.port.done[0].flags, uint64_t(FI_RMA | FI_WRITE));

	uint8_t dst[300] = {};
	iovec diov{dst, sizeof dst};
	cr_assert_eq(f.tx.rma(RmaArgs{&diov, &desc, 1, kPeerAddr, &rma, 1, 0, 0, &r, false}), 0);
	const Parsed &rq = f.port.out[1].pk;
	cr_assert_eq(rq.type, Type::ShortRtr, "300 bytes fit one READRSP");
	const uint32_t recv_id = rq.as<v4::Rtr>().recv_id;
	cr_assert_eq(rq.as<v4::Rtr>().msg_length, sizeof src);
	f.ack();
	/* A responder may answer in a READRSP and CTSDATA (as a long-CTS read). */
	std::vector<uint64_t> m;
	f.tx.handle_read_rsp(f.peer, f.answer(
					     [&](v4::Writer &x) {
						     v4::ReadRsp *h = x.header<v4::ReadRsp>(Type::ReadRsp, 0);
						     h->recv_id = recv_id;
						     h->send_id = 7;
						     h->seg_length = 200;
						     x.bytes(src, 200);
					     },
					     m));
	cr_assert_eq(f.port.done.size(), 1u, "complete with 100 bytes to come");
	cr_assert(Sender::owns_id(recv_id), "a CTSDATA naming it reaches the Sender");
	f.tx.handle_read_data(f.peer, f.answer(
					      [&](v4::Writer &x) {
						      v4::CtsData *h = x.header<v4::CtsData>(Type::CtsData, 0);
						      h->recv_id = recv_id;
						      h->seg_length = 100;
						      h->seg_offset = 200;
						      x.bytes(src + 200, 100);
					      },
					      m));
	cr_assert_eq(f.port.done.size(), 2u);
	cr_assert(std::memcmp(dst, src, sizeof src) == 0);
	cr_assert_eq(f.port.counts[kCntrWrite][0], 1);
	cr_assert_eq(f.port.counts[kCntrRead][0], 1);
}

/* To a v4 peer that is not one of ours, an emulated write asks for no RECEIPT (nothing
 * would tell it of a refusal): it completes once the device has delivered it, as
 * upstream's does; asked for FI_DELIVERY_COMPLETE, it waits for the RECEIPT. */
Test(sender, emulated_write_to_upstream_completes_on_delivery)
{
	Fixture f(true, 0, false);
	uint8_t src[64] = {};
	iovec iov{src, sizeof src};
	void *desc = nullptr;
	const fi_rma_iov rma{0x9000, sizeof src, 0x33};
	int w, dc;
	cr_assert_eq(f.tx.rma(RmaArgs{&iov, &desc, 1, kPeerAddr, &rma, 1, 0, 0, &w, true}), 0);
	cr_assert_eq(f.port.out[0].pk.type, Type::EagerRtw);
	f.ack();
	cr_assert_eq(f.port.done.size(), 1u);
	cr_assert_eq(f.port.done[0].ctx, &w);
	cr_assert_eq(f.tx.rma(RmaArgs{&iov, &desc, 1, kPeerAddr, &rma, 1, 0, FI_DELIVERY_COMPLETE, &dc, true}), 0);
	cr_assert_eq(f.port.out[1].pk.type, Type::DcEagerRtw);
	f.ack();
	cr_assert_eq(f.port.done.size(), 1u, "delivery complete waits for the RECEIPT");
	cr_assert(f.tx.busy());
}

/* A device write with CQ data: in work requests of at most max_rdma; to a peer of ours
 * whose QP takes unsolicited write receive, the data follows in EXT_WRITE_DATA once the
 * write is acknowledged; to another such peer it rides on the last write (with
 * immediate); to a peer whose QP lacks unsolicited write receive the write is emulated
 * (specification 4.9: no write with immediate between QPs that differ). */
Test(sender, device_write_in_segments)
{
	Fixture f(true, v4::kExtraRdmaRead | v4::kExtraRdmaWrite | v4::kExtraUnsolicitedWriteRecv);
	f.port.device_ok = true;
	std::vector<uint8_t> src(7000);
	iovec iov{src.data(), src.size()};
	void *desc = nullptr;
	const fi_rma_iov rma{0x100000, src.size(), 0x44};
	int ctx;
	cr_assert_eq(f.tx.rma(RmaArgs{&iov, &desc, 1, kPeerAddr, &rma, 1, 0xcafe, FI_REMOTE_CQ_DATA, &ctx, true}), 0);
	cr_assert(f.port.out.empty(), "no packet: device RDMA");
	cr_assert_eq(f.port.rdma.size(), 3u, "7000 bytes in work requests of at most max_rdma 3000");
	cr_assert(f.port.rdma[0].write);
	cr_assert_eq(f.port.rdma[2].off, 6000u);
	cr_assert_eq(f.port.rdma[2].len, 1000u);
	cr_assert_eq(f.port.rdma[2].raddr, 0x100000u + 6000);
	cr_assert_eq(f.port.rdma[2].rkey, 0x44u);
	cr_assert(f.port.write_data.empty(), "the CQ data before the write is in place");
	f.ack();
	cr_assert_eq(f.port.write_data.size(), 1u, "CQ data follows the write once it is in place");
	cr_assert_eq(f.port.write_data[0].first, 0xcafeu);
	cr_assert_eq(f.port.write_data[0].second, 7000u);
	cr_assert_eq(f.port.done.size(), 1u);
	{
		Fixture g(true, v4::kExtraRdmaWrite | v4::kExtraUnsolicitedWriteRecv, false);
		g.port.device_ok = true;
		cr_assert_eq(g.tx.rma(RmaArgs{&iov, &desc, 1, kPeerAddr, &rma, 1, 0xcafe, FI_REMOTE_CQ_DATA, &ctx, true}),
			     0);
		cr_assert_eq(g.port.rdma.size(), 3u);
		g.ack();
		cr_assert(g.port.write_data.empty() && g.port.out.empty(), "the CQ data goes with the write (immediate data)");
		cr_assert_eq(g.port.done.size(), 1u);
	}
	for (bool ext : {true, false}) {
		Fixture g(true, v4::kExtraRdmaWrite, ext);
		g.port.device_ok = true;
		cr_assert_eq(g.tx.rma(RmaArgs{&iov, &desc, 1, kPeerAddr, &rma, 1, 0xcafe, FI_REMOTE_CQ_DATA, &ctx, true}),
			     0);
		cr_assert(g.port.rdma.empty(), "no device write with CQ data to a QP without unsolicited write receive");
		cr_assert_eq(g.port.out.size(), 1u);
		cr_assert(g.port.out[0].pk.info.family == v4::Family::Rtw && g.port.out[0].pk.has_cq_data);
		cr_assert_eq(g.port.out[0].pk.cq_data, 0xcafeu);
	}
}

Test(sender, atomic_fetch_gets_its_result)
{
	Fixture f;
	uint64_t operand[2] = {5, 6}, result[2] = {};
	fi_ioc src{operand, 2}, res{result, 2};
	const fi_rma_ioc rma{0x7000, 2, 0x55};
	int ctx;
	AtomicArgs a{AtomicKind::Fetch, &src, 1, nullptr, 0, &res, 1, 2, kPeerAddr, &rma, 1, FI_UINT64, FI_SUM, 0, &ctx};
	cr_assert_eq(f.tx.atomic(a), 0);
	const Parsed &req = f.port.out[0].pk;
	cr_assert_eq(req.type, Type::FetchRta);
	const v4::Rta h = req.as<v4::Rta>();
	cr_assert_eq(h.atomic_op, uint32_t(FI_SUM));
	cr_assert_eq(h.atomic_datatype, uint32_t(FI_UINT64));
	cr_assert_eq(req.rma_iov_count, 1u);
	cr_assert_eq(req.rma(0).len, sizeof operand, "the count in bytes");
	cr_assert_eq(req.payload_len, sizeof operand);
	f.ack();
	cr_assert(f.port.done.empty());
	const uint64_t old[2] = {100, 200};
	std::vector<uint64_t> mem;
	f.tx.handle_atom_rsp(f.peer, f.answer(
					     [&](v4::Writer &w) {
						     v4::AtomRsp *r = w.header<v4::AtomRsp>(Type::AtomRsp, 0);
						     r->recv_id = h.id;
						     r->seg_length = sizeof old;
						     w.bytes(old, sizeof old);
					     },
					     mem));
	cr_assert_eq(f.port.done.size(), 1u);
	cr_assert_eq(result[0], 100u);
	cr_assert_eq(result[1], 200u);
	cr_assert_eq(f.port.done[0].flags, uint64_t(FI_ATOMIC | FI_READ));
}

Test(sender, target_refusal_and_device_failure_are_error_completions)
{
	Fixture f;
	uint8_t src[8] = {};
	iovec iov{src, sizeof src};
	void *desc = nullptr;
	const fi_rma_iov rma{0x9000, sizeof src, 0x33};
	int w;
	cr_assert_eq(f.tx.rma(RmaArgs{&iov, &desc, 1, kPeerAddr, &rma, 1, 0, 0, &w, true}), 0);
	const uint32_t send_id = f.port.out[0].pk.as<v4::DcEagerRtw>().send_id;
	f.ack();
	std::vector<uint64_t> mem;
	f.tx.handle_error(f.peer, f.answer(
					  [&](v4::Writer &x) {
						  v4::ExtError *e = x.header<v4::ExtError>(Type::ExtError, v4::kFlagConnId);
						  e->op_id = send_id;
						  e->err = FI_EACCES;
					  },
					  mem));
	cr_assert_eq(f.port.done.size(), 1u);
	cr_assert(f.port.done[0].error);
	cr_assert_eq(f.port.done[0].err, FI_EACCES);
	cr_assert_eq(f.port.done[0].prov_errno, uint32_t(EfaStatus::TARGET_REFUSED));

	/* The device fails a send's packet: the error once, with the device's status. */
	int s;
	cr_assert_eq(send(f.tx, src, sizeof src, &s), 0);
	Pkt *k = std::exchange(f.port.out[1].pkt, nullptr);
	TxOp *op = k->op;
	f.port.tx_put(k);
	const uint32_t status = uint32_t(EfaStatus::REMOTE_ERROR_BAD_LENGTH);
	f.tx.pkt_failed(op, efa_status_to_fi(status), status);
	cr_assert_eq(f.port.done.size(), 2u);
	cr_assert_eq(f.port.done[1].ctx, &s);
	cr_assert_eq(f.port.done[1].err, FI_ETRUNC);
	cr_assert_eq(f.port.done[1].prov_errno, status);
	cr_assert_eq(f.port.counts[kCntrSend][1], 1);
}

Test(sender, peer_failure_ends_what_waits_for_an_answer)
{
	Fixture f;
	std::vector<uint8_t> big(6000);
	uint8_t small[10] = {};
	int a, b;
	cr_assert_eq(send(f.tx, big.data(), big.size(), &a), 0);		      /* waits for a CTS */
	cr_assert_eq(send(f.tx, small, sizeof small, &b, FI_DELIVERY_COMPLETE), 0); /* for a RECEIPT */
	f.ack();
	cr_assert(f.port.done.empty());
	f.tx.mark_waiting();
	cr_assert(f.peer.waiting, "operations wait for this peer's answer");
	const uint32_t status = uint32_t(EfaStatus::LOCAL_ERROR_UNRESP_REMOTE);
	f.tx.peer_failed(f.peer, FI_EHOSTUNREACH, status);
	cr_assert_eq(f.port.done.size(), 2u);
	for (const Done &d : f.port.done) {
		cr_assert(d.error);
		cr_assert_eq(d.err, FI_EHOSTUNREACH);
		cr_assert_eq(d.prov_errno, status);
	}
	cr_assert(!f.tx.busy());
}

Test(sender, a_refused_post_fails_a_medium_send_once)
{
	Fixture f;
	std::vector<uint8_t> buf(2500); /* three MEDIUM packets */
	int ctx;
	f.port.refuse_posts = 1; /* the first */
	cr_assert_eq(send(f.tx, buf.data(), buf.size(), &ctx), 0);
	cr_assert(f.port.out.empty(), "no packet after the refused one");
	cr_assert_eq(f.port.done.size(), 1u);
	cr_assert(f.port.done[0].error);
	cr_assert_eq(f.port.done[0].err, FI_EIO);
	cr_assert_eq(f.port.done[0].prov_errno, uint32_t(EfaStatus::POST_FAILED));
	cr_assert(!f.tx.busy(), "the operation went back to its pool once");
	/* The second of three refused: the first is on the device; the error waits for it. */
	int ctx2;
	f.port.refuse_posts = 2;
	cr_assert_eq(send(f.tx, buf.data(), buf.size(), &ctx2), 0);
	cr_assert_eq(f.port.out.size(), 1u);
	cr_assert_eq(f.port.done.size(), 1u, "no completion while a packet of it is on the device");
	f.ack();
	cr_assert_eq(f.port.done.size(), 2u);
	cr_assert_eq(f.port.done[1].ctx, &ctx2);
	cr_assert_eq(f.port.done[1].err, FI_EIO);
	cr_assert(!f.tx.busy());
}

Test(sender, a_refused_data_post_fails_a_long_send_once)
{
	Fixture f;
	std::vector<uint8_t> buf(6000);
	int ctx;
	cr_assert_eq(send(f.tx, buf.data(), buf.size(), &ctx), 0);
	const uint32_t send_id = f.port.out[0].pk.as<v4::LongCtsRtm>().send_id;
	f.ack();
	f.port.refuse_posts = 1;
	f.cts(send_id, 6000);
	cr_assert_eq(f.port.out.size(), 1u, "no DATA after the refused one");
	cr_assert_eq(f.port.done.size(), 1u);
	cr_assert_eq(f.port.done[0].err, FI_EIO);
	cr_assert(!f.tx.busy());
	f.tx.progress(); /* nothing left to pump */
	cr_assert_eq(f.port.out.size(), 1u);
}
