/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* Packet checks (docs/protocol.md sections 3 and 6). */
#include "rdm/pkt.h"

#include <cstring>

namespace efa::rdm {

namespace {

struct TypeInfo {
	const char *name;
	size_t hdr;
	uint16_t flags; /* allowed base header flags */
	bool req;
	bool ordered;
};

constexpr uint16_t kReqMsgFlags = kFlagRawAddr | kFlagCqData | kFlagDeliveryComplete;

TypeInfo info_of(PktType t)
{
	switch (t) {
	case PktType::Handshake: return {"HANDSHAKE", sizeof(HandshakeHdr), kFlagRawAddr, false, false};
	case PktType::Cts: return {"CTS", sizeof(CtsHdr), 0, false, false};
	case PktType::Data: return {"DATA", sizeof(DataHdr), 0, false, false};
	case PktType::Eor: return {"EOR", sizeof(EorHdr), 0, false, false};
	case PktType::Receipt: return {"RECEIPT", sizeof(ReceiptHdr), 0, false, false};
	case PktType::ReadRsp: return {"READRSP", sizeof(ReadRspHdr), 0, false, false};
	case PktType::AtomRsp: return {"ATOMRSP", sizeof(RspHdr), 0, false, false};
	case PktType::Error: return {"ERROR", sizeof(ErrorHdr), 0, false, false};
	case PktType::WriteData: return {"WRITE_DATA", sizeof(WriteDataHdr), kFlagCqData, false, false};
	case PktType::EagerMsg: return {"EAGER_MSG", sizeof(EagerHdr), kReqMsgFlags | kFlagVoid, true, true};
	case PktType::EagerTag: return {"EAGER_TAG", sizeof(EagerHdr), kReqMsgFlags | kFlagVoid, true, true};
	case PktType::MediumMsg: return {"MEDIUM_MSG", sizeof(MediumHdr), kReqMsgFlags, true, true};
	case PktType::MediumTag: return {"MEDIUM_TAG", sizeof(MediumHdr), kReqMsgFlags, true, true};
	case PktType::LongCtsMsg: return {"LONGCTS_MSG", sizeof(LongCtsHdr), kReqMsgFlags, true, true};
	case PktType::LongCtsTag: return {"LONGCTS_TAG", sizeof(LongCtsHdr), kReqMsgFlags, true, true};
	case PktType::LongReadMsg: return {"LONGREAD_MSG", sizeof(LongReadHdr), kReqMsgFlags, true, true};
	case PktType::LongReadTag: return {"LONGREAD_TAG", sizeof(LongReadHdr), kReqMsgFlags, true, true};
	case PktType::WriteReq: return {"WRITE_REQ", sizeof(WriteReqHdr), kReqMsgFlags, true, false};
	case PktType::ReadReq: return {"READ_REQ", sizeof(ReadReqHdr), kFlagRawAddr, true, false};
	case PktType::AtomicReq: return {"ATOMIC_REQ", sizeof(AtomicReqHdr), kReqMsgFlags, true, true};
	}
	return {nullptr, 0, 0, false, false};
}

/* a + b <= limit, without overflow. */
bool fits(uint64_t a, uint64_t b, uint64_t limit) { return a <= limit && b <= limit - a; }

/* The iovs' total length, or false when it overflows. */
bool iov_total(const RmaIov *iov, uint32_t n, uint64_t &total)
{
	total = 0;
	for (uint32_t i = 0; i < n; i++) {
		if (iov[i].len > UINT64_MAX - total)
			return false;
		total += iov[i].len;
	}
	return true;
}

} // namespace

const char *pkt_type_name(PktType t)
{
	const char *n = info_of(t).name;
	return n ? n : "UNKNOWN";
}

size_t hdr_size(PktType t) { return info_of(t).hdr; }
bool is_req(PktType t) { return info_of(t).req; }
bool is_ordered(PktType t) { return info_of(t).ordered; }

const char *parse_error_str(ParseError e)
{
	switch (e) {
	case ParseError::None: return "no error";
	case ParseError::Short: return "packet shorter than its header";
	case ParseError::Version: return "unknown protocol version";
	case ParseError::Type: return "unknown packet type";
	case ParseError::Flags: return "flag not allowed for the packet type";
	case ParseError::Length: return "length or offset inconsistent with the packet";
	case ParseError::IovCount: return "RMA iov count out of range";
	case ParseError::Addr: return "handshake without a consistent sender address";
	}
	return "?";
}

ParseError parse(const void *buf, size_t len, Parsed &out)
{
	const uint8_t *p = static_cast<const uint8_t *>(buf);
	if (len < sizeof(BaseHdr))
		return ParseError::Short;
	const BaseHdr *base = reinterpret_cast<const BaseHdr *>(p);
	if (base->version != kProtoVersion)
		return ParseError::Version;
	const PktType type = PktType(base->type);
	const TypeInfo ti = info_of(type);
	if (!ti.name)
		return ParseError::Type;
	if (len < ti.hdr)
		return ParseError::Short;
	if (base->flags & ~ti.flags)
		return ParseError::Flags;

	Parsed r;
	r.type = type;
	r.base = base;
	r.hdr = p;
	size_t off = ti.hdr;
	/* Optional headers, in flag-bit order (section 3). */
	if (base->flags & kFlagRawAddr) {
		if (len - off < sizeof(RawAddr))
			return ParseError::Short;
		r.raw_addr = reinterpret_cast<const RawAddr *>(p + off);
		off += sizeof(RawAddr);
	}
	if (base->flags & kFlagCqData) {
		if (len - off < kCqDataLen)
			return ParseError::Short;
		std::memcpy(&r.cq_data, p + off, kCqDataLen);
		r.has_cq_data = true;
		off += kCqDataLen;
	}
	/* RMA iovs. */
	uint32_t iov_count = 0;
	switch (type) {
	case PktType::LongReadMsg:
	case PktType::LongReadTag: iov_count = r.as<LongReadHdr>().iov_count; break;
	case PktType::WriteReq: iov_count = r.as<WriteReqHdr>().iov_count; break;
	case PktType::ReadReq: iov_count = r.as<ReadReqHdr>().iov_count; break;
	case PktType::AtomicReq: iov_count = r.as<AtomicReqHdr>().iov_count; break;
	default: break;
	}
	if (iov_count) {
		if (iov_count > kMaxRmaIov)
			return ParseError::IovCount;
		if ((len - off) / sizeof(RmaIov) < iov_count)
			return ParseError::Short;
		r.iov = reinterpret_cast<const RmaIov *>(p + off);
		r.iov_count = iov_count;
		off += iov_count * sizeof(RmaIov);
	}
	r.payload = p + off;
	r.payload_len = len - off;
	const uint64_t rest = r.payload_len;
	uint64_t total = 0;

	switch (type) {
	case PktType::Handshake:
		if (rest)
			return ParseError::Length;
		break;
	case PktType::EagerMsg:
	case PktType::EagerTag:
		if (r.as<RtmHdr>().seg_len != rest)
			return ParseError::Length;
		/* A VOID run: no payload, and 1..kMaxVoidRun ids in `tag`. */
		if ((base->flags & kFlagVoid) && (rest || !r.as<RtmHdr>().tag || r.as<RtmHdr>().tag > kMaxVoidRun))
			return ParseError::Length;
		break;
	case PktType::MediumMsg:
	case PktType::MediumTag: {
		const MediumHdr &h = r.as<MediumHdr>();
		if (h.rtm.seg_len != rest || !rest || !fits(h.seg_off, rest, h.msg_len))
			return ParseError::Length;
		break;
	}
	case PktType::LongCtsMsg:
	case PktType::LongCtsTag: {
		const LongCtsHdr &h = r.as<LongCtsHdr>();
		if (h.rtm.seg_len != rest || rest > h.msg_len)
			return ParseError::Length;
		break;
	}
	case PktType::LongReadMsg:
	case PktType::LongReadTag: {
		const LongReadHdr &h = r.as<LongReadHdr>();
		if (!iov_count)
			return ParseError::IovCount;
		if (h.rtm.seg_len || rest || !iov_total(r.iov, iov_count, total) || total != h.msg_len)
			return ParseError::Length;
		break;
	}
	case PktType::Cts:
		if (rest || !r.as<CtsHdr>().window)
			return ParseError::Length;
		break;
	case PktType::Data: {
		const DataHdr &h = r.as<DataHdr>();
		if (h.seg_len != rest || !rest || !fits(h.seg_off, rest, UINT64_MAX))
			return ParseError::Length;
		break;
	}
	case PktType::ReadRsp: {
		const ReadRspHdr &h = r.as<ReadRspHdr>();
		if (h.seg_len != rest || !rest || !fits(h.seg_off, rest, UINT64_MAX))
			return ParseError::Length;
		break;
	}
	case PktType::Error:
		if (rest || !r.as<ErrorHdr>().err)
			return ParseError::Length;
		break;
	case PktType::Eor:
	case PktType::Receipt:
		if (rest)
			return ParseError::Length;
		break;
	case PktType::WriteData:
		if (rest)
			return ParseError::Length;
		if (!(base->flags & kFlagCqData))
			return ParseError::Flags;
		break;
	case PktType::AtomRsp:
		if (r.as<RspHdr>().seg_len != rest)
			return ParseError::Length;
		break;
	case PktType::WriteReq: {
		const WriteReqHdr &h = r.as<WriteReqHdr>();
		if (!iov_count)
			return ParseError::IovCount;
		if (h.seg_len != rest || rest > h.msg_len || !iov_total(r.iov, iov_count, total) ||
		    total != h.msg_len)
			return ParseError::Length;
		break;
	}
	case PktType::ReadReq: {
		const ReadReqHdr &h = r.as<ReadReqHdr>();
		if (!iov_count)
			return ParseError::IovCount;
		if (rest || !h.window || !iov_total(r.iov, iov_count, total) || total != h.msg_len)
			return ParseError::Length;
		break;
	}
	case PktType::AtomicReq: {
		const AtomicReqHdr &h = r.as<AtomicReqHdr>();
		if (!iov_count)
			return ParseError::IovCount;
		/* The operand sizes depend on the datatype and op (FI_ATOMIC_READ has none):
		 * the atomic layer checks them. */
		if (h.kind > uint8_t(AtomicKind::Compare) || !h.count)
			return ParseError::Length;
		break;
	}
	}
	out = r;
	return ParseError::None;
}

ParseError decode_handshake(const Parsed &pk, HandshakeInfo &out)
{
	if (pk.type != PktType::Handshake)
		return ParseError::Type;
	/* Section 4: RAW_ADDR is always set on a HANDSHAKE, and names the sender's QKEY. */
	if (!pk.raw_addr || pk.raw_addr->qkey != pk.base->conn)
		return ParseError::Addr;
	const HandshakeHdr &h = pk.as<HandshakeHdr>();
	/* The sender's device carried this very packet: a smaller MTU is a lie. */
	if (h.max_payload < sizeof(HandshakeHdr) + sizeof(RawAddr))
		return ParseError::Length;
	if (!std::has_single_bit(h.rx_window) || h.rx_window < 16 || h.rx_window > (1u << 30))
		return ParseError::Length;
	HandshakeInfo r;
	r.features = h.features & kFeatKnown;
	r.max_payload = h.max_payload;
	r.rx_window = h.rx_window;
	std::memcpy(&r.addr, pk.raw_addr, sizeof r.addr);
	out = r;
	return ParseError::None;
}

size_t write_handshake(void *buf, size_t cap, const HandshakeInfo &hs)
{
	PktWriter w(buf, cap);
	HandshakeHdr *h = w.header<HandshakeHdr>(PktType::Handshake, hs.addr.qkey, kFlagRawAddr);
	if (!h)
		return 0;
	h->features = hs.features;
	h->max_payload = hs.max_payload;
	h->rx_window = hs.rx_window;
	return w.raw_addr(hs.addr) && w.ok() ? w.size() : 0;
}

namespace {

/* Upstream's protocol v4 (section 12.2): the HANDSHAKE type, the version, the flag that
 * says a connection id follows the extra_info words, and the byte offsets of the probe. */
constexpr uint8_t kV4Handshake = 9, kV4Version = 4;
constexpr uint16_t kV4ConnIdFlag = 1u << 15;
constexpr size_t kProbeNextraP3 = 4, kProbeExtraInfo = 8, kProbeConnId = 16, kProbeMagicOff = 24,
		 kProbeAddr = 32;
static_assert(kProbeAddr + sizeof(RawAddr) == kProbeLen);

} // namespace

size_t write_probe(void *buf, size_t cap, const RawAddr &self)
{
	if (cap < kProbeLen)
		return 0;
	auto *b = static_cast<uint8_t *>(buf);
	std::memset(b, 0, kProbeLen);
	const uint16_t flags = kV4ConnIdFlag;
	const uint32_t nextra_p3 = 4; /* one extra_info word (features and requests: none) */
	b[0] = kV4Handshake;
	b[1] = kV4Version;
	std::memcpy(b + 2, &flags, 2);
	std::memcpy(b + kProbeNextraP3, &nextra_p3, 4);
	std::memcpy(b + kProbeConnId, &self.qkey, 4);
	std::memcpy(b + kProbeMagicOff, kProbeMagic, sizeof kProbeMagic);
	std::memcpy(b + kProbeAddr, &self, sizeof self);
	return kProbeLen;
}

bool parse_probe(const void *buf, size_t len, RawAddr &from)
{
	const auto *b = static_cast<const uint8_t *>(buf);
	if (len < kProbeLen || b[0] != kV4Handshake || b[1] != kV4Version)
		return false;
	uint16_t flags;
	uint32_t nextra_p3, conn;
	std::memcpy(&flags, b + 2, 2);
	std::memcpy(&nextra_p3, b + kProbeNextraP3, 4);
	std::memcpy(&conn, b + kProbeConnId, 4);
	if (flags != kV4ConnIdFlag || nextra_p3 != 4 ||
	    std::memcmp(b + kProbeMagicOff, kProbeMagic, sizeof kProbeMagic) != 0)
		return false;
	std::memcpy(&from, b + kProbeAddr, sizeof from);
	return from.qkey == conn && from.qpn != 0;
}

} // namespace efa::rdm
