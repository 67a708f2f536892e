/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Checking and building protocol v4 packets (wire.h). parse() accepts a received
 * packet only when every length, count and optional header it names lies inside the
 * packet, and says where each part is; Writer builds a packet header by header in the
 * order the protocol fixes (mandatory header, RMA iovs, then the optional headers in
 * flag-bit order: raw address, CQ data, connid; then the data). Pure code: no device,
 * no endpoint state; test_rdm_v4 checks it against the layouts written from the
 * specification.
 */
#ifndef EFA_RDM_V4_CODEC_H
#define EFA_RDM_V4_CODEC_H

#include "rdm/v4/wire.h"

#include <cstring>

namespace efa::rdm::v4 {

enum class Error {
	None = 0,
	Short,	  /* shorter than its base or mandatory header */
	Version,  /* not protocol version 4 */
	Type,	  /* a type number v4 does not define (or reserves) */
	Flags,	  /* a flag the type does not allow, or raw address and connid together */
	Length,	  /* a length, count or offset that does not fit the packet */
	IovCount, /* more RMA / read iovs than an endpoint may name */
	Addr,	  /* a raw address header shorter than an address */
};
const char *error_str(Error e);
const char *type_name(Type t);

/* The most iovs a packet may name (the reference sends at most 4; more is refused). */
inline constexpr uint32_t kMaxIov = 16;

enum class Family : uint8_t { None, Rtm, Rtw, Rtr, Rta };

/* What the type number says about a packet (kind of REQ, tagged, DC, ...). */
struct TypeInfo {
	bool known = false;
	bool req = false;
	Family family = Family::None;
	bool tagged = false;
	bool dc = false;	 /* a delivery-complete REQ */
	size_t hdr = 0;		 /* the mandatory header, tag included, iovs excluded */
};
TypeInfo type_info(uint8_t type);

/* An accepted packet: pointers into the caller's buffer, which may sit at any alignment
 * (a 4-byte connid header puts what follows it at 4 mod 8), so structured fields are
 * read by copy: the raw address is copied in, iovs are read with rma() / read().
 * Its members have no initialisers: parse() sets every one (unused ones to zero), so
 * the receive path clears a packet description once, not twice. */
struct Packet {
	/* parse() sets every field but the optional headers' values whose has_* flag is
	 * false (raw_addr, host_id, device_version, user_recv_qpn/qkey): read those only
	 * under their flag. The flags sit together so that clearing them is one store. */
	Type type;
	uint16_t flags; /* the base header's */
	/* REQ optional headers (and HANDSHAKE's). */
	bool has_raw_addr;
	bool has_cq_data;
	bool has_connid;
	bool has_host_id;
	bool has_device_version;
	bool has_user_recv_qp;
	const void *hdr; /* the mandatory header (read it with as<H>()) */
	TypeInfo info;
	uint64_t tag;
	/* RTW, RTR, RTA: the target's buffers (right after the mandatory header). */
	const uint8_t *rma_iov;
	uint32_t rma_iov_count;
	uint32_t connid; /* REQ: the connid header, or the raw address's; others: by flag */
	uint64_t cq_data;
	/* LONGREAD / RUNTREAD: the sender's buffers (the first part of the data). */
	const uint8_t *read_iov;
	uint32_t read_iov_count;
	/* HANDSHAKE */
	uint32_t extra_count;
	const uint8_t *extra_info; /* nextra_p3 - 3 little-endian uint64 */
	/* What follows: application data (or an atomic's operands). */
	const uint8_t *payload;
	size_t payload_len;
	/* Set only with their flags. */
	uint64_t host_id;
	uint32_t device_version;
	uint32_t user_recv_qpn, user_recv_qkey;
	RawAddr raw_addr; /* the first 32 bytes of the address header's */

	template <typename H> H as() const
	{
		H h;
		std::memcpy(&h, hdr, sizeof h);
		return h;
	}
	/* Bit `bit` of the peer's extra_info (a HANDSHAKE's). */
	bool extra(unsigned bit) const;
	/* RMA iov i (< rma_iov_count) and read iov i (< read_iov_count). */
	RmaIov rma(uint32_t i) const { return iov_at(rma_iov, i); }
	RmaIov read(uint32_t i) const { return iov_at(read_iov, i); }

private:
	static RmaIov iov_at(const uint8_t *base, uint32_t i)
	{
		RmaIov v;
		std::memcpy(&v, base + size_t(i) * sizeof(RmaIov), sizeof v);
		return v;
	}
};

/* Checks a received packet; fills `out` and returns Error::None, or the first rule it
 * breaks. The buffer need not be aligned. */
Error parse(const void *buf, size_t len, Packet &out);

/* The common small message as parse() reads it, for the receive path's shortcut
 * (arrival.cpp, Ep::rx_eager): an EAGER_MSGRTM or EAGER_TAGRTM that carries the connid
 * header, whose other flags are at most CQ data and the message kind. */
struct Eager {
	bool tagged;
	bool has_cq_data;
	uint32_t msg_id;
	uint32_t connid;
	uint64_t tag;	  /* 0 untagged */
	uint64_t cq_data; /* 0 without */
	const uint8_t *payload;
	size_t payload_len;
};

/* True and `out` set when `buf` is such a packet and parse() accepts it (the same
 * fields, test_rdm_v4 compares them); false for every other packet, which parse()
 * reads. Inline: it replaces parse() for most packets of a small-message workload. */
inline bool parse_eager(const uint8_t *buf, size_t len, Eager &out)
{
	constexpr uint16_t kAllowed = kFlagConnId | kReqCqData | kReqMsg | kReqTagged;
	if (len < sizeof(EagerRtm) + 4 || buf[1] != kVersion)
		return false;
	const bool tagged = buf[0] == uint8_t(Type::EagerTagRtm);
	if (!tagged && buf[0] != uint8_t(Type::EagerMsgRtm))
		return false;
	uint16_t flags;
	std::memcpy(&flags, buf + offsetof(Base, flags), sizeof flags);
	if (!(flags & kFlagConnId) || (flags & ~kAllowed))
		return false;
	const bool data = flags & kReqCqData;
	const size_t hdr = sizeof(EagerRtm) + (tagged ? 8 : 0);
	const size_t opt = (data ? 8 : 0) + 4;
	if (len < hdr + opt)
		return false;
	out.tagged = tagged;
	out.has_cq_data = data;
	std::memcpy(&out.msg_id, buf + offsetof(RtmBase, msg_id), 4);
	out.tag = 0;
	if (tagged)
		std::memcpy(&out.tag, buf + sizeof(EagerRtm), 8);
	out.cq_data = 0;
	if (data)
		std::memcpy(&out.cq_data, buf + hdr, 8);
	std::memcpy(&out.connid, buf + hdr + opt - 4, 4);
	out.payload = buf + hdr + opt;
	out.payload_len = len - hdr - opt;
	return true;
}

/* Builds one packet into a buffer of `cap` bytes. Every call returns false (and the
 * writer stays failed) once the packet would not fit. */
class Writer {
public:
	Writer(void *buf, size_t cap) : buf_(static_cast<uint8_t *>(buf)), cap_(cap) {}

	/* The mandatory header H, zeroed, with the base header. */
	template <typename H> H *header(Type type, uint16_t flags)
	{
		H *h = static_cast<H *>(reserve(sizeof(H)));
		if (!h)
			return nullptr;
		std::memset(static_cast<void *>(h), 0, sizeof(H));
		Base *b = reinterpret_cast<Base *>(h);
		b->type = uint8_t(type);
		b->version = kVersion;
		b->flags = flags;
		return h;
	}
	bool u64(uint64_t v) { return bytes(&v, sizeof v); }
	bool u32(uint32_t v) { return bytes(&v, sizeof v); }
	bool iovs(const RmaIov *v, size_t n) { return bytes(v, n * sizeof(RmaIov)); }
	/* REQ optional headers, in this order when present. */
	bool raw_addr(const RawAddr &a);
	bool cq_data(uint64_t d) { return u64(d); }
	bool connid(uint32_t c) { return u32(c); }
	/* A HANDSHAKE's extra_info (n members) and optional fields, in this order. */
	bool extra_info(const uint64_t *v, uint32_t n) { return bytes(v, size_t(n) * 8); }
	bool bytes(const void *p, size_t n)
	{
		void *d = reserve(n);
		if (!d)
			return false;
		if (n)
			std::memcpy(d, p, n);
		return true;
	}
	void *reserve(size_t n)
	{
		if (failed_ || n > cap_ - len_) {
			failed_ = true;
			return nullptr;
		}
		void *p = buf_ + len_;
		len_ += n;
		return p;
	}
	size_t size() const { return len_; }
	bool ok() const { return !failed_; }

private:
	uint8_t *buf_;
	size_t cap_;
	size_t len_ = 0;
	bool failed_ = false;
};

} // namespace efa::rdm::v4

#endif
