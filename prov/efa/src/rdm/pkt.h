/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The RDM protocol's packets (docs/protocol.md sections 3, 5 and 6): one POD struct per
 * header with its size checked, a writer that builds a packet into a buffer without
 * overrunning it, and a parser that checks every length, count and flag read from the
 * wire before anything else looks at the packet.
 *
 * Invariant: a packet that parse() accepts can be consumed through Parsed alone without
 * reading outside the received bytes: every pointer in Parsed points inside them, and
 * every length in it fits.
 */
#ifndef EFA_RDM_PKT_H
#define EFA_RDM_PKT_H

#include "addr.h"

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace efa::rdm {

static_assert(std::endian::native == std::endian::little,
	      "the protocol is little-endian and the provider does not byte-swap");

inline constexpr uint8_t kProtoVersion = 1;

/* Section 5. Tagged RTM ids are the untagged id + 1. */
enum class PktType : uint8_t {
	Handshake = 1,
	Cts = 2,
	Data = 3,
	Eor = 4,
	Receipt = 5,
	ReadRsp = 6,
	AtomRsp = 7,
	Error = 8,
	WriteData = 9,
	EagerMsg = 16,
	EagerTag = 17,
	MediumMsg = 18,
	MediumTag = 19,
	LongCtsMsg = 20,
	LongCtsTag = 21,
	LongReadMsg = 22,
	LongReadTag = 23,
	WriteReq = 32,
	ReadReq = 33,
	AtomicReq = 34,
};

const char *pkt_type_name(PktType t);

/* Base header flags (section 3). */
enum : uint16_t {
	kFlagRawAddr = 1u << 0,
	kFlagCqData = 1u << 1,
	kFlagDeliveryComplete = 1u << 2,
	kFlagVoid = 1u << 3, /* EAGER only: abandoned messages; consume `tag` ids from msg_id, deliver nothing */
};

/* Handshake feature bits (section 4). */
enum : uint64_t {
	kFeatRdmaRead = 1ull << 0,
	kFeatRdmaWrite = 1ull << 1,
	kFeatUnsolicitedWriteRecv = 1ull << 2,
	kFeatDeliveryComplete = 1ull << 3,
	kFeatKnown = kFeatRdmaRead | kFeatRdmaWrite | kFeatUnsolicitedWriteRecv | kFeatDeliveryComplete,
};

/* The most RMA iovs one request may carry. */
inline constexpr uint32_t kMaxRmaIov = 4;

struct BaseHdr {
	uint8_t type;
	uint8_t version;
	uint16_t flags;
	uint32_t conn;
};
static_assert(sizeof(BaseHdr) == 8);

struct HandshakeHdr {
	BaseHdr base;
	uint64_t features;
	uint32_t max_payload;
	uint32_t rx_window;
};
static_assert(sizeof(HandshakeHdr) == 24);

/* Common to EAGER, MEDIUM, LONGCTS and LONGREAD. */
struct RtmHdr {
	BaseHdr base;
	uint32_t msg_id;
	uint32_t seg_len;
	uint64_t tag;
};
static_assert(sizeof(RtmHdr) == 24);

struct EagerHdr {
	RtmHdr rtm;
};
static_assert(sizeof(EagerHdr) == 24);

struct MediumHdr {
	RtmHdr rtm;
	uint64_t msg_len;
	uint64_t seg_off;
};
static_assert(sizeof(MediumHdr) == 40);

struct LongCtsHdr {
	RtmHdr rtm;
	uint64_t msg_len;
	uint32_t send_id;
	uint32_t credits;
};
static_assert(sizeof(LongCtsHdr) == 40);

struct LongReadHdr {
	RtmHdr rtm;
	uint64_t msg_len;
	uint32_t send_id;
	uint32_t iov_count;
};
static_assert(sizeof(LongReadHdr) == 40);

struct CtsHdr {
	BaseHdr base;
	uint32_t send_id;
	uint32_t recv_id;
	uint64_t window;
};
static_assert(sizeof(CtsHdr) == 24);

struct DataHdr {
	BaseHdr base;
	uint32_t recv_id;
	uint32_t seg_len;
	uint64_t seg_off;
};
static_assert(sizeof(DataHdr) == 24);

struct EorHdr {
	BaseHdr base;
	uint32_t send_id;
	uint32_t recv_id;
};
static_assert(sizeof(EorHdr) == 16);

/* The remote CQ data of a device RDMA write, sent once the write is acknowledged; the
 * data travels in the CQ_DATA optional header, which it must carry. */
struct WriteDataHdr {
	BaseHdr base;
	uint32_t pad;
	uint32_t reserved;
	uint64_t len; /* the write's length */
};
static_assert(sizeof(WriteDataHdr) == 24);

struct ReceiptHdr {
	BaseHdr base;
	uint32_t send_id;
	uint32_t msg_id;
};
static_assert(sizeof(ReceiptHdr) == 16);

struct WriteReqHdr {
	BaseHdr base;
	uint32_t iov_count;
	uint32_t seg_len;
	uint64_t msg_len;
	uint32_t send_id;
	uint32_t pad;
};
static_assert(sizeof(WriteReqHdr) == 32);

struct ReadReqHdr {
	BaseHdr base;
	uint32_t iov_count;
	uint32_t recv_id;
	uint64_t msg_len;
	uint64_t window;
};
static_assert(sizeof(ReadReqHdr) == 32);

/* READRSP: a segment of an emulated read's data, at seg_off of the initiator's buffer. */
struct ReadRspHdr {
	BaseHdr base;
	uint32_t recv_id;
	uint32_t seg_len;
	uint64_t seg_off;
};
static_assert(sizeof(ReadRspHdr) == 24);

/* ATOMRSP: the target's values before a fetching or comparing atomic. */
struct RspHdr {
	BaseHdr base;
	uint32_t recv_id;
	uint32_t seg_len;
};
static_assert(sizeof(RspHdr) == 16);

/* ERROR: the target refused an operation (RMA iov outside registered memory, ...). */
struct ErrorHdr {
	BaseHdr base;
	uint32_t op_id;	 /* the initiator's id of the operation */
	uint32_t msg_id; /* its message id, for ordered requests */
	uint32_t err;	 /* positive FI_E* */
	uint32_t pad;
};
static_assert(sizeof(ErrorHdr) == 24);

enum class AtomicKind : uint8_t { Write = 0, Fetch = 1, Compare = 2 };

struct AtomicReqHdr {
	BaseHdr base;
	uint32_t msg_id;
	uint32_t iov_count;
	uint8_t op;
	uint8_t datatype;
	uint8_t kind;
	uint8_t pad;
	uint32_t recv_id;
	uint64_t count;
};
static_assert(sizeof(AtomicReqHdr) == 32);

struct RmaIov {
	uint64_t addr;
	uint64_t len;
	uint64_t key;
};
static_assert(sizeof(RmaIov) == 24);

inline constexpr size_t kCqDataLen = 8;

/* The fixed header size of a type; 0 for an unknown type. */
size_t hdr_size(PktType t);
/* Whether a type is a REQ (starts an operation; may carry optional headers). */
bool is_req(PktType t);
/* Whether REQs of a type carry a message id and pass the reorder buffer. */
bool is_ordered(PktType t);
inline bool is_tagged(PktType t) { return uint8_t(t) >= 16 && uint8_t(t) < 32 && (uint8_t(t) & 1); }
inline bool is_eager(PktType t) { return t == PktType::EagerMsg || t == PktType::EagerTag; }
inline bool is_medium(PktType t) { return t == PktType::MediumMsg || t == PktType::MediumTag; }

/* ------------------------------------------------------------------ building */

/*
 * Builds one packet in a caller's buffer. Every put fails (returns null / false) once the
 * packet would exceed the capacity, and the writer stays failed; size() is meaningful
 * only when ok().
 */
class PktWriter {
public:
	PktWriter(void *buf, size_t cap) : buf_(static_cast<uint8_t *>(buf)), cap_(cap) {}

	/* The fixed header of type H, zeroed, with the base header filled in. */
	template <typename H> H *header(PktType type, uint32_t conn, uint16_t flags = 0)
	{
		H *h = static_cast<H *>(reserve(sizeof(H)));
		if (!h)
			return nullptr;
		std::memset(h, 0, sizeof(H));
		BaseHdr *b = reinterpret_cast<BaseHdr *>(h);
		b->type = uint8_t(type);
		b->version = kProtoVersion;
		b->flags = flags;
		b->conn = conn;
		return h;
	}
	/* The fixed header H of a message's REQ (EAGER, MEDIUM, LONGCTS, LONGREAD, and VOID),
	 * with the fields every one of them carries; `type` is the untagged member of the
	 * family, `tagged` selects its tagged twin (the next type number). */
	template <typename H>
	H *rtm(PktType type, bool tagged, uint32_t conn, uint16_t flags, uint32_t msg_id, uint32_t seg_len,
	       uint64_t tag)
	{
		static_assert(offsetof(H, rtm) == 0);
		H *h = header<H>(PktType(uint8_t(type) + (tagged ? 1 : 0)), conn, flags);
		if (h) {
			h->rtm.msg_id = msg_id;
			h->rtm.seg_len = seg_len;
			h->rtm.tag = tag;
		}
		return h;
	}
	/* Optional headers, in flag-bit order: raw address, then CQ data. */
	bool raw_addr(const RawAddr &a) { return bytes(&a, sizeof a); }
	bool cq_data(uint64_t d) { return bytes(&d, sizeof d); }
	bool bytes(const void *p, size_t n)
	{
		void *dst = reserve(n);
		if (!dst)
			return false;
		if (n)
			std::memcpy(dst, p, n);
		return true;
	}
	/* Room for n bytes of payload written by the caller. */
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
	size_t room() const { return failed_ ? 0 : cap_ - len_; }
	size_t size() const { return len_; }
	bool ok() const { return !failed_; }

private:
	uint8_t *buf_;
	size_t cap_;
	size_t len_ = 0;
	bool failed_ = false;
};

/* ------------------------------------------------------------------ parsing */

/* The most message ids one VOID packet consumes (its `tag`; protocol.md section 11). */
inline constexpr uint32_t kMaxVoidRun = 1024;

enum class ParseError {
	None = 0,
	Short,	   /* shorter than the base header or the type's header */
	Version,   /* another protocol version */
	Type,	   /* unknown type */
	Flags,	   /* a flag the type does not allow */
	Length,	   /* a length or offset inconsistent with the packet or the message */
	IovCount,  /* too many RMA iovs */
	Addr,	   /* HANDSHAKE: no sender address, or one that contradicts the header */
};

const char *parse_error_str(ParseError e);

/* What a receiver may use of an accepted packet. */
struct Parsed {
	PktType type;
	const BaseHdr *base;
	const void *hdr;		/* the fixed header (type per `type`) */
	const RawAddr *raw_addr = nullptr; /* kFlagRawAddr */
	bool has_cq_data = false;
	uint64_t cq_data = 0;
	const RmaIov *iov = nullptr;	/* WRITE_REQ, READ_REQ, ATOMIC_REQ, LONGREAD */
	uint32_t iov_count = 0;
	const uint8_t *payload = nullptr; /* what follows the headers and iovs */
	size_t payload_len = 0;

	template <typename H> const H &as() const { return *static_cast<const H *>(hdr); }
};

/*
 * Checks a received packet (section 6's rules) and describes it. The buffer must be
 * 8-byte aligned (the device's receive buffers are). Returns ParseError::None and fills
 * `out`, or the first rule the packet breaks.
 */
ParseError parse(const void *buf, size_t len, Parsed &out);

/* The message id of an ordered REQ (is_ordered(pk.type)). */
inline uint32_t msg_id_of(const Parsed &pk)
{
	return pk.type == PktType::AtomicReq ? pk.as<AtomicReqHdr>().msg_id : pk.as<RtmHdr>().msg_id;
}

/* What a HANDSHAKE says about its sender (section 4), once checked. */
struct HandshakeInfo {
	uint64_t features;    /* the bits this version knows; later versions' bits are dropped */
	uint32_t max_payload; /* at least the size of the handshake that announced it */
	uint32_t rx_window;   /* a power of two in [16, 2^30], as FI_EFA_RECVWIN_SIZE is clamped */
	RawAddr addr;	      /* the sender's address; its QKEY is the packet's conn */
};

/*
 * Interprets a HANDSHAKE that parse() accepted. The only code that reads a handshake's
 * fields: the endpoint keeps what this returns, the fuzz harness runs it on random bytes.
 */
ParseError decode_handshake(const Parsed &pk, HandshakeInfo &out);

/*
 * Writes the HANDSHAKE that announces `hs` (its conn is hs.addr's QKEY) into buf, the one
 * writer of a handshake's fields. Returns its length, or 0 when it does not fit.
 */
size_t write_handshake(void *buf, size_t cap, const HandshakeInfo &hs);

/*
 * The protocol probe (section 12.2): the first packet to a peer whose address lacks
 * kRdmNameMark. Upstream's protocol v4 parses it as a HANDSHAKE that announces no
 * feature (type 9, version 4, the connection-id flag, one extra_info word of 0, the
 * connection id); what follows is ignored there: kProbeMagic and the sender's address.
 * Our endpoints answer it with a HANDSHAKE of ours, upstream's with one of v4.
 */
inline constexpr size_t kProbeLen = 64;
inline constexpr uint8_t kProbeMagic[8] = {'e', 'f', 'a', '-', 'c', 'p', 'p', '1'};
/* Writes a probe from `self` into buf; its length, or 0 when it does not fit. */
size_t write_probe(void *buf, size_t cap, const RawAddr &self);
/* Whether buf holds a probe; if so its sender's address (QKEY = connection id) in `from`. */
bool parse_probe(const void *buf, size_t len, RawAddr &from);

} // namespace efa::rdm

#endif
