/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* Checking and building protocol v4 packets: see codec.h. */
#include "rdm/v4/codec.h"

namespace efa::rdm::v4 {

namespace {

struct Row {
	uint8_t type;
	const char *name;
	Family family;
	bool tagged;
	bool dc;
	size_t hdr;
};

/* Every type v4 defines, with its mandatory header size (tag included). */
constexpr Row kRows[] = {
	{3, "CTS", Family::None, false, false, sizeof(Cts)},
	{4, "CTSDATA", Family::None, false, false, sizeof(CtsData)},
	{5, "READRSP", Family::None, false, false, sizeof(ReadRsp)},
	{7, "EOR", Family::None, false, false, sizeof(Eor)},
	{8, "ATOMRSP", Family::None, false, false, sizeof(AtomRsp)},
	{9, "HANDSHAKE", Family::None, false, false, sizeof(Handshake)},
	{10, "RECEIPT", Family::None, false, false, sizeof(Receipt)},
	{11, "READ_NACK", Family::None, false, false, sizeof(ReadNack)},
	{64, "EAGER_MSGRTM", Family::Rtm, false, false, sizeof(EagerRtm)},
	{65, "EAGER_TAGRTM", Family::Rtm, true, false, sizeof(EagerRtm) + 8},
	{66, "MEDIUM_MSGRTM", Family::Rtm, false, false, sizeof(MediumRtm)},
	{67, "MEDIUM_TAGRTM", Family::Rtm, true, false, sizeof(MediumRtm) + 8},
	{68, "LONGCTS_MSGRTM", Family::Rtm, false, false, sizeof(LongCtsRtm)},
	{69, "LONGCTS_TAGRTM", Family::Rtm, true, false, sizeof(LongCtsRtm) + 8},
	{70, "EAGER_RTW", Family::Rtw, false, false, sizeof(EagerRtw)},
	{71, "LONGCTS_RTW", Family::Rtw, false, false, sizeof(LongCtsRtw)},
	{72, "SHORT_RTR", Family::Rtr, false, false, sizeof(Rtr)},
	{73, "LONGCTS_RTR", Family::Rtr, false, false, sizeof(Rtr)},
	{74, "WRITE_RTA", Family::Rta, false, false, sizeof(Rta)},
	{75, "FETCH_RTA", Family::Rta, false, false, sizeof(Rta)},
	{76, "COMPARE_RTA", Family::Rta, false, false, sizeof(Rta)},
	{128, "LONGREAD_MSGRTM", Family::Rtm, false, false, sizeof(LongReadRtm)},
	{129, "LONGREAD_TAGRTM", Family::Rtm, true, false, sizeof(LongReadRtm) + 8},
	{130, "LONGREAD_RTW", Family::Rtw, false, false, sizeof(LongReadRtw)},
	{133, "DC_EAGER_MSGRTM", Family::Rtm, false, true, sizeof(DcEagerRtm)},
	{134, "DC_EAGER_TAGRTM", Family::Rtm, true, true, sizeof(DcEagerRtm) + 8},
	{135, "DC_MEDIUM_MSGRTM", Family::Rtm, false, true, sizeof(DcMediumRtm)},
	{136, "DC_MEDIUM_TAGRTM", Family::Rtm, true, true, sizeof(DcMediumRtm) + 8},
	{137, "DC_LONGCTS_MSGRTM", Family::Rtm, false, true, sizeof(LongCtsRtm)},
	{138, "DC_LONGCTS_TAGRTM", Family::Rtm, true, true, sizeof(LongCtsRtm) + 8},
	{139, "DC_EAGER_RTW", Family::Rtw, false, true, sizeof(DcEagerRtw)},
	{140, "DC_LONGCTS_RTW", Family::Rtw, false, true, sizeof(LongCtsRtw)},
	{141, "DC_WRITE_RTA", Family::Rta, false, true, sizeof(Rta)},
	{142, "RUNTCTS_MSGRTM", Family::Rtm, false, false, sizeof(RuntRtm)},
	{143, "RUNTCTS_TAGRTM", Family::Rtm, true, false, sizeof(RuntRtm) + 8},
	{144, "RUNTCTS_RTW", Family::Rtw, false, false, sizeof(RuntRtw)},
	{145, "RUNTREAD_MSGRTM", Family::Rtm, false, false, sizeof(RuntRtm)},
	{146, "RUNTREAD_TAGRTM", Family::Rtm, true, false, sizeof(RuntRtm) + 8},
	{147, "RUNTREAD_RTW", Family::Rtw, false, false, sizeof(RuntRtw)},
	{200, "EXT_ERROR", Family::None, false, false, sizeof(ExtError)},
	{201, "EXT_VOID", Family::None, false, false, sizeof(ExtVoid)},
	{202, "EXT_WRITE_DATA", Family::None, false, false, sizeof(ExtWriteData)},
};

/* The row of each type byte (0: none), so that parse looks a type up in one step. */
struct RowIndex {
	uint8_t at[256] = {};
	constexpr RowIndex()
	{
		for (size_t i = 0; i < sizeof kRows / sizeof kRows[0]; i++)
			at[kRows[i].type] = uint8_t(i + 1);
	}
};
constexpr RowIndex kRowIndex;

const Row *row_of(uint8_t type)
{
	const uint8_t i = kRowIndex.at[type];
	return i ? &kRows[i - 1] : nullptr;
}

uint32_t u32_at(const uint8_t *p)
{
	uint32_t v;
	std::memcpy(&v, p, 4);
	return v;
}

uint64_t u64_at(const uint8_t *p)
{
	uint64_t v;
	std::memcpy(&v, p, 8);
	return v;
}

/* Where a REQ's read iovs are: LONGREAD and RUNTREAD, at the start of the data. */
bool has_read_iov(Type t)
{
	switch (t) {
	case Type::LongReadMsgRtm:
	case Type::LongReadTagRtm:
	case Type::LongReadRtw:
	case Type::RuntReadMsgRtm:
	case Type::RuntReadTagRtm:
	case Type::RuntReadRtw: return true;
	default: return false;
	}
}

/* The offset of a read_iov_count field in the mandatory header. */
size_t read_iov_count_at(Type t)
{
	switch (t) {
	case Type::LongReadMsgRtm:
	case Type::LongReadTagRtm:
	case Type::RuntReadMsgRtm:
	case Type::RuntReadTagRtm: return offsetof(LongReadRtm, read_iov_count);
	default: return offsetof(LongReadRtw, read_iov_count); /* the RTWs: also RuntRtw's */
	}
}

/* Checks that `n` iovs fit in [p, end): the count, then the bytes. */
Error take_iovs(const uint8_t *&p, const uint8_t *end, uint32_t n, const uint8_t *&out)
{
	if (n > kMaxIov)
		return Error::IovCount;
	if (size_t(end - p) < size_t(n) * sizeof(RmaIov))
		return Error::Length;
	out = p;
	p += size_t(n) * sizeof(RmaIov);
	return Error::None;
}

Error parse_handshake(const uint8_t *p, const uint8_t *end, Packet &out)
{
	const uint32_t nextra_p3 = u32_at(p + offsetof(Handshake, nextra_p3));
	if (nextra_p3 < 3)
		return Error::Length;
	const uint32_t n = nextra_p3 - 3;
	p += sizeof(Handshake);
	if (size_t(end - p) / 8 < n)
		return Error::Length;
	out.extra_info = p;
	out.extra_count = n;
	p += size_t(n) * 8;
	const uint16_t f = out.flags;
	auto take8 = [&](const uint8_t *&q) {
		if (end - p < 8)
			return false;
		q = p;
		p += 8;
		return true;
	};
	const uint8_t *q = nullptr;
	if (f & kFlagConnId) {
		if (!take8(q))
			return Error::Length;
		out.has_connid = true;
		out.connid = u32_at(q);
	}
	if (f & kHsHostId) {
		if (!take8(q))
			return Error::Length;
		out.has_host_id = true;
		out.host_id = u64_at(q);
	}
	if (f & kHsDeviceVersion) {
		if (!take8(q))
			return Error::Length;
		out.has_device_version = true;
		out.device_version = u32_at(q);
	}
	if (f & kHsUserRecvQp) {
		if (!take8(q))
			return Error::Length;
		out.has_user_recv_qp = true;
		out.user_recv_qpn = u32_at(q);
		out.user_recv_qkey = u32_at(q + 4);
	}
	out.payload = p;
	out.payload_len = size_t(end - p);
	return Error::None;
}

/* The data of a non-REQ packet whose header names its length (`seg`). */
Error seg_payload(const uint8_t *p, const uint8_t *end, uint64_t seg, Packet &out)
{
	if (seg > uint64_t(end - p))
		return Error::Length;
	out.payload = p;
	out.payload_len = size_t(seg);
	return Error::None;
}

Error parse_req(const uint8_t *start, const uint8_t *end, Packet &out)
{
	const TypeInfo &ti = out.info;
	const uint8_t *p = start + ti.hdr;
	if (ti.tagged)
		out.tag = u64_at(p - 8);
	if (ti.family == Family::Rtw || ti.family == Family::Rtr || ti.family == Family::Rta) {
		const size_t at = ti.family == Family::Rta ? offsetof(Rta, rma_iov_count) : offsetof(EagerRtw, rma_iov_count);
		out.rma_iov_count = u32_at(start + at);
		if (Error e = take_iovs(p, end, out.rma_iov_count, out.rma_iov); e != Error::None)
			return e;
	}
	const uint16_t f = out.flags;
	if ((f & kReqRawAddr) && (f & kFlagConnId))
		return Error::Flags; /* the address carries the connid; never both */
	if (f & kReqRawAddr) {
		if (end - p < 4)
			return Error::Length;
		const uint32_t alen = u32_at(p);
		if (alen < sizeof(RawAddr))
			return Error::Addr;
		if (size_t(end - p) - 4 < alen)
			return Error::Length;
		out.has_raw_addr = true;
		std::memcpy(&out.raw_addr, p + 4, sizeof(RawAddr));
		out.has_connid = true;
		out.connid = out.raw_addr.qkey;
		p += 4 + alen;
	}
	if (f & kReqCqData) {
		if (end - p < 8)
			return Error::Length;
		out.has_cq_data = true;
		out.cq_data = u64_at(p);
		p += 8;
	}
	if (f & kFlagConnId) {
		if (end - p < 4)
			return Error::Length;
		out.has_connid = true;
		out.connid = u32_at(p);
		p += 4;
	}
	if (has_read_iov(out.type)) {
		out.read_iov_count = u32_at(start + read_iov_count_at(out.type));
		if (Error e = take_iovs(p, end, out.read_iov_count, out.read_iov); e != Error::None)
			return e;
	}
	out.payload = p;
	out.payload_len = size_t(end - p);
	/* Segments must lie inside their message. */
	uint64_t msg_len = 0, off = 0;
	bool seg = false;
	switch (out.type) {
	case Type::MediumMsgRtm:
	case Type::MediumTagRtm:
		msg_len = u64_at(start + offsetof(MediumRtm, msg_length));
		off = u64_at(start + offsetof(MediumRtm, seg_offset));
		seg = true;
		break;
	case Type::DcMediumMsgRtm:
	case Type::DcMediumTagRtm:
		msg_len = u64_at(start + offsetof(DcMediumRtm, msg_length));
		off = u64_at(start + offsetof(DcMediumRtm, seg_offset));
		seg = true;
		break;
	case Type::RuntCtsMsgRtm:
	case Type::RuntCtsTagRtm:
	case Type::RuntReadMsgRtm:
	case Type::RuntReadTagRtm:
		msg_len = u64_at(start + offsetof(RuntRtm, msg_length));
		off = u64_at(start + offsetof(RuntRtm, seg_offset));
		if (u64_at(start + offsetof(RuntRtm, runt_length)) > msg_len)
			return Error::Length;
		seg = true;
		break;
	case Type::RuntCtsRtw:
	case Type::RuntReadRtw:
		msg_len = u64_at(start + offsetof(RuntRtw, msg_length));
		off = u64_at(start + offsetof(RuntRtw, seg_offset));
		if (u64_at(start + offsetof(RuntRtw, runt_length)) > msg_len)
			return Error::Length;
		seg = true;
		break;
	case Type::LongCtsMsgRtm:
	case Type::LongCtsTagRtm:
	case Type::DcLongCtsMsgRtm:
	case Type::DcLongCtsTagRtm:
		msg_len = u64_at(start + offsetof(LongCtsRtm, msg_length));
		seg = true;
		break;
	case Type::LongCtsRtw:
	case Type::DcLongCtsRtw:
		msg_len = u64_at(start + offsetof(LongCtsRtw, msg_length));
		seg = true;
		break;
	default: break;
	}
	if (seg && (off > msg_len || out.payload_len > msg_len - off))
		return Error::Length;
	return Error::None;
}

} // namespace

const char *error_str(Error e)
{
	switch (e) {
	case Error::None: return "none";
	case Error::Short: return "shorter than its header";
	case Error::Version: return "not protocol version 4";
	case Error::Type: return "a packet type v4 does not define";
	case Error::Flags: return "flags the packet type does not allow together";
	case Error::Length: return "a length, count or offset outside the packet or its message";
	case Error::IovCount: return "too many iovs";
	case Error::Addr: return "a raw address header shorter than an address";
	}
	return "unknown";
}

const char *type_name(Type t)
{
	const Row *r = row_of(uint8_t(t));
	return r ? r->name : "unknown";
}

/* Every type byte's TypeInfo, built once at compile time (parse reads one per packet). */
struct InfoTable {
	TypeInfo at[256] = {};
	constexpr InfoTable()
	{
		for (const Row &r : kRows) {
			TypeInfo &ti = at[r.type];
			ti.known = true;
			ti.req = r.type >= 64 && r.family != Family::None;
			ti.family = r.family;
			ti.tagged = r.tagged;
			ti.dc = r.dc;
			ti.hdr = r.hdr;
		}
	}
};
constexpr InfoTable kInfo;

TypeInfo type_info(uint8_t type) { return kInfo.at[type]; }

bool Packet::extra(unsigned bit) const
{
	if (bit / 64 >= extra_count)
		return false;
	return (u64_at(extra_info + (bit / 64) * 8) >> (bit % 64)) & 1;
}

Error parse(const void *buf, size_t len, Packet &out)
{
	/* Not `out = Packet{}`: the optional headers' values (raw_addr alone is 32 bytes)
	 * are read only under their flags, and this runs for every packet. */
	out.type = Type(0);
	out.flags = 0;
	out.has_raw_addr = out.has_cq_data = out.has_connid = false;
	out.has_host_id = out.has_device_version = out.has_user_recv_qp = false;
	out.hdr = nullptr;
	out.info = TypeInfo{};
	out.tag = 0;
	out.rma_iov = nullptr;
	out.rma_iov_count = 0;
	out.connid = 0;
	out.cq_data = 0;
	out.read_iov = nullptr;
	out.read_iov_count = 0;
	out.extra_count = 0;
	out.extra_info = nullptr;
	out.payload = nullptr;
	out.payload_len = 0;
	const uint8_t *start = static_cast<const uint8_t *>(buf);
	const uint8_t *end = start + len;
	if (len < sizeof(Base))
		return Error::Short;
	std::memcpy(&out.flags, start + offsetof(Base, flags), sizeof out.flags);
	if (start[1] != kVersion)
		return Error::Version;
	out.info = kInfo.at[start[0]];
	if (!out.info.known)
		return Error::Type;
	out.type = Type(start[0]);
	if (len < out.info.hdr)
		return Error::Short;
	out.hdr = start;
	if (out.info.req)
		return parse_req(start, end, out);
	const uint16_t f = out.flags;
	const uint8_t *p = start + out.info.hdr;
	switch (out.type) {
	case Type::Handshake: return parse_handshake(start, end, out);
	case Type::Cts:
	case Type::ReadRsp:
	case Type::AtomRsp:
	case Type::ExtError:
	case Type::ExtVoid:
	case Type::ExtWriteData:
		if (f & kFlagConnId) {
			out.has_connid = true;
			out.connid = u32_at(start + offsetof(Cts, connid)); /* the same offset in all three */
		}
		if (out.type == Type::ReadRsp)
			return seg_payload(p, end, u64_at(start + offsetof(ReadRsp, seg_length)), out);
		if (out.type == Type::AtomRsp)
			return seg_payload(p, end, u64_at(start + offsetof(AtomRsp, seg_length)), out);
		break;
	case Type::Eor:
	case Type::ReadNack:
	case Type::Receipt:
		if (f & kFlagConnId) {
			out.has_connid = true;
			out.connid = u32_at(start + offsetof(Eor, connid)); /* also Receipt's */
		}
		break;
	case Type::CtsData:
		if (f & kFlagConnId) {
			if (end - p < 8)
				return Error::Length;
			out.has_connid = true;
			out.connid = u32_at(p);
			p += 8;
		}
		return seg_payload(p, end, u64_at(start + offsetof(CtsData, seg_length)), out);
	default: break;
	}
	out.payload = p;
	out.payload_len = size_t(end - p);
	return Error::None;
}

bool Writer::raw_addr(const RawAddr &a)
{
	uint8_t h[kReqRawAddrLen] = {};
	const uint32_t alen = uint32_t(kReqRawAddrLen - sizeof(ReqRawAddr));
	std::memcpy(h, &alen, 4);
	std::memcpy(h + 4, &a, sizeof a);
	return bytes(h, sizeof h);
}

} // namespace efa::rdm::v4
