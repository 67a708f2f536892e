/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The RDM endpoint's view of its packets: upstream's protocol v4 (rdm/v4/wire.h for the
 * bytes, rdm/v4/codec.h for checking and building them; docs/protocol.md for what we
 * implement of it), plus the few facts the endpoint derives from a parsed packet: the
 * sizes its protocol choice depends on, the message id of an ordered request, and the
 * HANDSHAKE's meaning.
 *
 * Invariant: a packet that v4::parse accepts can be consumed through Parsed alone
 * without reading outside the received bytes.
 */
#ifndef EFA_RDM_PKT_H
#define EFA_RDM_PKT_H

#include "addr.h"
#include "rdm/v4/codec.h"

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace efa::rdm {

static_assert(std::endian::native == std::endian::little,
	      "the protocol is little-endian and the provider does not byte-swap");

using v4::Type;
using Parsed = v4::Packet;
using RmaIov = v4::RmaIov;

inline const char *pkt_type_name(uint8_t t) { return v4::type_name(Type(t)); }

/* The most RMA iovs one request carries (and accepts). */
inline constexpr uint32_t kMaxRmaIov = 4;
inline constexpr size_t kCqDataLen = v4::kCqDataLen;

/* The largest mandatory header of each message protocol (delivery complete and tagged
 * included): the payload of its packets is what the MTU leaves after it and the
 * optional headers. */
inline constexpr size_t kEagerHdrMax = sizeof(v4::DcEagerRtm) + 8;
inline constexpr size_t kMediumHdrMax = sizeof(v4::DcMediumRtm) + 8;
inline constexpr size_t kLongCtsHdrMax = sizeof(v4::LongCtsRtm) + 8;
/* CTSDATA with its connid, and READRSP: the data packets of a window. */
inline constexpr size_t kCtsDataHdr = sizeof(v4::CtsData) + 8;
inline constexpr size_t kReadRspHdr = sizeof(v4::ReadRsp);
/* The optional headers of a REQ: the raw address until the peer's HANDSHAKE arrived
 * (then the connid header), and the CQ data. */
inline size_t req_opt_len(bool raw_addr, bool cq_data)
{
	return (raw_addr ? v4::kReqRawAddrLen : v4::kReqConnIdLen) + (cq_data ? kCqDataLen : 0);
}
inline constexpr size_t kReqOptMax = v4::kReqRawAddrLen + kCqDataLen;

/* The most message ids one EXT_VOID consumes. */
inline constexpr uint32_t kMaxVoidRun = 1024;

/* Requests that carry a message id and pass the reorder buffer: the RTMs, the RTAs and
 * our EXT_VOID. */
inline bool is_ordered(const Parsed &pk)
{
	return pk.info.family == v4::Family::Rtm || pk.info.family == v4::Family::Rta || pk.type == Type::ExtVoid;
}
inline uint32_t msg_id_of(const Parsed &pk)
{
	uint32_t id;
	/* RtmBase::msg_id, Rta::msg_id and ExtVoid::msg_id lie at different offsets. */
	const size_t at = pk.info.family == v4::Family::Rtm ? offsetof(v4::RtmBase, msg_id)
			  : pk.info.family == v4::Family::Rta ? offsetof(v4::Rta, msg_id)
							      : offsetof(v4::ExtVoid, msg_id);
	std::memcpy(&id, static_cast<const uint8_t *>(pk.hdr) + at, sizeof id);
	return id;
}
inline bool is_medium(Type t)
{
	return t == Type::MediumMsgRtm || t == Type::MediumTagRtm || t == Type::DcMediumMsgRtm ||
	       t == Type::DcMediumTagRtm;
}
inline bool is_runtread_rtm(Type t) { return t == Type::RuntReadMsgRtm || t == Type::RuntReadTagRtm; }
/* Several packets per message id, told apart by their offset: MEDIUM and RUNTREAD. */
inline bool is_segmented(Type t) { return is_medium(t) || is_runtread_rtm(t); }

/* The type of a REQ: `base` is the untagged member of its family without delivery
 * complete (EAGER, MEDIUM, LONGCTS or LONGREAD MSGRTM); the tagged twin is the next
 * number, the DC twin of EAGER, MEDIUM and LONGCTS lies 69 further. */
inline Type rtm_type(Type base, bool tagged, bool dc)
{
	return Type(uint8_t(base) + (dc ? 69 : 0) + (tagged ? 1 : 0));
}
static_assert(uint8_t(Type::EagerMsgRtm) + 69 == uint8_t(Type::DcEagerMsgRtm) &&
	      uint8_t(Type::MediumMsgRtm) + 69 == uint8_t(Type::DcMediumMsgRtm) &&
	      uint8_t(Type::LongCtsMsgRtm) + 69 == uint8_t(Type::DcLongCtsMsgRtm));

/* Where the data of a MEDIUM segment, a CTSDATA or a READRSP goes in its message. */
inline uint64_t data_offset(const Parsed &pk)
{
	switch (pk.type) {
	case Type::MediumMsgRtm:
	case Type::MediumTagRtm: return pk.as<v4::MediumRtm>().seg_offset;
	case Type::DcMediumMsgRtm:
	case Type::DcMediumTagRtm: return pk.as<v4::DcMediumRtm>().seg_offset;
	case Type::CtsData: return pk.as<v4::CtsData>().seg_offset;
	case Type::RuntReadMsgRtm:
	case Type::RuntReadTagRtm: return pk.as<v4::RuntRtm>().seg_offset;
	default: return 0; /* READRSP: the first bytes; one-packet REQs */
	}
}

/* What a HANDSHAKE says about its sender, once checked. */
struct HandshakeInfo {
	uint64_t features = 0; /* extra_info word 0: the v4 extra features and requests */
	bool ext = false;      /* it takes our extension (v4/wire.h, kExtMagic) */
};

/* Interprets a HANDSHAKE that v4::parse accepted. */
v4::Error decode_handshake(const Parsed &pk, HandshakeInfo &out);

/* Writes our HANDSHAKE: `features` as extra_info word 0, our connid, our device's
 * version (its vendor_part_id: upstream reads this field from every HANDSHAKE), then
 * kExtMagic. Returns its length, or 0 when it does not fit. */
size_t write_handshake(void *buf, size_t cap, uint64_t features, uint32_t connid, uint32_t device_version);

} // namespace efa::rdm

#endif
