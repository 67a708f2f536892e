/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * efa::rdm::parse() on one received packet (docs/protocol.md sections 3, 5, 6). For an
 * accepted packet: every pointer in Parsed lies inside the packet, the pieces tile it
 * exactly, every byte they name is read, and the lengths the handlers trust (segment
 * within the message, iov total = message length) hold, checked by copying the payload
 * where a receiver would put it, into a buffer of exactly the announced size.
 */
#include "fuzz.h"

#include "rdm/pkt.h"

using namespace efa::rdm;
using efa::fuzz::consume;
using efa::fuzz::inside;

namespace {

constexpr uint64_t kMaxModelled = 1u << 16; /* larger targets: bounds checked, not copied */

/* payload at `off` of a message of msg_len bytes, as the receiver copies it. */
void place(const Parsed &pk, uint64_t off, uint64_t msg_len)
{
	if (msg_len > kMaxModelled)
		return;
	std::unique_ptr<uint8_t[]> msg(new uint8_t[msg_len ? msg_len : 1]);
	if (pk.payload_len)
		std::memcpy(msg.get() + off, pk.payload, pk.payload_len);
	consume(msg.get(), msg_len);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	auto buf = efa::fuzz::exact_copy(data, size);
	Parsed pk;
	const ParseError e = parse(buf.get(), size, pk);
	FUZZ_CHECK(parse_error_str(e) != nullptr);
	if (e != ParseError::None)
		return 0;

	const size_t hdr = hdr_size(pk.type);
	FUZZ_CHECK(hdr >= sizeof(BaseHdr));
	FUZZ_CHECK(pk.base == pk.hdr && pk.hdr == buf.get());
	FUZZ_CHECK(inside(pk.hdr, hdr, buf.get(), size));
	consume(pk.hdr, hdr);
	consume(pkt_type_name(pk.type), 1);

	/* The pieces follow each other in the order of section 3 and end with the packet. */
	const uint8_t *at = buf.get() + hdr;
	if (pk.raw_addr) {
		FUZZ_CHECK(pk.base->flags & kFlagRawAddr);
		FUZZ_CHECK(reinterpret_cast<const uint8_t *>(pk.raw_addr) == at);
		FUZZ_CHECK(inside(pk.raw_addr, sizeof(efa::RawAddr), buf.get(), size));
		consume(*pk.raw_addr);
		at += sizeof(efa::RawAddr);
	}
	FUZZ_CHECK(pk.has_cq_data == bool(pk.base->flags & kFlagCqData));
	if (pk.has_cq_data) {
		FUZZ_CHECK(inside(at, kCqDataLen, buf.get(), size));
		FUZZ_CHECK(std::memcmp(at, &pk.cq_data, kCqDataLen) == 0);
		at += kCqDataLen;
	}
	FUZZ_CHECK((pk.iov != nullptr) == (pk.iov_count != 0));
	FUZZ_CHECK(pk.iov_count <= kMaxRmaIov);
	if (pk.iov_count) {
		FUZZ_CHECK(reinterpret_cast<const uint8_t *>(pk.iov) == at);
		FUZZ_CHECK(inside(pk.iov, pk.iov_count * sizeof(RmaIov), buf.get(), size));
		for (uint32_t i = 0; i < pk.iov_count; i++)
			consume(pk.iov[i]);
		at += pk.iov_count * sizeof(RmaIov);
	}
	FUZZ_CHECK(pk.payload == at);
	FUZZ_CHECK(pk.payload_len == size - size_t(at - buf.get()));
	consume(pk.payload, pk.payload_len);

	/* What the handlers rely on, per type. The iov total of an RMA or LONGREAD request
	 * does not overflow (ATOMIC_REQ's single iov is checked by the atomic layer). */
	uint64_t total = 0;
	bool total_ok = true;
	for (uint32_t i = 0; i < pk.iov_count; i++) {
		total_ok = total_ok && pk.iov[i].len <= UINT64_MAX - total;
		total += pk.iov[i].len;
	}
	if (pk.type != PktType::AtomicReq)
		FUZZ_CHECK(total_ok);
	switch (pk.type) {
	case PktType::EagerMsg:
	case PktType::EagerTag:
		FUZZ_CHECK(pk.as<EagerHdr>().rtm.seg_len == pk.payload_len);
		if (pk.base->flags & kFlagVoid) /* a VOID run: no payload, 1..kMaxVoidRun ids */
			FUZZ_CHECK(!pk.payload_len && pk.as<EagerHdr>().rtm.tag >= 1 &&
				   pk.as<EagerHdr>().rtm.tag <= kMaxVoidRun);
		place(pk, 0, pk.payload_len);
		break;
	case PktType::MediumMsg:
	case PktType::MediumTag: {
		const MediumHdr &h = pk.as<MediumHdr>();
		FUZZ_CHECK(h.rtm.seg_len == pk.payload_len && pk.payload_len);
		place(pk, h.seg_off, h.msg_len);
		break;
	}
	case PktType::LongCtsMsg:
	case PktType::LongCtsTag:
		place(pk, 0, pk.as<LongCtsHdr>().msg_len);
		break;
	case PktType::LongReadMsg:
	case PktType::LongReadTag:
		FUZZ_CHECK(pk.iov_count && total == pk.as<LongReadHdr>().msg_len && !pk.payload_len);
		break;
	case PktType::WriteReq: {
		const WriteReqHdr &h = pk.as<WriteReqHdr>();
		FUZZ_CHECK(pk.iov_count && total == h.msg_len && h.seg_len == pk.payload_len);
		place(pk, 0, h.msg_len);
		break;
	}
	case PktType::ReadReq:
		FUZZ_CHECK(pk.iov_count && total == pk.as<ReadReqHdr>().msg_len && pk.as<ReadReqHdr>().window);
		break;
	case PktType::AtomicReq:
		FUZZ_CHECK(pk.iov_count && pk.as<AtomicReqHdr>().count);
		FUZZ_CHECK(pk.as<AtomicReqHdr>().kind <= uint8_t(AtomicKind::Compare));
		break;
	case PktType::Data: {
		const DataHdr &h = pk.as<DataHdr>();
		FUZZ_CHECK(h.seg_len == pk.payload_len && pk.payload_len && h.seg_off <= UINT64_MAX - pk.payload_len);
		break;
	}
	case PktType::ReadRsp: {
		const ReadRspHdr &h = pk.as<ReadRspHdr>();
		FUZZ_CHECK(h.seg_len == pk.payload_len && pk.payload_len && h.seg_off <= UINT64_MAX - pk.payload_len);
		break;
	}
	case PktType::AtomRsp:
		FUZZ_CHECK(pk.as<RspHdr>().seg_len == pk.payload_len);
		break;
	case PktType::Cts:
		FUZZ_CHECK(pk.as<CtsHdr>().window && !pk.payload_len);
		break;
	case PktType::Error:
		FUZZ_CHECK(pk.as<ErrorHdr>().err && !pk.payload_len);
		break;
	case PktType::WriteData:
		FUZZ_CHECK(pk.has_cq_data && !pk.payload_len);
		break;
	case PktType::Handshake:
	case PktType::Eor:
	case PktType::Receipt:
		FUZZ_CHECK(!pk.payload_len);
		break;
	}
	return 0;
}
