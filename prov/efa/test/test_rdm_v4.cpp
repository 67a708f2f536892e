/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Protocol v4 packets (rdm/v4): each packet type built with the Writer is checked byte
 * by byte against the layout written from the specification's tables (and, where they
 * disagree, the reference implementation: READRSP's recv_id before send_id, MEDIUM's
 * msg_length where the table says seg_length), then parsed back; the parser refuses
 * every truncation, other versions and types, contradictory flags, iov counts and
 * lengths outside the packet or its message.
 */
#include "rdm/pkt.h"
#include "rdm/v4/codec.h"

#include <criterion/criterion.h>

#include <cstring>
#include <memory>
#include <vector>

using namespace efa;
using namespace efa::rdm::v4;

namespace {

struct alignas(8) Buf {
	uint8_t b[4096];
};

uint32_t u32(const Buf &b, size_t off)
{
	uint32_t v;
	std::memcpy(&v, b.b + off, 4);
	return v;
}

uint64_t u64(const Buf &b, size_t off)
{
	uint64_t v;
	std::memcpy(&v, b.b + off, 8);
	return v;
}

uint16_t u16(const Buf &b, size_t off)
{
	uint16_t v;
	std::memcpy(&v, b.b + off, 2);
	return v;
}

void expect_base(const Buf &b, uint8_t type, uint16_t flags)
{
	cr_assert_eq(b.b[0], type, "type at byte 0: %u, expected %u", b.b[0], type);
	cr_assert_eq(b.b[1], 4, "version at byte 1 is 4");
	cr_assert_eq(u16(b, 2), flags, "flags at bytes 2-3: %#x, expected %#x", u16(b, 2), flags);
}

RawAddr some_addr()
{
	RawAddr a{};
	for (int i = 0; i < 16; i++)
		a.gid[i] = uint8_t(0xa0 + i);
	a.qpn = 321;
	a.qkey = 0xc0ffee;
	return a;
}

/* Every prefix shorter than the packet is refused; each is parsed from a heap block of
 * exactly its size, so that a read past it is caught by AddressSanitizer builds. */
void assert_truncations_refused(const Buf &b, size_t len)
{
	for (size_t n = 0; n < len; n++) {
		std::unique_ptr<uint8_t[]> copy(new uint8_t[n ? n : 1]);
		std::memcpy(copy.get(), b.b, n);
		Packet p;
		cr_assert_neq(parse(copy.get(), n, p), Error::None, "a prefix of %zu of %zu bytes was accepted", n, len);
	}
}

Packet parsed(const Buf &b, size_t len)
{
	Packet p;
	const Error e = parse(b.b, len, p);
	cr_assert_eq(e, Error::None, "parse: %s", error_str(e));
	return p;
}

} // namespace

Test(v4, type_numbers_and_header_sizes)
{
	struct {
		Type t;
		uint8_t id;
		size_t hdr;
	} rows[] = {
		{Type::Cts, 3, 24},	      {Type::CtsData, 4, 24},	       {Type::ReadRsp, 5, 24},
		{Type::Eor, 7, 16},	      {Type::AtomRsp, 8, 24},	       {Type::Handshake, 9, 8},
		{Type::Receipt, 10, 16},      {Type::ReadNack, 11, 16},	       {Type::EagerMsgRtm, 64, 8},
		{Type::EagerTagRtm, 65, 16},  {Type::MediumMsgRtm, 66, 24},    {Type::MediumTagRtm, 67, 32},
		{Type::LongCtsMsgRtm, 68, 24}, {Type::LongCtsTagRtm, 69, 32},  {Type::EagerRtw, 70, 8},
		{Type::LongCtsRtw, 71, 24},   {Type::ShortRtr, 72, 24},	       {Type::LongCtsRtr, 73, 24},
		{Type::WriteRta, 74, 24},     {Type::FetchRta, 75, 24},	       {Type::CompareRta, 76, 24},
		{Type::LongReadMsgRtm, 128, 24}, {Type::LongReadTagRtm, 129, 32}, {Type::LongReadRtw, 130, 24},
		{Type::DcEagerMsgRtm, 133, 16}, {Type::DcEagerTagRtm, 134, 24}, {Type::DcMediumMsgRtm, 135, 32},
		{Type::DcMediumTagRtm, 136, 40}, {Type::DcLongCtsMsgRtm, 137, 24}, {Type::DcLongCtsTagRtm, 138, 32},
		{Type::DcEagerRtw, 139, 16},  {Type::DcLongCtsRtw, 140, 24},   {Type::DcWriteRta, 141, 24},
		{Type::RuntCtsMsgRtm, 142, 40}, {Type::RuntCtsTagRtm, 143, 48}, {Type::RuntCtsRtw, 144, 40},
		{Type::RuntReadMsgRtm, 145, 40}, {Type::RuntReadTagRtm, 146, 48}, {Type::RuntReadRtw, 147, 40},
	};
	for (const auto &r : rows) {
		cr_assert_eq(uint8_t(r.t), r.id);
		const TypeInfo ti = type_info(r.id);
		cr_assert(ti.known, "%s", type_name(r.t));
		cr_assert_eq(ti.hdr, r.hdr, "%s: header %zu, expected %zu", type_name(r.t), ti.hdr, r.hdr);
		cr_assert_eq(ti.req, r.id >= 64);
	}
	for (uint8_t reserved : {0, 1, 2, 6, 12, 63, 77, 127, 131, 132, 148, 255})
		cr_assert(!type_info(reserved).known, "type %u is not one v4 sends", reserved);
}

Test(v4, eager_tagrtm_with_raw_address_and_cq_data)
{
	Buf b{};
	Writer w(b.b, sizeof b.b);
	EagerRtm *h = w.header<EagerRtm>(Type::EagerTagRtm, kReqRawAddr | kReqCqData | kReqMsg | kReqTagged);
	h->r.msg_id = 0x11223344;
	cr_assert(w.u64(0xfeedfacecafebeefull)); /* the tag ends the mandatory header */
	cr_assert(w.raw_addr(some_addr()));
	cr_assert(w.cq_data(0x5555));
	cr_assert(w.bytes("hello", 5));
	const size_t len = w.size();
	/* base 4 + msg_id 4 + tag 8 + raw address header 40 + CQ data 8 + 5 bytes */
	cr_assert_eq(len, 16u + 40 + 8 + 5);
	expect_base(b, 65, 0x1 | 0x2 | 0x4 | 0x8);
	cr_assert_eq(u32(b, 4), 0x11223344u);
	cr_assert_eq(u64(b, 8), 0xfeedfacecafebeefull);
	cr_assert_eq(u32(b, 16), 36u, "addr_len: our 32-byte address and 4 bytes of padding");
	cr_assert_eq(b.b[20], 0xa0, "the GID starts the address");
	cr_assert_eq(u16(b, 36), 321, "the QPN follows the GID");
	cr_assert_eq(u32(b, 40), 0xc0ffeeu, "then the connid (qkey)");
	cr_assert_eq(u64(b, 56), 0x5555u, "the CQ data header follows the raw address header");
	cr_assert(std::memcmp(b.b + 64, "hello", 5) == 0);

	const Packet p = parsed(b, len);
	cr_assert_eq(p.type, Type::EagerTagRtm);
	cr_assert_eq(p.tag, 0xfeedfacecafebeefull);
	cr_assert(p.has_raw_addr);
	cr_assert_eq(p.raw_addr.qpn, 321);
	cr_assert_eq(p.raw_addr.gid[0], 0xa0);
	cr_assert(p.has_connid);
	cr_assert_eq(p.connid, 0xc0ffeeu, "a REQ with an address takes its connid from it");
	cr_assert(p.has_cq_data);
	cr_assert_eq(p.cq_data, 0x5555u);
	cr_assert_eq(p.payload_len, 5u);
	assert_truncations_refused(b, 16 + 40 + 8);
}

Test(v4, medium_msgrtm_with_connid_header)
{
	Buf b{};
	Writer w(b.b, sizeof b.b);
	MediumRtm *h = w.header<MediumRtm>(Type::MediumMsgRtm, kFlagConnId | kReqMsg);
	h->r.msg_id = 9;
	h->msg_length = 10000;
	h->seg_offset = 8000;
	cr_assert(w.connid(0xabcdef));
	cr_assert(w.bytes(std::vector<uint8_t>(2000, 7).data(), 2000));
	const size_t len = w.size();
	cr_assert_eq(len, 24u + 4 + 2000);
	expect_base(b, 66, 0x8000 | 0x4);
	cr_assert_eq(u64(b, 8), 10000u, "msg_length at 8 (the table's 'seg_length'; the data's length is the packet's)");
	cr_assert_eq(u64(b, 16), 8000u, "seg_offset at 16");
	cr_assert_eq(u32(b, 24), 0xabcdefu, "the connid header follows the mandatory header");
	const Packet p = parsed(b, len);
	cr_assert(p.has_connid);
	cr_assert_eq(p.connid, 0xabcdefu);
	cr_assert_eq(p.payload_len, 2000u);
	/* A segment that ends past its message is refused. */
	Buf c = b;
	h = reinterpret_cast<MediumRtm *>(c.b);
	h->seg_offset = 8001;
	Packet q;
	cr_assert_eq(parse(c.b, len, q), Error::Length);
}

Test(v4, longcts_and_dc_and_runt_rtm_layouts)
{
	Buf b{};
	Writer w(b.b, sizeof b.b);
	LongCtsRtm *l = w.header<LongCtsRtm>(Type::DcLongCtsTagRtm, kReqMsg | kReqTagged);
	l->r.msg_id = 1;
	l->msg_length = 1 << 20;
	l->send_id = 77;
	l->credit_request = 8;
	cr_assert(w.u64(0x42));
	cr_assert(w.bytes("x", 1));
	expect_base(b, 138, 0xc);
	cr_assert_eq(u64(b, 8), 1u << 20);
	cr_assert_eq(u32(b, 16), 77u);
	cr_assert_eq(u32(b, 20), 8u);
	cr_assert_eq(u64(b, 24), 0x42u, "the tag ends the header at 24");
	Packet p = parsed(b, w.size());
	cr_assert(p.info.dc);
	cr_assert(p.info.tagged);
	cr_assert_eq(p.tag, 0x42u);

	Buf d{};
	Writer wd(d.b, sizeof d.b);
	DcEagerRtm *e = wd.header<DcEagerRtm>(Type::DcEagerMsgRtm, kReqMsg);
	e->r.msg_id = 5;
	e->send_id = 99;
	cr_assert_eq(wd.size(), 16u);
	cr_assert_eq(u32(d, 8), 99u, "DC_EAGER: send_id after msg_id");
	p = parsed(d, wd.size());
	cr_assert(p.info.dc);

	Buf r{};
	Writer wr(r.b, sizeof r.b);
	RuntRtm *rt = wr.header<RuntRtm>(Type::RuntReadMsgRtm, kReqMsg);
	rt->msg_length = 100000;
	rt->send_id = 4;
	rt->credit_or_iovs = 2; /* read_iov_count */
	rt->seg_offset = 0;
	rt->runt_length = 1000;
	const RmaIov iov[2] = {{0x1000, 60000, 0x11}, {0x9000, 40000, 0x22}};
	cr_assert(wr.iovs(iov, 2));
	cr_assert(wr.bytes(std::vector<uint8_t>(500, 1).data(), 500));
	cr_assert_eq(u64(r, 24), 0u);
	cr_assert_eq(u64(r, 32), 1000u);
	cr_assert_eq(u64(r, 40), 0x1000u, "the read iovs start the data");
	p = parsed(r, wr.size());
	cr_assert_eq(p.read_iov_count, 2u);
	cr_assert_eq(p.read(1).key, 0x22u);
	cr_assert_eq(p.payload_len, 500u, "the runt data follows the read iovs");
	rt->runt_length = 100001;
	Packet q;
	cr_assert_eq(parse(r.b, wr.size(), q), Error::Length, "runt_length beyond the message");
}

Test(v4, longread_rtm_read_iovs_follow_the_optional_headers)
{
	Buf b{};
	Writer w(b.b, sizeof b.b);
	LongReadRtm *h = w.header<LongReadRtm>(Type::LongReadMsgRtm, kReqRawAddr | kReqMsg);
	h->r.msg_id = 3;
	h->msg_length = 1 << 24;
	h->send_id = 12;
	h->read_iov_count = 1;
	cr_assert(w.raw_addr(some_addr()));
	const RmaIov iov{0xdead0000, 1 << 24, 0x77};
	cr_assert(w.iovs(&iov, 1));
	cr_assert_eq(w.size(), 24u + 40 + 24);
	cr_assert_eq(u32(b, 20), 1u, "read_iov_count at 20");
	cr_assert_eq(u64(b, 64), 0xdead0000u, "the read iov after the raw address header");
	const Packet p = parsed(b, w.size());
	cr_assert_eq(p.read_iov_count, 1u);
	cr_assert_eq(p.read(0).len, 1u << 24);
	cr_assert_eq(p.payload_len, 0u);
	assert_truncations_refused(b, w.size());
	/* More read iovs than the packet holds, or than an endpoint may name. */
	h->read_iov_count = 2;
	Packet q;
	cr_assert_eq(parse(b.b, w.size(), q), Error::Length);
	h->read_iov_count = kMaxIov + 1;
	cr_assert_eq(parse(b.b, w.size(), q), Error::IovCount);
}

Test(v4, rtw_rtr_rta_iovs_precede_the_optional_headers)
{
	Buf b{};
	Writer w(b.b, sizeof b.b);
	LongCtsRtw *h = w.header<LongCtsRtw>(Type::LongCtsRtw, kReqRma | kReqCqData | kFlagConnId);
	h->rma_iov_count = 1;
	h->msg_length = 50000;
	h->send_id = 6;
	h->credit_request = 4;
	const RmaIov iov{0x10000, 50000, 0x99};
	cr_assert(w.iovs(&iov, 1));
	cr_assert(w.cq_data(0xdada));
	cr_assert(w.connid(0x1234));
	cr_assert(w.bytes("abc", 3));
	expect_base(b, 71, 0x10 | 0x2 | 0x8000);
	cr_assert_eq(u32(b, 4), 1u, "rma_iov_count at 4");
	cr_assert_eq(u64(b, 8), 50000u);
	cr_assert_eq(u64(b, 24), 0x10000u, "the target iovs right after the mandatory header");
	cr_assert_eq(u64(b, 48), 0xdadau, "then the CQ data header");
	cr_assert_eq(u32(b, 56), 0x1234u, "then the connid header");
	Packet p = parsed(b, w.size());
	cr_assert_eq(p.rma_iov_count, 1u);
	cr_assert_eq(p.rma(0).key, 0x99u);
	cr_assert_eq(p.cq_data, 0xdadau);
	cr_assert_eq(p.connid, 0x1234u);
	cr_assert_eq(p.payload_len, 3u);

	Buf r{};
	Writer wr(r.b, sizeof r.b);
	Rtr *rtr = wr.header<Rtr>(Type::LongCtsRtr, kReqRma);
	rtr->rma_iov_count = 1;
	rtr->msg_length = 70000;
	rtr->recv_id = 31;
	rtr->recv_length = 16384;
	cr_assert(wr.iovs(&iov, 1));
	cr_assert_eq(u32(r, 16), 31u, "recv_id at 16");
	cr_assert_eq(u32(r, 20), 16384u, "recv_length at 20");
	p = parsed(r, wr.size());
	cr_assert_eq(p.info.family, Family::Rtr);

	Buf a{};
	Writer wa(a.b, sizeof a.b);
	Rta *rta = wa.header<Rta>(Type::CompareRta, kReqAtomic);
	rta->msg_id = 8;
	rta->rma_iov_count = 1;
	rta->atomic_datatype = 7;
	rta->atomic_op = 19;
	rta->id = 55;
	cr_assert(wa.iovs(&iov, 1));
	const uint64_t operands[2] = {1, 2}; /* buf, then compare */
	cr_assert(wa.bytes(operands, sizeof operands));
	cr_assert_eq(u32(a, 4), 8u, "RTA: msg_id at 4");
	cr_assert_eq(u32(a, 8), 1u, "rma_iov_count at 8");
	cr_assert_eq(u32(a, 12), 7u, "atomic_datatype at 12");
	cr_assert_eq(u32(a, 16), 19u, "atomic_op at 16");
	cr_assert_eq(u32(a, 20), 55u, "recv_id at 20");
	p = parsed(a, wa.size());
	cr_assert_eq(p.rma_iov_count, 1u);
	cr_assert_eq(p.payload_len, 16u);
	assert_truncations_refused(a, 24 + 24);
	rta->rma_iov_count = 3;
	cr_assert_eq(parse(a.b, wa.size(), p), Error::Length, "iovs beyond the packet");
}

Test(v4, non_req_layouts)
{
	Buf b{};
	Writer w(b.b, sizeof b.b);
	Cts *c = w.header<Cts>(Type::Cts, kFlagConnId | kCtsReadReq);
	c->connid = 0x77;
	c->send_id = 1;
	c->recv_id = 2;
	c->recv_length = 3;
	expect_base(b, 3, 0x8080);
	cr_assert_eq(u32(b, 4), 0x77u);
	cr_assert_eq(u32(b, 8), 1u);
	cr_assert_eq(u32(b, 12), 2u);
	cr_assert_eq(u64(b, 16), 3u);
	Packet p = parsed(b, w.size());
	cr_assert(p.has_connid);
	cr_assert_eq(p.connid, 0x77u);

	Buf d{};
	Writer wd(d.b, sizeof d.b);
	CtsData *h = wd.header<CtsData>(Type::CtsData, kFlagConnId);
	h->recv_id = 9;
	h->seg_length = 10;
	h->seg_offset = 4096;
	cr_assert(wd.connid(0x66));
	cr_assert(wd.u32(0));
	cr_assert(wd.bytes("0123456789", 10));
	cr_assert_eq(u32(d, 4), 9u);
	cr_assert_eq(u64(d, 8), 10u);
	cr_assert_eq(u64(d, 16), 4096u);
	cr_assert_eq(u32(d, 24), 0x66u, "CTSDATA's optional connid after its header, padded to 8");
	p = parsed(d, wd.size());
	cr_assert_eq(p.connid, 0x66u);
	cr_assert_eq(p.payload_len, 10u);
	cr_assert(std::memcmp(p.payload, "0123456789", 10) == 0);
	h->seg_length = 11;
	cr_assert_eq(parse(d.b, wd.size(), p), Error::Length, "seg_length past the packet");

	Buf r{};
	Writer wr(r.b, sizeof r.b);
	ReadRsp *rr = wr.header<ReadRsp>(Type::ReadRsp, 0);
	rr->recv_id = 0x100;
	rr->send_id = 0x200;
	rr->seg_length = 4;
	cr_assert(wr.bytes("abcd", 4));
	cr_assert_eq(u32(r, 8), 0x100u, "READRSP: recv_id at 8 (the reference's order; the table lists send_id first)");
	cr_assert_eq(u32(r, 12), 0x200u, "send_id at 12");
	p = parsed(r, wr.size());
	cr_assert(!p.has_connid);
	cr_assert_eq(p.payload_len, 4u);

	Buf e{};
	Writer we(e.b, sizeof e.b);
	Eor *eor = we.header<Eor>(Type::Eor, kFlagConnId);
	eor->send_id = 5;
	eor->recv_id = 6;
	eor->connid = 0x99;
	cr_assert_eq(we.size(), 16u);
	cr_assert_eq(u32(e, 4), 5u);
	cr_assert_eq(u32(e, 8), 6u);
	cr_assert_eq(u32(e, 12), 0x99u, "EOR's connid last");
	p = parsed(e, we.size());
	cr_assert_eq(p.connid, 0x99u);

	Buf t{};
	Writer wt(t.b, sizeof t.b);
	Receipt *rc = wt.header<Receipt>(Type::Receipt, 0);
	rc->send_id = 11;
	rc->msg_id = 12;
	cr_assert_eq(u32(t, 4), 11u);
	cr_assert_eq(u32(t, 8), 12u);
	p = parsed(t, wt.size());
	cr_assert(!p.has_connid);

	Buf a{};
	Writer wa(a.b, sizeof a.b);
	AtomRsp *ar = wa.header<AtomRsp>(Type::AtomRsp, 0);
	ar->recv_id = 21;
	ar->seg_length = 8;
	cr_assert(wa.u64(0x1234));
	cr_assert_eq(u32(a, 12), 21u, "ATOMRSP: recv_id at 12, after reserved");
	cr_assert_eq(u64(a, 16), 8u);
	p = parsed(a, wa.size());
	cr_assert_eq(p.payload_len, 8u);
	assert_truncations_refused(a, 24);
}

Test(v4, handshake_extra_info_and_optional_fields_in_order)
{
	Buf b{};
	Writer w(b.b, sizeof b.b);
	Handshake *h = w.header<Handshake>(Type::Handshake, kFlagConnId | kHsHostId | kHsDeviceVersion);
	h->nextra_p3 = 3 + 1;
	const uint64_t extra = kExtraRdmaRead | kExtraDeliveryComplete | kExtraConnIdHeader | kExtraRunt;
	cr_assert(w.extra_info(&extra, 1));
	cr_assert(w.u32(0xbeef));
	cr_assert(w.u32(0)); /* connid, padded to 8 */
	cr_assert(w.u64(0x1122334455667788ull));
	cr_assert(w.u32(0xefa2));
	cr_assert(w.u32(0)); /* device_version, padded to 8 */
	cr_assert_eq(w.size(), 8u + 8 + 8 + 8 + 8);
	expect_base(b, 9, 0x8003);
	cr_assert_eq(u32(b, 4), 4u, "nextra_p3");
	cr_assert_eq(u64(b, 8), extra);
	cr_assert_eq(u32(b, 16), 0xbeefu, "connid first after extra_info");
	cr_assert_eq(u64(b, 24), 0x1122334455667788ull, "then host_id");
	cr_assert_eq(u32(b, 32), 0xefa2u, "then device_version");
	const Packet p = parsed(b, w.size());
	cr_assert_eq(p.extra_count, 1u);
	cr_assert(p.extra(0));
	cr_assert(p.extra(3));
	cr_assert(!p.extra(5), "no RDMA write announced");
	cr_assert(!p.extra(64), "a bit beyond extra_info is not set");
	cr_assert_eq(p.connid, 0xbeefu);
	cr_assert_eq(p.host_id, 0x1122334455667788ull);
	cr_assert_eq(p.device_version, 0xefa2u);
	assert_truncations_refused(b, w.size());
	/* A legacy user-recv-QP field is parsed (it is last). */
	Buf c{};
	Writer wc(c.b, sizeof c.b);
	Handshake *hc = wc.header<Handshake>(Type::Handshake, kHsUserRecvQp);
	hc->nextra_p3 = 3;
	cr_assert(wc.u32(17));
	cr_assert(wc.u32(0x5a5a));
	const Packet q = parsed(c, wc.size());
	cr_assert_eq(q.extra_count, 0u);
	cr_assert(q.has_user_recv_qp);
	cr_assert_eq(q.user_recv_qpn, 17u);
	cr_assert_eq(q.user_recv_qkey, 0x5a5au);
	/* nextra_p3 below 3, or more members than the packet holds. */
	hc->nextra_p3 = 2;
	Packet r;
	cr_assert_eq(parse(c.b, wc.size(), r), Error::Length);
	hc->nextra_p3 = 3 + 100;
	cr_assert_eq(parse(c.b, wc.size(), r), Error::Length);
}

/* Our HANDSHAKE as write_handshake builds it (Ep::send_handshake), and what
 * decode_handshake reads of ours and of one as upstream sends it. */
Test(v4, our_handshake_and_its_extension_mark)
{
	Buf b{};
	const uint64_t f = kExtraRdmaRead | kExtraDeliveryComplete | kExtraConnIdHeader;
	const size_t n = efa::rdm::write_handshake(b.b, sizeof b.b, f, 0xc0ffee, 0xefa1);
	cr_assert_eq(n, 8u + 8 + 8 + 8 + 8, "base + nextra_p3, one extra_info word, connid (8), device version (8), mark (8)");
	expect_base(b, 9, kFlagConnId | kHsDeviceVersion);
	cr_assert_eq(u32(b, 4), 4u);
	cr_assert_eq(u64(b, 8), f);
	cr_assert_eq(u32(b, 16), 0xc0ffeeu);
	cr_assert_eq(u32(b, 24), 0xefa1u, "device_version, as upstream always reads it");
	cr_assert_eq(std::memcmp(b.b + 32, kExtMagic, sizeof kExtMagic), 0);
	const Packet p = parsed(b, n);
	efa::rdm::HandshakeInfo hs;
	cr_assert_eq(efa::rdm::decode_handshake(p, hs), Error::None);
	cr_assert_eq(hs.features, f);
	cr_assert(hs.ext);
	cr_assert(p.has_connid && p.connid == 0xc0ffeeu);
	cr_assert(p.has_device_version && p.device_version == 0xefa1u);
	/* Too small a buffer: nothing written. */
	cr_assert_eq(efa::rdm::write_handshake(b.b, 39, f, 1, 2), 0u);
	/* As upstream sends it: host_id and device_version, two extra_info words, no mark. */
	Buf u{};
	Writer w(u.b, sizeof u.b);
	w.header<Handshake>(Type::Handshake, kFlagConnId | kHsHostId | kHsDeviceVersion)->nextra_p3 = 5;
	const uint64_t extra[2] = {kExtraRdmaRead | kExtraRunt, 1};
	cr_assert(w.extra_info(extra, 2));
	cr_assert(w.u64(7));
	cr_assert(w.u64(0xabc));
	cr_assert(w.u64(0xefa1));
	const Packet q = parsed(u, w.size());
	cr_assert_eq(efa::rdm::decode_handshake(q, hs), Error::None);
	cr_assert_eq(hs.features, extra[0], "word 0 is what the endpoint keeps");
	cr_assert(!hs.ext);
	/* No extra_info at all (nextra_p3 3): no features. */
	Buf z{};
	Writer wz(z.b, sizeof z.b);
	wz.header<Handshake>(Type::Handshake, 0)->nextra_p3 = 3;
	const Packet r = parsed(z, wz.size());
	cr_assert_eq(efa::rdm::decode_handshake(r, hs), Error::None);
	cr_assert_eq(hs.features, 0u);
	cr_assert(!hs.ext);
}

/* Our extension's packets (wire.h): type numbers outside v4's, the connid at byte 4. */
Test(v4, extension_packets)
{
	cr_assert(!type_info(200).req && type_info(200).known);
	cr_assert(!type_info(201).req && type_info(201).known);
	cr_assert(!type_info(202).req && type_info(202).known);
	cr_assert(!type_info(199).known && !type_info(203).known);
	Buf b{};
	Writer w(b.b, sizeof b.b);
	ExtError *e = w.header<ExtError>(Type::ExtError, kFlagConnId);
	e->connid = 0x77;
	e->op_id = 0x80000005;
	e->err = 13;
	expect_base(b, 200, kFlagConnId);
	cr_assert_eq(u32(b, 8), 0x80000005u);
	cr_assert_eq(u32(b, 12), 13u);
	Packet p = parsed(b, w.size());
	cr_assert(p.has_connid && p.connid == 0x77u);
	assert_truncations_refused(b, 16);
	Buf c{};
	Writer wc(c.b, sizeof c.b);
	ExtVoid *v = wc.header<ExtVoid>(Type::ExtVoid, kFlagConnId);
	v->connid = 0x78;
	v->msg_id = 41;
	v->count = 3;
	expect_base(c, 201, kFlagConnId);
	p = parsed(c, wc.size());
	cr_assert(efa::rdm::is_ordered(p), "EXT_VOID passes the reorder buffer");
	cr_assert_eq(efa::rdm::msg_id_of(p), 41u);
	cr_assert_eq(u32(c, 12), 3u);
	assert_truncations_refused(c, 16);
	Buf d{};
	Writer wd(d.b, sizeof d.b);
	ExtWriteData *x = wd.header<ExtWriteData>(Type::ExtWriteData, kFlagConnId);
	x->connid = 0x79;
	x->cq_data = 0xfeed;
	x->length = 70000;
	expect_base(d, 202, kFlagConnId);
	cr_assert_eq(u64(d, 8), 0xfeedu);
	cr_assert_eq(u64(d, 16), 70000u);
	p = parsed(d, wd.size());
	cr_assert(p.has_connid && p.connid == 0x79u);
	assert_truncations_refused(d, 24);
}

Test(v4, refusals)
{
	Buf b{};
	Writer w(b.b, sizeof b.b);
	EagerRtm *h = w.header<EagerRtm>(Type::EagerMsgRtm, kReqRawAddr | kFlagConnId | kReqMsg);
	h->r.msg_id = 1;
	cr_assert(w.raw_addr(some_addr()));
	cr_assert(w.connid(5));
	Packet p;
	cr_assert_eq(parse(b.b, w.size(), p), Error::Flags, "a raw address and a connid header together");

	b.b[0] = 64;
	b.b[1] = 3;
	cr_assert_eq(parse(b.b, w.size(), p), Error::Version);
	b.b[1] = 1; /* our former protocol */
	cr_assert_eq(parse(b.b, w.size(), p), Error::Version);
	b.b[1] = 4;
	b.b[0] = 131; /* READ_RTR: reserved */
	cr_assert_eq(parse(b.b, w.size(), p), Error::Type);

	/* A raw address header whose addr_len is shorter than an address. */
	Buf c{};
	Writer wc(c.b, sizeof c.b);
	wc.header<EagerRtm>(Type::EagerMsgRtm, kReqRawAddr | kReqMsg);
	cr_assert(wc.u32(16));
	cr_assert(wc.bytes(std::vector<uint8_t>(40, 0).data(), 40));
	cr_assert_eq(parse(c.b, wc.size(), p), Error::Addr);
	/* addr_len past the packet. */
	std::memset(c.b + 8, 0, 4);
	const uint32_t big = 400;
	std::memcpy(c.b + 8, &big, 4);
	cr_assert_eq(parse(c.b, wc.size(), p), Error::Length);

	/* The writer refuses what does not fit. */
	uint8_t small[10];
	Writer ws(small, sizeof small);
	cr_assert_not_null(ws.header<EagerRtm>(Type::EagerMsgRtm, 0));
	cr_assert(!ws.u64(1));
	cr_assert(!ws.ok());
	cr_assert(!ws.bytes("x", 1), "a failed writer stays failed");
}

namespace {

/* parse_eager answers true only for what parse() accepts, with the same fields. */
void expect_eager_agrees(const uint8_t *buf, size_t len)
{
	Eager e;
	if (!parse_eager(buf, len, e))
		return;
	Packet p;
	const Error err = parse(buf, len, p);
	cr_assert_eq(err, Error::None, "parse_eager took a %zu-byte packet parse refuses (%s)", len, error_str(err));
	cr_assert(p.type == Type::EagerMsgRtm || p.type == Type::EagerTagRtm);
	cr_assert_eq(e.tagged, p.info.tagged);
	cr_assert_eq(e.msg_id, rdm::msg_id_of(p));
	cr_assert_eq(e.tag, p.tag);
	cr_assert_eq(e.has_cq_data, p.has_cq_data);
	cr_assert_eq(e.cq_data, p.cq_data);
	cr_assert(p.has_connid);
	cr_assert_eq(e.connid, p.connid);
	cr_assert_eq(e.payload, p.payload);
	cr_assert_eq(e.payload_len, p.payload_len);
}

} // namespace

Test(v4, parse_eager_is_parse_for_the_common_small_message)
{
	int taken = 0;
	for (const bool tagged : {false, true}) {
		for (const bool data : {false, true}) {
			for (const size_t n : {size_t(0), size_t(1), size_t(100)}) {
				Buf b{};
				Writer w(b.b, sizeof b.b);
				const uint16_t flags = uint16_t(kFlagConnId | kReqMsg | (tagged ? kReqTagged : 0) |
								(data ? kReqCqData : 0));
				EagerRtm *h = w.header<EagerRtm>(tagged ? Type::EagerTagRtm : Type::EagerMsgRtm, flags);
				h->r.msg_id = 0x01020304u + uint32_t(n);
				if (tagged)
					cr_assert(w.u64(0x1122334455667788ull));
				if (data)
					cr_assert(w.cq_data(0xabcd0123u));
				cr_assert(w.connid(0xc0ffee));
				cr_assert(w.bytes(std::vector<uint8_t>(n, 0x5a).data(), n));
				const size_t len = w.size();
				Eager e;
				cr_assert(parse_eager(b.b, len, e), "tagged %d, data %d, %zu bytes: not taken", tagged, data, n);
				cr_assert_eq(e.payload_len, n);
				cr_assert_eq(e.connid, 0xc0ffeeu);
				expect_eager_agrees(b.b, len);
				taken++;
				/* Every prefix, and every other flag bit set: taken only as parse reads it. */
				for (size_t k = 0; k < len; k++)
					expect_eager_agrees(b.b, k);
				for (unsigned bit = 0; bit < 16; bit++) {
					Buf c = b;
					c.b[2 + bit / 8] ^= uint8_t(1u << (bit % 8));
					expect_eager_agrees(c.b, len);
				}
			}
		}
	}
	cr_assert_eq(taken, 12);

	/* What the shortcut leaves to parse: a raw address, no connid, delivery complete,
	 * another type, another version. */
	Buf b{};
	Writer w(b.b, sizeof b.b);
	w.header<EagerRtm>(Type::EagerMsgRtm, kReqRawAddr | kReqMsg);
	cr_assert(w.raw_addr(some_addr()));
	cr_assert(w.bytes("x", 1));
	Eager e;
	cr_assert_not(parse_eager(b.b, w.size(), e), "a REQ with the raw address");
	Buf c{};
	Writer wc(c.b, sizeof c.b);
	wc.header<EagerRtm>(Type::EagerMsgRtm, kReqMsg);
	cr_assert(wc.bytes("xxxxxxxx", 8));
	cr_assert_not(parse_eager(c.b, wc.size(), e), "without the connid header");
	Packet p;
	cr_assert_eq(parse(c.b, wc.size(), p), Error::None, "which parse reads");
	c.b[1] = 3;
	cr_assert_not(parse_eager(c.b, wc.size(), e), "version 3");
	Buf d{};
	Writer wd(d.b, sizeof d.b);
	wd.header<DcEagerRtm>(Type::DcEagerMsgRtm, kFlagConnId | kReqMsg);
	cr_assert(wd.connid(1));
	cr_assert_not(parse_eager(d.b, wd.size(), e), "delivery complete");
	d.b[0] = uint8_t(Type::MediumMsgRtm);
	cr_assert_not(parse_eager(d.b, wd.size(), e), "MEDIUM");
}
