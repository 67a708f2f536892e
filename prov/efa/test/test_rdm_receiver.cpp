/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The Receiver (rdm/receiver.h) without a device: packets built with v4::Writer go in,
 * and a fake RxPort keeps what comes out (the packets it sends, the RDMA reads it posts,
 * its completions), so matching, unexpected messages, reassembly, multi-receive
 * buffers, truncation, FI_PEEK/FI_CLAIM, fi_cancel, the long-CTS window, read-based
 * messages, owed control packets and peer failure are checked rule by rule.
 */
#include "efa_errno.h"
#include "rdm/receiver.h"

#include <criterion/criterion.h>

#include <cstring>
#include <memory>
#include <vector>

using namespace efa;
using namespace efa::rdm;

namespace {

constexpr uint32_t kQkey = 0x5150;
constexpr size_t kPktSize = 9000;

/* One packet as the Receiver sent it: its bytes, parsed again. */
struct Sent {
	std::vector<uint8_t> bytes;
	Type type() const { return Type(bytes[0]); }
	template <typename H> H hdr() const
	{
		H h;
		std::memcpy(&h, bytes.data(), sizeof h);
		return h;
	}
};

struct Read {
	Pkt *pkt;
	void *buf;
	uint32_t len;
	uint64_t raddr;
	uint32_t rkey;
};

struct Entry {
	bool error = false;
	void *ctx = nullptr;
	uint64_t flags = 0;
	uint64_t len = 0;
	void *buf = nullptr;
	uint64_t data = 0;
	uint64_t tag = 0;
	fi_addr_t src = FI_ADDR_NOTAVAIL;
	int err = 0;
	uint32_t prov_errno = 0;
	uint64_t olen = 0;
};

/* Heap packets with their own buffers. */
Pkt *new_pkt(Pkt::Kind kind)
{
	Pkt *p = new Pkt();
	p->buf = static_cast<uint8_t *>(aligned_alloc(8, kPktSize));
	p->cap = kPktSize;
	p->kind = kind;
	return p;
}

void free_pkt(Pkt *p)
{
	free(p->buf);
	delete p;
}

class FakePort : public RxPort {
public:
	~FakePort() override
	{
		cr_assert_eq(tx_out, 0, "%d transmit buffers were not returned", tx_out);
	}
	Pkt *rx_tx_pkt(Peer &p) override
	{
		if (!tx_free)
			return nullptr;
		tx_free--;
		tx_out++;
		Pkt *pkt = new_pkt(Pkt::Kind::Tx);
		pkt->peer = &p;
		return pkt;
	}
	void rx_post(Pkt *pkt) override
	{
		sent.push_back(Sent{std::vector<uint8_t>(pkt->buf, pkt->buf + pkt->len)});
		rx_put_tx(pkt);
	}
	void rx_put_tx(Pkt *pkt) override
	{
		tx_out--;
		tx_free++;
		free_pkt(pkt);
	}
	Pkt *rx_copy(Pkt &pkt) override
	{
		Pkt *c = new_pkt(Pkt::Kind::Copy);
		std::memcpy(c->buf, pkt.buf, pkt.len);
		c->len = pkt.len;
		c->peer = pkt.peer;
		copies++;
		return c;
	}
	void rx_free_copy(Pkt *pkt) override
	{
		copies--;
		free_pkt(pkt);
	}
	void rx_adopt_pending() override { adopt_looks++; }
	int rx_reg(void *, size_t, InternalMr &) override { return reg_error; }
	int rx_read(Pkt *pkt, void *buf, uint32_t len, const InternalMr &, uint64_t raddr, uint32_t rkey) override
	{
		reads.push_back(Read{pkt, buf, len, raddr, rkey});
		return 0;
	}
	void rx_complete(const fi_cq_tagged_entry &e, fi_addr_t src) override
	{
		Entry c;
		c.ctx = e.op_context;
		c.flags = e.flags;
		c.len = e.len;
		c.buf = e.buf;
		c.data = e.data;
		c.tag = e.tag;
		c.src = src;
		done.push_back(c);
	}
	void rx_error(void *context, uint64_t flags, int err, uint32_t prov_errno, const std::string &, uint64_t len,
		      uint64_t olen, void *buf, uint64_t data, uint64_t tag) override
	{
		Entry c;
		c.error = true;
		c.ctx = context;
		c.flags = flags;
		c.len = len;
		c.olen = olen;
		c.buf = buf;
		c.data = data;
		c.tag = tag;
		c.err = err;
		c.prov_errno = prov_errno;
		done.push_back(c);
	}
	void rx_count(bool remote_write, bool ok) override
	{
		(remote_write ? writes : recvs)[ok ? 0 : 1]++;
	}

	int tx_free = 64;
	int tx_out = 0;
	int copies = 0;
	int adopt_looks = 0;
	int reg_error = 0;
	std::vector<Sent> sent;
	std::vector<Read> reads;
	std::vector<Entry> done;
	int recvs[2] = {0, 0};
	int writes[2] = {0, 0};
};

/* A Receiver with its port and one peer (fi_addr 7). */
struct Fixture {
	explicit Fixture(bool directed = false, size_t min_multi = 0)
	{
		RxConfig c;
		c.directed = directed;
		c.min_multi_recv = min_multi;
		c.size = 256;
		c.qkey = kQkey;
		c.cts_window = 3000;
		c.max_read = 1000;
		rx.configure(c);
		peer.addr = 7;
	}
	~Fixture() { cr_assert_eq(port.copies, 0, "%d packet copies are still held", port.copies); }

	FakePort port;
	Drops drops;
	Receiver rx{port, drops};
	Peer peer{64};
};

/* One received packet: built, then parsed as arrival.cpp does. */
struct In {
	std::unique_ptr<Pkt, void (*)(Pkt *)> pkt{new_pkt(Pkt::Kind::Rx), free_pkt};
	Parsed pk{};

	void parsed()
	{
		cr_assert_eq(v4::parse(pkt->buf, pkt->len, pk), v4::Error::None, "the test built a bad packet");
	}
};

void pattern(uint8_t *p, size_t n, uint8_t seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = uint8_t(seed + i * 7);
}

bool has_pattern(const uint8_t *p, size_t n, uint8_t seed, size_t from = 0)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != uint8_t(seed + (from + i) * 7))
			return false;
	return true;
}

/* An EAGER message (`dc`: its delivery-complete twin, send_id 0x99). */
void eager(In &in, bool tagged, uint32_t msg_id, uint64_t tag, size_t len, bool dc = false, uint8_t seed = 1)
{
	v4::Writer w(in.pkt->buf, in.pkt->cap);
	const Type t = rtm_type(Type::EagerMsgRtm, tagged, dc);
	if (dc) {
		v4::DcEagerRtm *h = w.header<v4::DcEagerRtm>(t, v4::kFlagConnId);
		h->r.msg_id = msg_id;
		h->send_id = 0x99;
	} else {
		w.header<v4::EagerRtm>(t, v4::kFlagConnId)->r.msg_id = msg_id;
	}
	if (tagged)
		w.u64(tag);
	w.connid(kQkey + 1);
	std::vector<uint8_t> data(len);
	pattern(data.data(), len, seed);
	w.bytes(data.data(), len);
	in.pkt->len = uint32_t(w.size());
	in.parsed();
}

/* A MEDIUM segment [off, off + len) of a message of msg_len bytes, pattern from 0. */
void medium(In &in, uint32_t msg_id, uint64_t tag, uint64_t msg_len, uint64_t off, size_t len, uint8_t seed = 3)
{
	v4::Writer w(in.pkt->buf, in.pkt->cap);
	v4::MediumRtm *h = w.header<v4::MediumRtm>(Type::MediumTagRtm, v4::kFlagConnId);
	h->r.msg_id = msg_id;
	h->msg_length = msg_len;
	h->seg_offset = off;
	w.u64(tag);
	w.connid(kQkey + 1);
	std::vector<uint8_t> all(msg_len);
	pattern(all.data(), msg_len, seed);
	w.bytes(all.data() + off, len);
	in.pkt->len = uint32_t(w.size());
	in.parsed();
}

ssize_t post(Receiver &rx, void *buf, size_t len, void *ctx, bool tagged = false, uint64_t tag = 0,
	     uint64_t ignore = 0, uint64_t flags = 0, fi_addr_t src = FI_ADDR_UNSPEC)
{
	iovec iov{buf, len};
	return rx.recv(RecvArgs{&iov, nullptr, 1, src, tag, ignore, flags, ctx, tagged});
}

} // namespace

Test(receiver, unexpected_message_waits_for_its_receive)
{
	Fixture f;
	In in;
	eager(in, true, 0, 0x42, 100);
	f.rx.start_msg(f.peer, *in.pkt, in.pk);
	cr_assert(f.port.done.empty());
	cr_assert_eq(f.port.copies, 1, "the unexpected message keeps a copy of its packet");

	uint8_t buf[256] = {};
	int ctx;
	cr_assert_eq(post(f.rx, buf, sizeof buf, &ctx, true, 0x40, 0x3), 0);
	cr_assert_eq(f.port.done.size(), 1u);
	const Entry &e = f.port.done[0];
	cr_assert(!e.error);
	cr_assert_eq(e.ctx, &ctx);
	cr_assert_eq(e.flags, uint64_t(FI_RECV | FI_TAGGED));
	cr_assert_eq(e.len, 100u);
	cr_assert_eq(e.tag, 0x42u);
	cr_assert_eq(e.src, fi_addr_t(7));
	cr_assert_eq(e.buf, buf);
	cr_assert(has_pattern(buf, 100, 1));
	cr_assert_eq(f.port.copies, 0, "the copy went back once placed");
	cr_assert_eq(f.port.recvs[0], 1);
}

Test(receiver, posted_receive_matches_by_tag_and_kind)
{
	Fixture f;
	uint8_t tbuf[64] = {}, mbuf[64] = {};
	int tctx, mctx;
	cr_assert_eq(post(f.rx, tbuf, sizeof tbuf, &tctx, true, 0x100, 0), 0);
	cr_assert_eq(post(f.rx, mbuf, sizeof mbuf, &mctx), 0);
	cr_assert_eq(f.rx.posted_count(), 2u);

	/* A tagged message whose tag does not match, then an untagged one, then the tag. */
	In a, b, c;
	eager(a, true, 0, 0x101, 10, 0, 5);
	eager(b, false, 1, 0, 20, 0, 6);
	eager(c, true, 2, 0x100, 30, 0, 7);
	f.rx.start_msg(f.peer, *a.pkt, a.pk);
	cr_assert(f.port.done.empty(), "tag 0x101 matched a receive for 0x100");
	f.rx.start_msg(f.peer, *b.pkt, b.pk);
	cr_assert_eq(f.port.done.size(), 1u);
	cr_assert_eq(f.port.done[0].ctx, &mctx, "the untagged message took the untagged receive");
	cr_assert(has_pattern(mbuf, 20, 6));
	f.rx.start_msg(f.peer, *c.pkt, c.pk);
	cr_assert_eq(f.port.done.size(), 2u);
	cr_assert_eq(f.port.done[1].ctx, &tctx);
	cr_assert(has_pattern(tbuf, 30, 7));
	cr_assert_eq(f.rx.posted_count(), 0u);

	/* The unmatched one is still there for a receive that takes it. */
	uint8_t buf[64];
	int ctx;
	cr_assert_eq(post(f.rx, buf, sizeof buf, &ctx, true, 0x101, 0), 0);
	cr_assert_eq(f.port.done.size(), 3u);
	cr_assert(has_pattern(buf, 10, 5));
}

Test(receiver, directed_receive_waits_for_its_source_and_looks_at_the_av)
{
	Fixture f(true);
	uint8_t buf[64] = {};
	int ctx;
	cr_assert_eq(post(f.rx, buf, sizeof buf, &ctx, false, 0, 0, 0, 9), 0);
	cr_assert_eq(f.port.adopt_looks, 1, "a directed receive adopts implicit peers first");
	In in;
	eager(in, false, 0, 0, 8);
	f.rx.start_msg(f.peer, *in.pkt, in.pk); /* from fi_addr 7 */
	cr_assert(f.port.done.empty(), "a receive directed at 9 took a message from 7");
	cr_assert_eq(post(f.rx, buf, sizeof buf, &ctx, false, 0, 0, 0, 7), 0);
	cr_assert_eq(f.port.done.size(), 1u);
	cr_assert_eq(f.port.done[0].src, fi_addr_t(7));
}

Test(receiver, medium_segments_in_any_order_and_duplicates_dropped)
{
	Fixture f;
	const uint64_t len = 2500;
	In s2, s1, s1again, s0;
	medium(s2, 0, 9, len, 2000, 500);
	medium(s1, 0, 9, len, 1000, 1000);
	medium(s1again, 0, 9, len, 1000, 1000);
	medium(s0, 0, 9, len, 0, 1000);
	/* The first packet to arrive starts the message; the rest find it by message id. */
	f.rx.start_msg(f.peer, *s2.pkt, s2.pk);
	MsgLink *l = Receiver::active_msg(f.peer, 0);
	cr_assert_not_null(l);
	f.rx.add_segment(*l->m, *s1.pkt, s1.pk);
	f.rx.route_segment(f.peer, *s1again.pkt, s1again.pk);
	cr_assert_eq(f.drops.dup, 1u, "the repeated segment is a duplicate");
	cr_assert_eq(f.port.copies, 2, "segments of an unmatched message are held");

	std::vector<uint8_t> buf(4096);
	int ctx;
	cr_assert_eq(post(f.rx, buf.data(), buf.size(), &ctx, true, 9, 0), 0);
	cr_assert(f.port.done.empty(), "completed with a segment missing");
	f.rx.route_segment(f.peer, *s0.pkt, s0.pk);
	cr_assert_eq(f.port.done.size(), 1u);
	cr_assert_eq(f.port.done[0].len, len);
	cr_assert(has_pattern(buf.data(), len, 3));
	cr_assert_null(Receiver::active_msg(f.peer, 0), "a finished message is no longer active");
	f.rx.route_segment(f.peer, *s0.pkt, s0.pk);
	cr_assert_eq(f.drops.dup, 2u, "a segment after the end is a duplicate");
}

Test(receiver, multi_recv_buffer_is_sliced_and_released)
{
	Fixture f(false, 150);
	uint8_t buf[300] = {};
	int ctx;
	cr_assert_eq(post(f.rx, buf, sizeof buf, &ctx, false, 0, 0, FI_MULTI_RECV), 0);
	In a, b;
	eager(a, false, 0, 0, 100, 0, 11);
	eager(b, false, 1, 0, 100, 0, 12);
	f.rx.start_msg(f.peer, *a.pkt, a.pk);
	f.rx.start_msg(f.peer, *b.pkt, b.pk);
	cr_assert_eq(f.port.done.size(), 2u);
	cr_assert_eq(f.port.done[0].buf, buf);
	cr_assert_eq(f.port.done[0].flags & FI_MULTI_RECV, 0u);
	cr_assert_eq(f.port.done[1].buf, buf + 100);
	cr_assert_eq(f.port.done[1].flags & FI_MULTI_RECV, uint64_t(FI_MULTI_RECV),
		     "100 bytes left, under the 150-byte minimum: released with the last message");
	cr_assert(has_pattern(buf, 100, 11) && has_pattern(buf + 100, 100, 12));
	cr_assert_eq(f.rx.posted_count(), 0u);
}

Test(receiver, truncation_reports_what_did_not_fit)
{
	Fixture f;
	uint8_t buf[40] = {};
	int ctx;
	cr_assert_eq(post(f.rx, buf, sizeof buf, &ctx), 0);
	In in;
	eager(in, false, 0, 0, 100);
	f.rx.start_msg(f.peer, *in.pkt, in.pk);
	cr_assert_eq(f.port.done.size(), 1u);
	const Entry &e = f.port.done[0];
	cr_assert(e.error);
	cr_assert_eq(e.err, FI_ETRUNC);
	cr_assert_eq(e.len, 40u);
	cr_assert_eq(e.olen, 60u);
	cr_assert(has_pattern(buf, 40, 1));
	cr_assert_eq(f.port.recvs[1], 1, "the receive counter counts an error");
}

Test(receiver, peek_claim_and_discard)
{
	Fixture f;
	In a, b;
	eager(a, true, 0, 0x7, 50, 0, 21);
	eager(b, true, 1, 0x8, 60, 0, 22);
	f.rx.start_msg(f.peer, *a.pkt, a.pk);
	f.rx.start_msg(f.peer, *b.pkt, b.pk);

	int miss, peek, claim, drop;
	cr_assert_eq(post(f.rx, nullptr, 0, &miss, true, 0x9, 0, FI_PEEK), 0);
	cr_assert_eq(f.port.done.back().err, FI_ENOMSG);
	cr_assert_eq(post(f.rx, nullptr, 0, &peek, true, 0x7, 0, FI_PEEK | FI_CLAIM), 0);
	cr_assert(!f.port.done.back().error);
	cr_assert_eq(f.port.done.back().len, 50u);
	cr_assert_eq(f.port.done.back().tag, 0x7u);
	/* Claimed: no other receive takes it. */
	uint8_t other[64];
	int octx;
	cr_assert_eq(post(f.rx, other, sizeof other, &octx, true, 0x7, 0), 0);
	cr_assert_eq(f.port.done.size(), 2u);
	uint8_t buf[64] = {};
	cr_assert_eq(post(f.rx, buf, sizeof buf, &peek, true, 0, 0, FI_CLAIM), 0);
	cr_assert_eq(f.port.done.size(), 3u);
	cr_assert_eq(f.port.done.back().ctx, &peek);
	cr_assert(has_pattern(buf, 50, 21));
	cr_assert_eq(post(f.rx, nullptr, 0, &claim, true, 0, 0, FI_CLAIM), -FI_EINVAL,
		     "a second claim of the same context");
	/* Peek with discard: reported once, its data dropped. */
	cr_assert_eq(post(f.rx, nullptr, 0, &drop, true, 0x8, 0, FI_PEEK | FI_DISCARD), 0);
	cr_assert_eq(f.port.done.size(), 4u);
	cr_assert_eq(f.port.done.back().len, 60u);
	cr_assert_eq(f.rx.cancel(&octx), 0);
	cr_assert_eq(f.port.done.back().err, FI_ECANCELED);
	cr_assert(!f.rx.busy(), "every message finished");
}

Test(receiver, delivery_complete_receipt_is_owed_until_a_buffer_is_free)
{
	Fixture f;
	uint8_t buf[64] = {};
	int ctx;
	cr_assert_eq(post(f.rx, buf, sizeof buf, &ctx), 0);
	f.port.tx_free = 0;
	In in;
	eager(in, false, 5, 0, 16, true);
	f.rx.start_msg(f.peer, *in.pkt, in.pk);
	cr_assert(f.port.done.empty(), "completed before its RECEIPT could go");
	cr_assert(f.rx.busy());
	f.rx.progress();
	cr_assert(f.port.done.empty());
	f.port.tx_free = 1;
	f.rx.progress();
	cr_assert_eq(f.port.sent.size(), 1u);
	cr_assert_eq(f.port.sent[0].type(), Type::Receipt);
	cr_assert_eq(f.port.sent[0].hdr<v4::Receipt>().msg_id, 5u);
	cr_assert_eq(f.port.sent[0].hdr<v4::Receipt>().send_id, 0x99u, "the sender's send_id");
	cr_assert_eq(f.port.sent[0].hdr<v4::Receipt>().connid, kQkey);
	cr_assert_eq(f.port.done.size(), 1u);
	cr_assert(!f.rx.busy());
}

Test(receiver, long_cts_grants_windows_and_checks_data_against_them)
{
	Fixture f;
	const uint64_t len = 8000;
	std::vector<uint8_t> all(len), buf(len);
	pattern(all.data(), len, 31);
	int ctx;
	cr_assert_eq(post(f.rx, buf.data(), len, &ctx, true, 1, 0), 0);

	In req;
	{
		v4::Writer w(req.pkt->buf, req.pkt->cap);
		v4::LongCtsRtm *h = w.header<v4::LongCtsRtm>(Type::LongCtsTagRtm, v4::kFlagConnId);
		h->msg_length = len;
		h->send_id = 77;
		h->credit_request = 4;
		w.u64(1);
		w.connid(kQkey + 1);
		w.bytes(all.data(), 1000);
		req.pkt->len = uint32_t(w.size());
		req.parsed();
	}
	f.rx.start_msg(f.peer, *req.pkt, req.pk);
	cr_assert_eq(f.port.sent.size(), 1u);
	cr_assert_eq(f.port.sent[0].type(), Type::Cts);
	const v4::Cts cts = f.port.sent[0].hdr<v4::Cts>();
	cr_assert_eq(cts.send_id, 77u);
	cr_assert_eq(cts.recv_length, 3000u, "one CTS grants cts_window bytes");
	cr_assert_eq(cts.connid, kQkey);

	auto data = [&](uint64_t off, uint32_t n) {
		In d;
		v4::Writer w(d.pkt->buf, d.pkt->cap);
		v4::CtsData *h = w.header<v4::CtsData>(Type::CtsData, v4::kFlagConnId);
		h->recv_id = cts.recv_id;
		h->seg_length = n;
		h->seg_offset = off;
		w.u32(kQkey + 1);
		w.u32(0);
		w.bytes(all.data() + off, n);
		d.pkt->len = uint32_t(w.size());
		d.parsed();
		f.rx.handle_data(f.peer, d.pk);
	};
	data(4000, 1000); /* beyond the window granted (1000 + 3000) */
	cr_assert_eq(f.drops.malformed, 1u);
	for (uint64_t off = 1000; off < 4000; off += 1000)
		data(off, 1000);
	cr_assert_eq(f.port.sent.size(), 2u, "a second CTS once the first window is full");
	cr_assert_eq(f.port.sent[1].hdr<v4::Cts>().recv_length, 3000u);
	for (uint64_t off = 4000; off < 7000; off += 1000)
		data(off, 1000);
	cr_assert_eq(f.port.sent.size(), 3u);
	cr_assert_eq(f.port.sent[2].hdr<v4::Cts>().recv_length, 1000u, "the last window is what is left");
	data(7000, 1000);
	cr_assert_eq(f.port.done.size(), 1u);
	cr_assert_eq(f.port.done[0].len, len);
	cr_assert(std::memcmp(buf.data(), all.data(), len) == 0);
}

Test(receiver, read_based_message_reads_then_answers_eor)
{
	Fixture f;
	uint8_t buf[2500] = {};
	int ctx;
	In req;
	{
		v4::Writer w(req.pkt->buf, req.pkt->cap);
		v4::LongReadRtm *h = w.header<v4::LongReadRtm>(Type::LongReadMsgRtm, v4::kFlagConnId);
		h->msg_length = 2500;
		h->send_id = 12;
		h->read_iov_count = 2;
		w.connid(kQkey + 1);
		const RmaIov iov[2] = {{0x10000, 2000, 0xaa}, {0x90000, 500, 0xbb}};
		w.iovs(iov, 2);
		req.pkt->len = uint32_t(w.size());
		req.parsed();
	}
	f.rx.start_msg(f.peer, *req.pkt, req.pk);
	cr_assert(f.port.reads.empty(), "no read before the message has a buffer");
	cr_assert_eq(post(f.rx, buf, sizeof buf, &ctx), 0);
	/* max_read 1000: 1000 + 1000 from the first iov, 500 from the second. */
	cr_assert_eq(f.port.reads.size(), 3u);
	cr_assert_eq(f.port.reads[0].raddr, 0x10000u);
	cr_assert_eq(f.port.reads[1].raddr, 0x10000u + 1000);
	cr_assert_eq(f.port.reads[2].raddr, 0x90000u);
	cr_assert_eq(f.port.reads[2].rkey, 0xbbu);
	cr_assert_eq(f.port.reads[2].buf, buf + 2000);
	cr_assert_eq(f.port.reads[2].len, 500u);
	for (const Read &r : f.port.reads)
		f.rx.read_done(r.pkt, true, 0);
	cr_assert_eq(f.port.sent.size(), 1u);
	cr_assert_eq(f.port.sent[0].type(), Type::Eor);
	cr_assert_eq(f.port.sent[0].hdr<v4::Eor>().send_id, 12u);
	cr_assert_eq(f.port.sent[0].hdr<v4::Eor>().connid, kQkey);
	cr_assert_eq(f.port.done.size(), 1u);
	cr_assert(!f.port.done[0].error);
	cr_assert_eq(f.port.done[0].len, 2500u);
}

/* A RUNTREAD message (as upstream sends it with FI_EFA_RUNT_SIZE): two runt packets
 * carry bytes [0, 1500) by offset, the reads fetch [1500, 4000) from the read iov (which
 * describes the whole message); the EOR and the completion wait for the last runt packet
 * even when the reads are done first. */
Test(receiver, runting_read_message_takes_runt_packets_then_reads_the_rest)
{
	Fixture f;
	const uint64_t len = 4000, runt = 1500;
	std::vector<uint8_t> all(len), buf(len);
	pattern(all.data(), len, 41);
	auto runt_pkt = [&](In &in, uint64_t off, uint64_t n) {
		v4::Writer w(in.pkt->buf, in.pkt->cap);
		v4::RuntRtm *h = w.header<v4::RuntRtm>(Type::RuntReadTagRtm, v4::kFlagConnId | v4::kReqMsg | v4::kReqTagged);
		h->r.msg_id = 0;
		h->msg_length = len;
		h->send_id = 21;
		h->credit_or_iovs = 1;
		h->seg_offset = off;
		h->runt_length = runt;
		w.u64(9);
		w.connid(kQkey + 1);
		const RmaIov iov{0x40000, len, 0xcc};
		w.iovs(&iov, 1);
		w.bytes(all.data() + off, n);
		in.pkt->len = uint32_t(w.size());
		in.parsed();
	};
	In first, second;
	runt_pkt(first, 0, 1000);
	runt_pkt(second, 1000, 500);
	f.rx.start_msg(f.peer, *first.pkt, first.pk);
	int ctx;
	cr_assert_eq(post(f.rx, buf.data(), len, &ctx, true, 9, 0), 0);
	/* max_read 1000: [1500, 2500), [2500, 3500), [3500, 4000), at the same remote offsets. */
	cr_assert_eq(f.port.reads.size(), 3u);
	cr_assert_eq(f.port.reads[0].raddr, 0x40000u + runt);
	cr_assert_eq(f.port.reads[0].buf, buf.data() + runt);
	cr_assert_eq(f.port.reads[2].len, 500u);
	for (const Read &r : f.port.reads) {
		std::memcpy(r.buf, all.data() + (r.raddr - 0x40000), r.len); /* the device's read */
		f.rx.read_done(r.pkt, true, 0);
	}
	cr_assert(f.port.sent.empty() && f.port.done.empty(), "done before the last runt packet");
	f.rx.add_segment(*Receiver::active_msg(f.peer, 0)->m, *second.pkt, second.pk);
	cr_assert_eq(f.port.sent.size(), 1u);
	cr_assert_eq(f.port.sent[0].type(), Type::Eor);
	cr_assert_eq(f.port.sent[0].hdr<v4::Eor>().send_id, 21u);
	cr_assert_eq(f.port.done.size(), 1u);
	cr_assert(!f.port.done[0].error);
	cr_assert_eq(f.port.done[0].len, len);
	cr_assert(buf == all, "the message's bytes");
	cr_assert(!f.rx.busy());
}

Test(receiver, failed_read_fails_the_message_with_the_device_status)
{
	Fixture f;
	uint8_t buf[100] = {};
	int ctx;
	cr_assert_eq(post(f.rx, buf, sizeof buf, &ctx), 0);
	In req;
	{
		v4::Writer w(req.pkt->buf, req.pkt->cap);
		v4::LongReadRtm *h = w.header<v4::LongReadRtm>(Type::LongReadMsgRtm, v4::kFlagConnId);
		h->msg_length = 100;
		h->send_id = 3;
		h->read_iov_count = 1;
		w.connid(kQkey + 1);
		const RmaIov iov{0x10000, 100, 0xaa};
		w.iovs(&iov, 1);
		req.pkt->len = uint32_t(w.size());
		req.parsed();
	}
	f.rx.start_msg(f.peer, *req.pkt, req.pk);
	cr_assert_eq(f.port.reads.size(), 1u);
	const uint32_t status = uint32_t(EfaStatus::REMOTE_ERROR_BAD_ADDRESS);
	f.rx.read_done(f.port.reads[0].pkt, false, status);
	cr_assert_eq(f.port.sent.size(), 1u, "the sender still gets its EOR");
	cr_assert_eq(f.port.done.size(), 1u);
	cr_assert(f.port.done[0].error);
	cr_assert_eq(f.port.done[0].prov_errno, status);
	cr_assert_eq(f.port.done[0].err, efa_status_to_fi(status));
}

Test(receiver, failed_peer_ends_its_partial_message_and_keeps_a_whole_one)
{
	Fixture f;
	/* A partial medium message bound to a receive, and a whole unexpected eager one. */
	std::vector<uint8_t> buf(3000);
	int ctx;
	cr_assert_eq(post(f.rx, buf.data(), buf.size(), &ctx, true, 9, 0), 0);
	In s0, e;
	medium(s0, 0, 9, 2000, 0, 1000);
	eager(e, true, 1, 0x55, 10);
	f.rx.start_msg(f.peer, *s0.pkt, s0.pk);
	f.rx.start_msg(f.peer, *e.pkt, e.pk);
	cr_assert(f.port.done.empty());

	const uint32_t status = uint32_t(EfaStatus::PEER_REMOVED);
	f.rx.peer_failed(f.peer, FI_EHOSTUNREACH, status);
	cr_assert_eq(f.port.done.size(), 1u);
	cr_assert(f.port.done[0].error);
	cr_assert_eq(f.port.done[0].ctx, &ctx);
	cr_assert_eq(f.port.done[0].err, FI_EHOSTUNREACH);
	cr_assert_eq(f.port.done[0].prov_errno, status);
	/* The whole message is still delivered. */
	uint8_t b2[16];
	int c2;
	cr_assert_eq(post(f.rx, b2, sizeof b2, &c2, true, 0x55, 0), 0);
	cr_assert_eq(f.port.done.size(), 2u);
	cr_assert(!f.port.done[1].error);
	cr_assert(has_pattern(b2, 10, 1));
	/* Removed from the AV: an unreceived whole message is dropped too. */
	In e2;
	eager(e2, true, 2, 0x56, 10);
	f.rx.start_msg(f.peer, *e2.pkt, e2.pk);
	f.peer.released = true;
	f.rx.peer_failed(f.peer, FI_EHOSTUNREACH, status);
	cr_assert(!f.rx.busy());
}
