/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * efa::rdm::v4::parse() on one received packet (docs/protocol.md). For an accepted
 * packet: every pointer in Packet lies inside the packet, the pieces follow each other
 * in the protocol's order (mandatory header, RMA iovs, raw address, CQ data, connid,
 * read iovs, data) and end with it (or, for a packet whose header names its data's
 * length, within it), every byte they name is read, and the lengths a receiver trusts
 * hold (a segment inside its message).
 */
#include "fuzz.h"

#include "rdm/v4/codec.h"

using namespace efa::rdm::v4;
using efa::fuzz::consume;
using efa::fuzz::inside;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* At an odd address half the time: the parser may not assume any alignment. */
	const size_t odd = size && (data[0] & 1) ? 1 : 0;
	std::unique_ptr<uint8_t[]> buf(new uint8_t[size + odd ? size + odd : 1]); /* ends where the input ends */
	if (size)
		std::memcpy(buf.get() + odd, data, size);
	const uint8_t *start = buf.get() + odd;
	Packet p;
	const Error e = parse(start, size, p);
	FUZZ_CHECK(error_str(e) != nullptr);
	if (e != Error::None)
		return 0;
	FUZZ_CHECK(p.info.known && p.hdr == start);
	uint16_t flags;
	std::memcpy(&flags, start + 2, 2);
	FUZZ_CHECK(p.flags == flags);
	FUZZ_CHECK(inside(p.hdr, p.info.hdr, start, size));
	consume(p.hdr, p.info.hdr);
	consume(type_name(p.type), 1);

	const uint8_t *at = start + p.info.hdr;
	FUZZ_CHECK(!p.rma_iov_count || p.rma_iov);
	FUZZ_CHECK(p.rma_iov_count <= kMaxIov && p.read_iov_count <= kMaxIov);
	if (p.rma_iov_count) {
		FUZZ_CHECK(p.rma_iov == at);
		FUZZ_CHECK(inside(p.rma_iov, p.rma_iov_count * sizeof(RmaIov), start, size));
		for (uint32_t i = 0; i < p.rma_iov_count; i++)
			consume(p.rma(i));
		at += p.rma_iov_count * sizeof(RmaIov);
	}
	if (p.info.req) {
		FUZZ_CHECK(!(p.has_raw_addr && (p.flags & kFlagConnId)));
		FUZZ_CHECK(p.has_raw_addr == bool(p.flags & kReqRawAddr));
		if (p.has_raw_addr) {
			FUZZ_CHECK(std::memcmp(&p.raw_addr, at + 4, sizeof(efa::RawAddr)) == 0);
			uint32_t alen;
			std::memcpy(&alen, at, 4);
			FUZZ_CHECK(alen >= sizeof(efa::RawAddr) && inside(at, 4 + size_t(alen), start, size));
			consume(at, 4 + size_t(alen));
			at += 4 + size_t(alen);
		}
		FUZZ_CHECK(p.has_cq_data == bool(p.flags & kReqCqData));
		if (p.has_cq_data) {
			FUZZ_CHECK(inside(at, kCqDataLen, start, size) && std::memcmp(at, &p.cq_data, 8) == 0);
			at += kCqDataLen;
		}
		if (p.flags & kFlagConnId) {
			FUZZ_CHECK(inside(at, 4, start, size) && std::memcmp(at, &p.connid, 4) == 0);
			at += 4;
		}
		if (p.read_iov_count) {
			FUZZ_CHECK(p.read_iov == at);
			FUZZ_CHECK(inside(p.read_iov, p.read_iov_count * sizeof(RmaIov), start, size));
			for (uint32_t i = 0; i < p.read_iov_count; i++)
				consume(p.read(i));
			at += p.read_iov_count * sizeof(RmaIov);
		}
		FUZZ_CHECK(p.payload == at && p.payload_len == size - size_t(at - start));
	} else if (p.type == Type::Handshake) {
		FUZZ_CHECK(inside(p.extra_info, size_t(p.extra_count) * 8, start, size));
		consume(p.extra_info, size_t(p.extra_count) * 8);
		for (unsigned bit = 0; bit < 200; bit++)
			consume(p.extra(bit));
		FUZZ_CHECK(inside(p.payload, p.payload_len, start, size));
		FUZZ_CHECK(p.payload + p.payload_len == start + size);
	} else {
		FUZZ_CHECK(inside(p.payload, p.payload_len, start, size));
		FUZZ_CHECK(p.payload >= at);
	}
	consume(p.payload, p.payload_len);

	/* A segment lies inside its message. */
	uint64_t msg_len = 0, off = 0;
	switch (p.type) {
	case Type::MediumMsgRtm:
	case Type::MediumTagRtm:
		msg_len = p.as<MediumRtm>().msg_length;
		off = p.as<MediumRtm>().seg_offset;
		FUZZ_CHECK(off <= msg_len && p.payload_len <= msg_len - off);
		break;
	case Type::DcMediumMsgRtm:
	case Type::DcMediumTagRtm:
		msg_len = p.as<DcMediumRtm>().msg_length;
		off = p.as<DcMediumRtm>().seg_offset;
		FUZZ_CHECK(off <= msg_len && p.payload_len <= msg_len - off);
		break;
	case Type::RuntCtsMsgRtm:
	case Type::RuntCtsTagRtm:
	case Type::RuntReadMsgRtm:
	case Type::RuntReadTagRtm:
		msg_len = p.as<RuntRtm>().msg_length;
		off = p.as<RuntRtm>().seg_offset;
		FUZZ_CHECK(off <= msg_len && p.payload_len <= msg_len - off);
		FUZZ_CHECK(p.as<RuntRtm>().runt_length <= msg_len);
		break;
	case Type::CtsData:
		FUZZ_CHECK(p.payload_len == p.as<CtsData>().seg_length);
		break;
	case Type::ReadRsp:
		FUZZ_CHECK(p.payload_len == p.as<ReadRsp>().seg_length);
		break;
	case Type::AtomRsp:
		FUZZ_CHECK(p.payload_len == p.as<AtomRsp>().seg_length);
		break;
	default: break;
	}
	return 0;
}
