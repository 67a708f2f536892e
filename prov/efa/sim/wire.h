/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Wire format of the software EFA device: one UDP datagram = one WireHdr + one body
 * + payload. Specified in prov/efa/sim/README.md ("Wire format"); every struct here is a
 * POD with a static_assert on its size. Fields are little-endian (the device runs on
 * x86-64 and aarch64 Linux only; both are little-endian).
 *
 * Everything read from a datagram is untrusted: parse() checks the magic, version,
 * type, and that the declared lengths fit in the datagram before anything else looks
 * at it.
 */
#ifndef EFASIM_WIRE_H
#define EFASIM_WIRE_H

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace efasim {

inline constexpr uint32_t kWireMagic = 0x53414645; /* "EFAS" */
inline constexpr uint8_t kWireVersion = 2;

enum PktType : uint8_t {
	PKT_ACK = 1,       /* acknowledgement only, no sequence number */
	PKT_NAK = 2,       /* negative acknowledgement of one sequence number */
	PKT_SEND = 3,      /* send / send with immediate: consumes a posted receive */
	PKT_WRITE = 4,     /* one segment of an RDMA write (the last may carry an immediate) */
	PKT_READ_REQ = 5,  /* RDMA read request */
	PKT_READ_RESP = 6, /* one segment of an RDMA read response */
	PKT_UD_SEND = 7,   /* an unreliable datagram (UD QP): no sequence, no acknowledgement */
	PKT_TYPE_MAX = 8,
};

enum PktFlags : uint8_t {
	PF_ACK = 1 << 0, /* ack_epoch / ack_cum / ack_sack are valid */
	PF_IMM = 1 << 1, /* the body's imm field is valid */
	PF_HINT = 1 << 2, /* processing hints were set on the work request */
	PF_PLACED = 1 << 3, /* READ_RESP: the responder placed the whole read itself (one copy) */
	PF_PULL = 1 << 4,   /* WRITE: the payload is a PullOffer, not the data (loopback DMA) */
};

/* The first word of a loopback DMA proof in the initiator's memory (its second is the
 * work request's token): "EFASIMDM". */
inline constexpr uint64_t kDmaMagic = 0x4d44534d49534645ull;

/* The largest segment of a PF_PULL write: the target copies it in one system call while
 * it holds the device, so a bound keeps other QPs' packets moving. */
inline constexpr uint32_t kPullSegment = 1u << 20;

inline constexpr unsigned kSackBits = 128;

struct WireHdr {
	uint32_t magic;
	uint8_t version;
	uint8_t type;
	uint8_t flags;
	uint8_t path;      /* which of the sender's paths carried the packet */
	uint16_t src_qpn;
	uint16_t dst_qpn;
	uint32_t qkey;     /* must equal the destination QP's QKEY (data packets) */
	uint8_t src_gid[16];
	uint32_t epoch;    /* sender's channel epoch to this destination */
	uint32_t seq;      /* data packets: sequence number in that channel */
	uint32_t snd_una;  /* sender: every seq below this is acknowledged or abandoned */
	uint32_t ack_epoch; /* PF_ACK: epoch of the reverse channel being acknowledged */
	uint32_t ack_cum;  /* PF_ACK: every seq below this was received */
	uint32_t body_len; /* bytes after this header: body struct + payload */
	uint64_t ack_sack[2]; /* PF_ACK: bit i = seq ack_cum + 1 + i was received */
};
static_assert(sizeof(WireHdr) == 72, "wire header size");

struct SendBody {
	uint32_t msg_len;
	uint32_t imm; /* network byte order, as the application gave it */
	uint8_t sl;
	uint8_t rnr_try; /* attempt number after receiver-not-ready NAKs (mod 256) */
	uint8_t reserved[6];
};
static_assert(sizeof(SendBody) == 16, "send body size");

struct WriteBody {
	uint32_t rkey;
	uint32_t imm;
	uint64_t raddr;     /* start of the whole write: checked in full by every segment */
	uint64_t total_len; /* length of the whole write */
	uint64_t offset;    /* of this segment's payload within the write */
	uint8_t last;       /* 1: final segment; completes a write-with-immediate */
	uint8_t sl;
	uint8_t rnr_try;    /* as in SendBody */
	uint8_t reserved[5];
};
static_assert(sizeof(WriteBody) == 40, "write body size");

struct ReadReqBody {
	uint32_t rkey;
	uint32_t op_id; /* initiator's operation id, echoed by the responses */
	uint64_t raddr;
	uint64_t len;
	/* Same-device offer (dma_pid != 0): the initiator is process dma_pid on the
	 * responder's own device, its buffer is dma_addr/dma_len, and the 64-bit word at
	 * dma_nonce_addr in that process is followed by dma_nonce (never 0) while the read
	 * is outstanding (the read's proof: kDmaMagic, then its token). The responder may place the data there with one copy and answer
	 * with one PF_PLACED response, as a NIC's loopback DMA does. */
	uint32_t dma_pid;
	uint32_t dma_nsge;
	uint64_t dma_nonce;
	uint64_t dma_nonce_addr;
	uint64_t dma_addr[2];
	uint32_t dma_len[2];
};
static_assert(sizeof(ReadReqBody) == 72, "read request body size");

/* The payload of a PF_PULL WRITE segment: the initiator is process pid on the target's
 * own device; the segment is bytes [offset, offset + seg_len) of its buffer addr/len
 * (the whole write's entries), and token_addr holds kDmaMagic then token (never 0)
 * while the write is outstanding. The target copies the segment itself (one process_vm_readv) or refuses
 * with a NAK of kNakPullRefused, after which the initiator streams the whole write. */
struct PullOffer {
	uint32_t pid;
	uint32_t nsge;
	uint64_t token;
	uint64_t token_addr;
	uint64_t addr[2];
	uint32_t len[2];
	uint32_t seg_len;
	uint32_t reserved;
};
static_assert(sizeof(PullOffer) == 56, "pull offer size");

/* NAK status of a refused pull: not an EFA completion code, it completes nothing. */
inline constexpr uint8_t kNakPullRefused = 0xf0;

struct ReadRespBody {
	uint32_t op_id;
	uint32_t reserved;
	uint64_t offset;
};
static_assert(sizeof(ReadRespBody) == 16, "read response body size");

struct NakBody {
	uint32_t seq;
	uint8_t status;  /* EFA completion status the initiator must report */
	uint8_t rnr_try; /* RNR: the attempt refused */
	uint8_t reserved[2];
};
static_assert(sizeof(NakBody) == 8, "nak body size");

inline constexpr size_t body_size(uint8_t type)
{
	switch (type) {
	case PKT_ACK: return 0;
	case PKT_NAK: return sizeof(NakBody);
	case PKT_SEND:
	case PKT_UD_SEND: return sizeof(SendBody);
	case PKT_WRITE: return sizeof(WriteBody);
	case PKT_READ_REQ: return sizeof(ReadReqBody);
	case PKT_READ_RESP: return sizeof(ReadRespBody);
	default: return SIZE_MAX;
	}
}

inline constexpr bool is_data(uint8_t type) { return type >= PKT_SEND && type < PKT_TYPE_MAX; }

/* A datagram that passed parse(): header, body and payload all lie inside it. */
struct Parsed {
	const WireHdr *hdr;
	const uint8_t *body;
	const uint8_t *payload;
	size_t payload_len;
};

/* Validates a received datagram. Returns false for anything malformed. */
inline bool parse(const uint8_t *buf, size_t len, Parsed &out)
{
	if (len < sizeof(WireHdr))
		return false;
	const auto *h = reinterpret_cast<const WireHdr *>(buf);
	if (h->magic != kWireMagic || h->version != kWireVersion)
		return false;
	const size_t bsz = body_size(h->type);
	if (bsz == SIZE_MAX || h->body_len != len - sizeof(WireHdr) || h->body_len < bsz)
		return false;
	if (!is_data(h->type) && h->body_len != bsz)
		return false;
	if (h->type == PKT_READ_REQ && h->body_len != bsz)
		return false;
	out.hdr = h;
	out.body = buf + sizeof(WireHdr);
	out.payload = out.body + bsz;
	out.payload_len = h->body_len - bsz;
	return true;
}

/*
 * The status a NAK or an erring READ_RESP carries: one of the EFA completion codes a
 * responder reports (sim.h's EfaStatus: REMOTE_BAD_ADDRESS 7, REMOTE_ABORT 8,
 * REMOTE_BAD_DEST_QPN 9, REMOTE_RNR 10, REMOTE_BAD_LENGTH 11, REMOTE_BAD_STATUS 12,
 * REMOTE_UNKNOWN_PEER 14, REMOTE_FEATURE_MISMATCH 18). Anything else, success included,
 * would let a forged packet complete or fail a request with a code no device gives.
 */
inline constexpr bool is_remote_status(uint32_t s)
{
	return (s >= 7 && s <= 12) || s == 14 || s == 18;
}

/*
 * The per-type rules of a parsed datagram's body that need no QP state, only the
 * device's limits (EFASIM_MTU, EFASIM_SEGMENT). The runtime applies them before the
 * datagram touches any channel or QP; a datagram that breaks one is malformed.
 */
inline bool check_body(const Parsed &pk, uint32_t mtu, uint32_t segment)
{
	switch (pk.hdr->type) {
	case PKT_NAK: {
		NakBody b;
		std::memcpy(&b, pk.body, sizeof b);
		return is_remote_status(b.status) || b.status == kNakPullRefused;
	}
	case PKT_SEND:
	case PKT_UD_SEND: {
		SendBody b;
		std::memcpy(&b, pk.body, sizeof b);
		return b.msg_len == pk.payload_len && pk.payload_len <= mtu;
	}
	case PKT_WRITE: {
		WriteBody b;
		std::memcpy(&b, pk.body, sizeof b);
		if (pk.hdr->flags & PF_PULL) {
			PullOffer o;
			if (pk.payload_len != sizeof o)
				return false;
			std::memcpy(&o, pk.payload, sizeof o);
			return o.pid && o.token && o.nsge && o.nsge <= 2 &&
			       uint64_t(o.len[0]) + (o.nsge > 1 ? o.len[1] : 0) == b.total_len &&
			       b.offset <= b.total_len && o.seg_len <= b.total_len - b.offset &&
			       o.seg_len <= kPullSegment && b.last <= 1;
		}
		return b.offset <= b.total_len && pk.payload_len <= b.total_len - b.offset &&
		       pk.payload_len <= segment && b.last <= 1;
	}
	case PKT_READ_REQ: {
		ReadReqBody b;
		std::memcpy(&b, pk.body, sizeof b);
		return b.dma_nsge <= 2 && (b.dma_pid ? b.dma_nsge && b.dma_nonce : !b.dma_nsge);
	}
	case PKT_READ_RESP: {
		ReadRespBody b;
		std::memcpy(&b, pk.body, sizeof b);
		/* reserved != 0: the responder refused the read; no data then. PF_PLACED: the
		 * responder placed all of it; no data either. */
		if (pk.hdr->flags & PF_PLACED)
			return !b.reserved && !b.offset && !pk.payload_len;
		return b.reserved ? is_remote_status(b.reserved) && !pk.payload_len : pk.payload_len <= segment;
	}
	default: return true;
	}
}

/* Whether a READ_RESP segment fits the read it answers: op_len bytes in all, of which
 * to_recv have not arrived yet. */
inline constexpr bool read_resp_fits(uint64_t offset, uint64_t payload_len, uint64_t op_len, uint64_t to_recv)
{
	return offset <= op_len && payload_len <= op_len - offset && payload_len <= to_recv;
}

/* Serial-number comparison (RFC 1982) for 32-bit sequence numbers and epochs. */
inline constexpr bool seq_lt(uint32_t a, uint32_t b) { return int32_t(a - b) < 0; }
inline constexpr bool seq_le(uint32_t a, uint32_t b) { return int32_t(a - b) <= 0; }

} // namespace efasim

#endif /* EFASIM_WIRE_H */
