/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The RDM packet codecs: every header size, what the writer builds, and the parser's
 * bounds checks on every field read from the wire (truncation at every length, each
 * length field wrong by one, flags a type does not allow, iov counts, overflows).
 */
#include "rdm/pkt.h"

#include <criterion/criterion.h>

#include <cstring>
#include <memory>

using namespace efa;
using namespace efa::rdm;

namespace {

struct alignas(8) Buf {
	uint8_t b[512];
};

RawAddr some_addr()
{
	RawAddr a{};
	for (int i = 0; i < 16; i++)
		a.gid[i] = uint8_t(0xf0 + i);
	a.qpn = 77;
	a.qkey = 0x1234567;
	return a;
}

/* Every prefix shorter than the packet is refused. Each prefix is parsed from a heap
 * block of exactly its size (16-byte aligned by operator new), so that a read past it is
 * caught by AddressSanitizer builds. */
void assert_truncations_refused(const Buf &b, size_t len)
{
	for (size_t n = 0; n < len; n++) {
		std::unique_ptr<uint8_t[]> copy(new uint8_t[n ? n : 1]);
		std::memcpy(copy.get(), b.b, n);
		Parsed p;
		cr_assert_neq(parse(copy.get(), n, p), ParseError::None, "prefix of %zu of %zu bytes accepted", n, len);
	}
}

size_t build_eager(Buf &b, PktType type, uint16_t flags, const char *data, size_t n)
{
	PktWriter w(b.b, sizeof b.b);
	EagerHdr *h = w.header<EagerHdr>(type, 0xabc, flags);
	cr_assert_not_null(h);
	h->rtm.msg_id = 41;
	h->rtm.seg_len = uint32_t(n);
	h->rtm.tag = is_tagged(type) ? 0xfeedull : 0;
	if (flags & kFlagRawAddr)
		cr_assert(w.raw_addr(some_addr()));
	if (flags & kFlagCqData)
		cr_assert(w.cq_data(0xdeadbeef));
	cr_assert(w.bytes(data, n));
	return w.size();
}

} // namespace

Test(pkt, header_sizes_are_the_spec)
{
	cr_assert_eq(hdr_size(PktType::Handshake), 24u);
	cr_assert_eq(hdr_size(PktType::EagerMsg), 24u);
	cr_assert_eq(hdr_size(PktType::MediumTag), 40u);
	cr_assert_eq(hdr_size(PktType::LongCtsMsg), 40u);
	cr_assert_eq(hdr_size(PktType::LongReadTag), 40u);
	cr_assert_eq(hdr_size(PktType::Cts), 24u);
	cr_assert_eq(hdr_size(PktType::Data), 24u);
	cr_assert_eq(hdr_size(PktType::Eor), 16u);
	cr_assert_eq(hdr_size(PktType::Receipt), 16u);
	cr_assert_eq(hdr_size(PktType::WriteReq), 32u);
	cr_assert_eq(hdr_size(PktType::ReadReq), 32u);
	cr_assert_eq(hdr_size(PktType::ReadRsp), 24u);
	cr_assert_eq(hdr_size(PktType::Error), 24u);
	cr_assert_eq(hdr_size(PktType::AtomRsp), 16u);
	cr_assert_eq(hdr_size(PktType::AtomicReq), 32u);
	cr_assert_eq(hdr_size(PktType(99)), 0u);
	cr_assert(is_tagged(PktType::EagerTag));
	cr_assert_not(is_tagged(PktType::EagerMsg));
	cr_assert(is_tagged(PktType::LongReadTag));
	cr_assert_not(is_tagged(PktType::Handshake));
	cr_assert(is_ordered(PktType::AtomicReq));
	cr_assert_not(is_ordered(PktType::WriteReq));
	cr_assert_not(is_ordered(PktType::Cts));
	cr_assert(is_req(PktType::ReadReq));
	cr_assert_not(is_req(PktType::Data));
}

/* Every REQ of a message gets its type (the tagged twin is the next number), the base
 * header and the RTM fields from PktWriter::rtm. */
Test(pkt, rtm_headers_of_every_family)
{
	const PktType families[] = {PktType::EagerMsg, PktType::MediumMsg, PktType::LongCtsMsg, PktType::LongReadMsg};
	for (PktType f : families)
		for (bool tagged : {false, true}) {
			alignas(8) uint8_t buf[256];
			PktWriter w(buf, sizeof buf);
			RtmHdr *h = nullptr;
			switch (f) {
			case PktType::EagerMsg: h = &w.rtm<EagerHdr>(f, tagged, 0x1234, 0, 7, 0, 0xabcd)->rtm; break;
			case PktType::MediumMsg: {
				MediumHdr *m = w.rtm<MediumHdr>(f, tagged, 0x1234, 0, 7, 0, 0xabcd);
				m->msg_len = 0;
				h = &m->rtm;
				break;
			}
			case PktType::LongCtsMsg: {
				LongCtsHdr *l = w.rtm<LongCtsHdr>(f, tagged, 0x1234, 0, 7, 0, 0xabcd);
				l->msg_len = 1;
				l->send_id = 1;
				h = &l->rtm;
				break;
			}
			default: h = &w.rtm<LongReadHdr>(f, tagged, 0x1234, 0, 7, 0, 0xabcd)->rtm; break;
			}
			cr_assert(w.ok());
			cr_assert_eq(h->base.type, uint8_t(f) + (tagged ? 1 : 0));
			cr_assert_eq(h->base.version, kProtoVersion);
			cr_assert_eq(h->base.conn, 0x1234u);
			cr_assert_eq(h->msg_id, 7u);
			cr_assert_eq(h->seg_len, 0u);
			cr_assert_eq(h->tag, 0xabcdu);
		}
}

Test(pkt, eager_round_trip_with_optional_headers)
{
	const char msg[] = "hello, reorder buffer";
	for (uint16_t flags : {uint16_t(0), uint16_t(kFlagRawAddr), uint16_t(kFlagCqData),
			       uint16_t(kFlagRawAddr | kFlagCqData | kFlagDeliveryComplete)}) {
		Buf b;
		size_t len = build_eager(b, PktType::EagerTag, flags, msg, sizeof msg);
		Parsed p;
		cr_assert_eq(parse(b.b, len, p), ParseError::None, "flags %#x", flags);
		cr_assert_eq(p.type, PktType::EagerTag);
		cr_assert_eq(p.base->conn, 0xabcu);
		cr_assert_eq(p.as<RtmHdr>().msg_id, 41u);
		cr_assert_eq(p.as<RtmHdr>().tag, 0xfeedu);
		cr_assert_eq(p.payload_len, sizeof msg);
		cr_assert_eq(std::memcmp(p.payload, msg, sizeof msg), 0);
		cr_assert_eq(p.raw_addr != nullptr, bool(flags & kFlagRawAddr));
		if (p.raw_addr)
			cr_assert(*p.raw_addr == some_addr());
		cr_assert_eq(p.has_cq_data, bool(flags & kFlagCqData));
		if (p.has_cq_data)
			cr_assert_eq(p.cq_data, 0xdeadbeefu);
		assert_truncations_refused(b, len);
	}
}

Test(pkt, zero_length_eager)
{
	Buf b;
	size_t len = build_eager(b, PktType::EagerMsg, 0, "", 0);
	Parsed p;
	cr_assert_eq(parse(b.b, len, p), ParseError::None);
	cr_assert_eq(p.payload_len, 0u);
}

/* A VOID run: an empty EAGER naming 1..kMaxVoidRun ids in its tag. */
Test(pkt, void_run_is_bounded)
{
	Buf b;
	size_t len = build_eager(b, PktType::EagerMsg, kFlagVoid, "", 0);
	auto *h = reinterpret_cast<RtmHdr *>(b.b);
	Parsed p;
	for (uint64_t count : {uint64_t(1), uint64_t(2), uint64_t(kMaxVoidRun)}) {
		h->tag = count;
		cr_assert_eq(parse(b.b, len, p), ParseError::None, "a run of %lu", (unsigned long)count);
	}
	for (uint64_t count : {uint64_t(0), uint64_t(kMaxVoidRun) + 1, uint64_t(1) << 32, ~uint64_t(0)}) {
		h->tag = count;
		cr_assert_eq(parse(b.b, len, p), ParseError::Length, "a run of %lu", (unsigned long)count);
	}
	len = build_eager(b, PktType::EagerMsg, kFlagVoid, "x", 1);
	h->tag = 1;
	cr_assert_eq(parse(b.b, len, p), ParseError::Length, "a VOID with payload");
}

Test(pkt, eager_length_must_be_exact)
{
	Buf b;
	size_t len = build_eager(b, PktType::EagerMsg, 0, "abcdef", 6);
	Parsed p;
	auto *h = reinterpret_cast<RtmHdr *>(b.b);
	h->seg_len = 7;
	cr_assert_eq(parse(b.b, len, p), ParseError::Length);
	h->seg_len = 5;
	cr_assert_eq(parse(b.b, len, p), ParseError::Length);
	h->seg_len = 0xffffffff;
	cr_assert_eq(parse(b.b, len, p), ParseError::Length);
}

Test(pkt, base_header_checks)
{
	Buf b;
	size_t len = build_eager(b, PktType::EagerMsg, 0, "x", 1);
	Parsed p;
	b.b[1] = 2; /* version */
	cr_assert_eq(parse(b.b, len, p), ParseError::Version);
	b.b[1] = kProtoVersion;
	for (int t : {0, 10, 15, 24, 31, 35, 64, 128, 255}) {
		b.b[0] = uint8_t(t);
		cr_assert_eq(parse(b.b, len, p), ParseError::Type, "type %d", t);
	}
	b.b[0] = uint8_t(PktType::EagerMsg);
	reinterpret_cast<BaseHdr *>(b.b)->flags = 1u << 9;
	cr_assert_eq(parse(b.b, len, p), ParseError::Flags);
}

Test(pkt, control_packets_allow_no_flags)
{
	Buf b;
	PktWriter w(b.b, sizeof b.b);
	auto *h = w.header<CtsHdr>(PktType::Cts, 1, kFlagRawAddr);
	h->window = 4096;
	w.raw_addr(some_addr());
	Parsed p;
	cr_assert_eq(parse(b.b, w.size(), p), ParseError::Flags);
	/* READ_REQ has no CQ data (fi_read carries none). */
	PktWriter w2(b.b, sizeof b.b);
	w2.header<ReadReqHdr>(PktType::ReadReq, 1, kFlagCqData);
	cr_assert_eq(parse(b.b, w2.size(), p), ParseError::Flags);
}

Test(pkt, medium_offsets_are_bounded)
{
	Buf b;
	PktWriter w(b.b, sizeof b.b);
	auto *h = w.header<MediumHdr>(PktType::MediumMsg, 1);
	h->rtm.msg_id = 3;
	h->rtm.seg_len = 100;
	h->msg_len = 1000;
	h->seg_off = 900;
	w.reserve(100);
	const size_t len = w.size();
	Parsed p;
	cr_assert_eq(parse(b.b, len, p), ParseError::None, "the last segment ends at msg_len");
	cr_assert_eq(p.payload_len, 100u);
	h->seg_off = 901;
	cr_assert_eq(parse(b.b, len, p), ParseError::Length, "one past msg_len");
	h->seg_off = UINT64_MAX - 10;
	cr_assert_eq(parse(b.b, len, p), ParseError::Length, "offset + length overflows");
	h->seg_off = 0;
	h->msg_len = 99;
	cr_assert_eq(parse(b.b, len, p), ParseError::Length, "segment longer than the message");
	h->msg_len = 1000;
	assert_truncations_refused(b, len);
	/* An empty medium segment is meaningless. */
	h->rtm.seg_len = 0;
	cr_assert_eq(parse(b.b, sizeof(MediumHdr), p), ParseError::Length);
}

Test(pkt, longcts_first_segment)
{
	Buf b;
	PktWriter w(b.b, sizeof b.b);
	auto *h = w.header<LongCtsHdr>(PktType::LongCtsTag, 1, kFlagCqData);
	w.cq_data(5);
	h->rtm.seg_len = 64;
	h->msg_len = 1 << 20;
	h->send_id = 9;
	h->credits = 32;
	w.reserve(64);
	Parsed p;
	cr_assert_eq(parse(b.b, w.size(), p), ParseError::None);
	cr_assert_eq(p.as<LongCtsHdr>().send_id, 9u);
	cr_assert_eq(p.cq_data, 5u);
	h->msg_len = 63;
	cr_assert_eq(parse(b.b, w.size(), p), ParseError::Length);
}

Test(pkt, rma_iovs_counted_and_summed)
{
	Buf b;
	PktWriter w(b.b, sizeof b.b);
	auto *h = w.header<WriteReqHdr>(PktType::WriteReq, 1);
	h->iov_count = 2;
	h->seg_len = 16;
	h->msg_len = 48;
	RmaIov iov[2] = {{0x1000, 16, 7}, {0x2000, 32, 8}};
	w.bytes(iov, sizeof iov);
	w.bytes("0123456789abcdef", 16);
	const size_t len = w.size();
	Parsed p;
	cr_assert_eq(parse(b.b, len, p), ParseError::None);
	cr_assert_eq(p.iov_count, 2u);
	cr_assert_eq(p.iov[1].key, 8u);
	cr_assert_eq(p.payload_len, 16u);
	cr_assert_eq(std::memcmp(p.payload, "0123456789abcdef", 16), 0);
	assert_truncations_refused(b, len);

	h->iov_count = 0;
	cr_assert_eq(parse(b.b, len, p), ParseError::IovCount);
	h->iov_count = kMaxRmaIov + 1;
	cr_assert_eq(parse(b.b, len, p), ParseError::IovCount);
	h->iov_count = 3; /* would eat the payload and more */
	cr_assert_neq(parse(b.b, len, p), ParseError::None);
	h->iov_count = 0xffffffff;
	cr_assert_eq(parse(b.b, len, p), ParseError::IovCount);
	h->iov_count = 2;
	h->msg_len = 47;
	cr_assert_eq(parse(b.b, len, p), ParseError::Length, "iovs disagree with msg_len");
	h->msg_len = 48;
	auto *wiov = reinterpret_cast<RmaIov *>(b.b + sizeof(WriteReqHdr));
	wiov[0].len = UINT64_MAX;
	cr_assert_eq(parse(b.b, len, p), ParseError::Length, "iov lengths overflow");
}

Test(pkt, read_req_and_responses)
{
	Buf b;
	PktWriter w(b.b, sizeof b.b);
	auto *h = w.header<ReadReqHdr>(PktType::ReadReq, 1, kFlagRawAddr);
	w.raw_addr(some_addr());
	h->iov_count = 1;
	h->recv_id = 12;
	h->msg_len = 100;
	h->window = 8192;
	RmaIov iov{0x5000, 100, 3};
	w.bytes(&iov, sizeof iov);
	Parsed p;
	cr_assert_eq(parse(b.b, w.size(), p), ParseError::None);
	cr_assert_not_null(p.raw_addr);
	cr_assert_eq(p.iov[0].addr, 0x5000u);
	h->window = 0;
	cr_assert_eq(parse(b.b, w.size(), p), ParseError::Length);

	PktWriter r(b.b, sizeof b.b);
	auto *rh = r.header<ReadRspHdr>(PktType::ReadRsp, 1);
	rh->recv_id = 12;
	rh->seg_len = 10;
	rh->seg_off = 4096;
	r.bytes("0123456789", 10);
	cr_assert_eq(parse(b.b, r.size(), p), ParseError::None);
	cr_assert_eq(p.as<ReadRspHdr>().seg_off, 4096u);
	cr_assert_eq(parse(b.b, r.size() - 1, p), ParseError::Length);
	rh->seg_off = UINT64_MAX - 5;
	cr_assert_eq(parse(b.b, r.size(), p), ParseError::Length);

	PktWriter a(b.b, sizeof b.b);
	auto *ah = a.header<RspHdr>(PktType::AtomRsp, 1);
	ah->seg_len = 8;
	a.reserve(8);
	cr_assert_eq(parse(b.b, a.size(), p), ParseError::None);
	cr_assert_eq(parse(b.b, a.size() + 1, p), ParseError::Length);

	PktWriter e(b.b, sizeof b.b);
	auto *eh = e.header<ErrorHdr>(PktType::Error, 1);
	cr_assert_eq(parse(b.b, e.size(), p), ParseError::Length, "an ERROR without an error");
	eh->err = 13;
	cr_assert_eq(parse(b.b, e.size(), p), ParseError::None);
	assert_truncations_refused(b, e.size());
}

Test(pkt, data_cts_eor_receipt_handshake)
{
	Buf b;
	Parsed p;
	{
		PktWriter w(b.b, sizeof b.b);
		auto *h = w.header<DataHdr>(PktType::Data, 1);
		h->recv_id = 4;
		h->seg_len = 8;
		h->seg_off = 1 << 20;
		w.bytes("abcdefgh", 8);
		cr_assert_eq(parse(b.b, w.size(), p), ParseError::None);
		h->seg_len = 0;
		cr_assert_eq(parse(b.b, sizeof(DataHdr), p), ParseError::Length, "empty DATA");
		h->seg_len = 8;
		h->seg_off = UINT64_MAX - 3;
		cr_assert_eq(parse(b.b, w.size(), p), ParseError::Length);
	}
	{
		PktWriter w(b.b, sizeof b.b);
		auto *h = w.header<CtsHdr>(PktType::Cts, 1);
		h->window = 1;
		cr_assert_eq(parse(b.b, w.size(), p), ParseError::None);
		cr_assert_eq(parse(b.b, w.size() + 8, p), ParseError::Length, "trailing bytes");
		h->window = 0;
		cr_assert_eq(parse(b.b, w.size(), p), ParseError::Length);
	}
	{
		PktWriter w(b.b, sizeof b.b);
		w.header<EorHdr>(PktType::Eor, 1);
		cr_assert_eq(parse(b.b, w.size(), p), ParseError::None);
		PktWriter w2(b.b, sizeof b.b);
		auto *r = w2.header<ReceiptHdr>(PktType::Receipt, 1);
		r->msg_id = 77;
		cr_assert_eq(parse(b.b, w2.size(), p), ParseError::None);
		cr_assert_eq(p.as<ReceiptHdr>().msg_id, 77u);
	}
	{
		PktWriter w(b.b, sizeof b.b);
		auto *h = w.header<HandshakeHdr>(PktType::Handshake, 9);
		h->features = kFeatRdmaRead | kFeatDeliveryComplete;
		h->max_payload = 8928;
		h->rx_window = 16384;
		cr_assert_eq(parse(b.b, w.size(), p), ParseError::None);
		cr_assert_eq(p.as<HandshakeHdr>().max_payload, 8928u);
		assert_truncations_refused(b, w.size());
	}
}

Test(pkt, longread_carries_only_iovs)
{
	Buf b;
	PktWriter w(b.b, sizeof b.b);
	auto *h = w.header<LongReadHdr>(PktType::LongReadMsg, 1);
	h->msg_len = 1 << 21;
	h->send_id = 2;
	h->iov_count = 2;
	RmaIov iov[2] = {{0x1000, 1 << 20, 1}, {0x900000, 1 << 20, 2}};
	w.bytes(iov, sizeof iov);
	Parsed p;
	cr_assert_eq(parse(b.b, w.size(), p), ParseError::None);
	cr_assert_eq(p.payload_len, 0u);
	h->rtm.seg_len = 1;
	cr_assert_eq(parse(b.b, w.size(), p), ParseError::Length);
}

Test(pkt, atomic_request)
{
	Buf b;
	PktWriter w(b.b, sizeof b.b);
	auto *h = w.header<AtomicReqHdr>(PktType::AtomicReq, 1);
	h->msg_id = 5;
	h->iov_count = 1;
	h->op = 0;
	h->datatype = 7;
	h->kind = uint8_t(AtomicKind::Compare);
	h->recv_id = 3;
	h->count = 2;
	RmaIov iov{0x100, 16, 4};
	w.bytes(&iov, sizeof iov);
	w.reserve(32);
	Parsed p;
	cr_assert_eq(parse(b.b, w.size(), p), ParseError::None);
	cr_assert_eq(p.payload_len, 32u);
	h->kind = 3;
	cr_assert_eq(parse(b.b, w.size(), p), ParseError::Length);
	h->kind = 0;
	h->count = 0;
	cr_assert_eq(parse(b.b, w.size(), p), ParseError::Length);
}

Test(pkt, writer_never_overruns)
{
	alignas(8) uint8_t b[40];
	std::memset(b, 0x5a, sizeof b);
	PktWriter w(b, 32);
	cr_assert_not_null(w.header<EagerHdr>(PktType::EagerMsg, 1));
	cr_assert_eq(w.room(), 8u);
	cr_assert_not(w.raw_addr(some_addr()), "32 bytes do not fit in 8");
	cr_assert_not(w.ok());
	cr_assert_not(w.bytes("x", 1), "a failed writer stays failed");
	for (size_t i = 32; i < sizeof b; i++)
		cr_assert_eq(b[i], 0x5a, "byte %zu past the capacity written", i);
	PktWriter tiny(b, 4);
	cr_assert_null(tiny.header<BaseHdr>(PktType::Eor, 1));
}

Test(pkt, names)
{
	cr_assert_str_eq(pkt_type_name(PktType::LongCtsTag), "LONGCTS_TAG");
	cr_assert_str_eq(pkt_type_name(PktType(200)), "UNKNOWN");
	cr_assert_str_eq(parse_error_str(ParseError::IovCount), "RMA iov count out of range");
}

/* decode_handshake (protocol.md section 4): what the endpoint keeps of a HANDSHAKE, and
 * each rule that makes it refuse one. */
Test(pkt, handshake_decoding_keeps_known_features_and_refuses_lies)
{
	const RawAddr a = some_addr();
	auto build = [&](Buf &b, uint64_t features, uint32_t mtu, uint32_t window, uint32_t conn, bool with_addr) {
		PktWriter w(b.b, sizeof b.b);
		auto *h = w.header<HandshakeHdr>(PktType::Handshake, conn, with_addr ? kFlagRawAddr : 0);
		h->features = features;
		h->max_payload = mtu;
		h->rx_window = window;
		if (with_addr)
			w.raw_addr(a);
		return w.size();
	};
	Buf b;
	Parsed p;
	HandshakeInfo hs;
	size_t n = build(b, kFeatRdmaRead | kFeatDeliveryComplete | (1ull << 50), 8928, 16384, a.qkey, true);
	cr_assert_eq(parse(b.b, n, p), ParseError::None);
	cr_assert_eq(decode_handshake(p, hs), ParseError::None);
	cr_assert_eq(hs.features, kFeatRdmaRead | kFeatDeliveryComplete, "an unknown bit is dropped");
	cr_assert_eq(hs.max_payload, 8928u);
	cr_assert_eq(hs.rx_window, 16384u);
	cr_assert(hs.addr == a);

	n = build(b, 0, 56, 16, a.qkey, true); /* the smallest values allowed */
	cr_assert_eq(parse(b.b, n, p), ParseError::None);
	cr_assert_eq(decode_handshake(p, hs), ParseError::None);
	n = build(b, 0, 8928, 1u << 30, a.qkey, true);
	cr_assert_eq(parse(b.b, n, p), ParseError::None);
	cr_assert_eq(decode_handshake(p, hs), ParseError::None);

	struct {
		uint32_t mtu, window, conn;
		bool with_addr;
		ParseError want;
	} bad[] = {
		{8928, 16384, a.qkey, false, ParseError::Addr},	   /* no RAW_ADDR */
		{8928, 16384, a.qkey + 1, true, ParseError::Addr}, /* conn is not the address's QKEY */
		{0, 16384, a.qkey, true, ParseError::Length},
		{55, 16384, a.qkey, true, ParseError::Length}, /* smaller than this handshake */
		{8928, 0, a.qkey, true, ParseError::Length},
		{8928, 8, a.qkey, true, ParseError::Length},
		{8928, 1000, a.qkey, true, ParseError::Length}, /* not a power of two */
		{8928, 1u << 31, a.qkey, true, ParseError::Length},
	};
	for (const auto &x : bad) {
		n = build(b, kFeatRdmaRead, x.mtu, x.window, x.conn, x.with_addr);
		cr_assert_eq(parse(b.b, n, p), ParseError::None);
		hs.features = 0xdead;
		cr_assert_eq(decode_handshake(p, hs), x.want, "mtu %u window %u conn %#x addr %d", x.mtu, x.window,
			     x.conn, x.with_addr);
		cr_assert_eq(hs.features, 0xdeadu, "a refused handshake leaves the output alone");
	}
	/* Only a HANDSHAKE is one. */
	PktWriter w(b.b, sizeof b.b);
	w.header<EorHdr>(PktType::Eor, 1);
	cr_assert_eq(parse(b.b, w.size(), p), ParseError::None);
	cr_assert_eq(decode_handshake(p, hs), ParseError::Type);
}
