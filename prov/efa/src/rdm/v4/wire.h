/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Upstream's EFA RDM protocol version 4 on the wire: packet type numbers, flags, the
 * extra-feature bits of the handshake, and every header as it lies in a packet
 * (little-endian, natural alignment, offsets asserted below). Written from the
 * specification (shared/reference/upstream/efa_rdm_protocol_v4.md); where the
 * specification's tables and the reference implementation disagree, the layout is the
 * reference implementation's, because that is what other v4 nodes send and accept
 * (docs/protocol.md section 4).
 *
 * This header only describes bytes; codec.h checks and builds packets.
 */
#ifndef EFA_RDM_V4_WIRE_H
#define EFA_RDM_V4_WIRE_H

#include "addr.h"

#include <cstddef>
#include <cstdint>

namespace efa::rdm::v4 {

inline constexpr uint8_t kVersion = 4;

enum class Type : uint8_t {
	Cts = 3,
	CtsData = 4,
	ReadRsp = 5,
	Eor = 7,
	AtomRsp = 8,
	Handshake = 9,
	Receipt = 10,
	ReadNack = 11,
	/* REQ packets, baseline */
	EagerMsgRtm = 64,
	EagerTagRtm = 65,
	MediumMsgRtm = 66,
	MediumTagRtm = 67,
	LongCtsMsgRtm = 68,
	LongCtsTagRtm = 69,
	EagerRtw = 70,
	LongCtsRtw = 71,
	ShortRtr = 72,
	LongCtsRtr = 73,
	WriteRta = 74,
	FetchRta = 75,
	CompareRta = 76,
	/* REQ packets of extra features */
	LongReadMsgRtm = 128,
	LongReadTagRtm = 129,
	LongReadRtw = 130,
	ReadRtr = 131, /* reserved: never on the wire */
	DcEagerMsgRtm = 133,
	DcEagerTagRtm = 134,
	DcMediumMsgRtm = 135,
	DcMediumTagRtm = 136,
	DcLongCtsMsgRtm = 137,
	DcLongCtsTagRtm = 138,
	DcEagerRtw = 139,
	DcLongCtsRtw = 140,
	DcWriteRta = 141,
	RuntCtsMsgRtm = 142,
	RuntCtsTagRtm = 143,
	RuntCtsRtw = 144,
	RuntReadMsgRtm = 145,
	RuntReadTagRtm = 146,
	RuntReadRtw = 147,
	/* Not v4: this provider's extension (below), sent only to peers that announce it. */
	ExtError = 200,
	ExtVoid = 201,
	ExtWriteData = 202,
};

/* Flags every packet may carry. */
inline constexpr uint16_t kFlagConnId = 0x8000; /* the sender's connid is in the header */
/* Flags of REQ packets. */
inline constexpr uint16_t kReqRawAddr = 0x1;  /* optional raw address header */
inline constexpr uint16_t kReqCqData = 0x2;   /* optional CQ data header */
inline constexpr uint16_t kReqMsg = 0x4;      /* two-sided */
inline constexpr uint16_t kReqTagged = 0x8;   /* tagged two-sided */
inline constexpr uint16_t kReqRma = 0x10;     /* emulated RMA */
inline constexpr uint16_t kReqAtomic = 0x20;  /* emulated atomic */
inline constexpr uint16_t kReqReadNack = 0x2000; /* a LONGCTS REQ that follows a READ_NACK */
/* Flags of CTS. */
inline constexpr uint16_t kCtsReadReq = 0x80; /* the CTS answers a LONGCTS_RTR */
/* Flags of HANDSHAKE: its optional fields, in this order after extra_info. */
inline constexpr uint16_t kHsHostId = 0x1;
inline constexpr uint16_t kHsDeviceVersion = 0x2;
inline constexpr uint16_t kHsUserRecvQp = 0x4; /* legacy: parsed, never sent */

/* Extra features and requests (bit i of extra_info[i / 64]). */
inline constexpr uint64_t kExtraRdmaRead = 1ull << 0;
inline constexpr uint64_t kExtraDeliveryComplete = 1ull << 1;
inline constexpr uint64_t kExtraConstantHeaderLength = 1ull << 2; /* a request */
inline constexpr uint64_t kExtraConnIdHeader = 1ull << 3;	   /* a request */
inline constexpr uint64_t kExtraRunt = 1ull << 4;
inline constexpr uint64_t kExtraRdmaWrite = 1ull << 5;
inline constexpr uint64_t kExtraReadNack = 1ull << 6;
inline constexpr uint64_t kExtraUserRecvQp = 1ull << 7; /* feature and request; legacy */
inline constexpr uint64_t kExtraUnsolicitedWriteRecv = 1ull << 8;
inline constexpr unsigned kExtraCount = 9;

struct Base {
	uint8_t type;
	uint8_t version;
	uint16_t flags;
};

/* efa_rma_iov: a remote buffer. */
struct RmaIov {
	uint64_t addr;
	uint64_t len;
	uint64_t key;
};

/* ------------------------------------------------------------------ non-REQ packets */

struct Handshake {
	Base b;
	uint32_t nextra_p3; /* extra_info has nextra_p3 - 3 members */
	/* uint64_t extra_info[]; then, by flags: connid (8), host_id (8),
	 * device_version (8), user recv QP (8) */
};

struct Cts {
	Base b;
	uint32_t connid; /* with kFlagConnId; else padding */
	uint32_t send_id;
	uint32_t recv_id;
	uint64_t recv_length;
};

struct CtsData {
	Base b;
	uint32_t recv_id;
	uint64_t seg_length;
	uint64_t seg_offset;
	/* with kFlagConnId: uint32_t connid, uint32_t padding */
};

struct ReadRsp {
	Base b;
	uint32_t connid;
	uint32_t recv_id; /* the requester's, from the RTR */
	uint32_t send_id; /* the responder's */
	uint64_t seg_length;
};

struct Eor {
	Base b;
	uint32_t send_id;
	uint32_t recv_id;
	uint32_t connid;
};

using ReadNack = Eor; /* the same layout */

struct AtomRsp {
	Base b;
	uint32_t connid;
	uint32_t reserved;
	uint32_t recv_id;
	uint64_t seg_length;
};

struct Receipt {
	Base b;
	uint32_t send_id;
	uint32_t msg_id;
	uint32_t connid;
};

/* ------------------------------------------------------------------ REQ packets: RTM */

struct RtmBase {
	Base b;
	uint32_t msg_id;
};

struct EagerRtm {
	RtmBase r;
	/* tagged: uint64_t tag */
};

struct MediumRtm {
	RtmBase r;
	uint64_t msg_length;
	uint64_t seg_offset;
	/* tagged: uint64_t tag */
};

struct LongCtsRtm {
	RtmBase r;
	uint64_t msg_length;
	uint32_t send_id;
	uint32_t credit_request;
	/* tagged: uint64_t tag */
};

struct LongReadRtm {
	RtmBase r;
	uint64_t msg_length;
	uint32_t send_id;
	uint32_t read_iov_count; /* RmaIov[] after the optional headers */
	/* tagged: uint64_t tag */
};

struct DcEagerRtm {
	RtmBase r;
	uint32_t send_id;
	uint32_t padding;
	/* tagged: uint64_t tag */
};

struct DcMediumRtm {
	RtmBase r;
	uint32_t send_id;
	uint32_t padding;
	uint64_t msg_length;
	uint64_t seg_offset;
	/* tagged: uint64_t tag */
};

struct RuntRtm {
	RtmBase r;
	uint64_t msg_length;
	uint32_t send_id;
	uint32_t credit_or_iovs; /* RUNTCTS: credit_request; RUNTREAD: read_iov_count */
	uint64_t seg_offset;
	uint64_t runt_length;
	/* tagged: uint64_t tag */
};

/* ------------------------------------------------------------------ REQ packets: RTW, RTR, RTA */

/* Each is followed by rma_iov_count RmaIov, then the optional headers. */
struct EagerRtw {
	Base b;
	uint32_t rma_iov_count;
};

struct DcEagerRtw {
	Base b;
	uint32_t rma_iov_count;
	uint32_t send_id;
	uint32_t padding;
};

struct LongCtsRtw { /* also DC_LONGCTS_RTW */
	Base b;
	uint32_t rma_iov_count;
	uint64_t msg_length;
	uint32_t send_id;
	uint32_t credit_request;
};

struct LongReadRtw {
	Base b;
	uint32_t rma_iov_count;
	uint64_t msg_length;
	uint32_t send_id;
	uint32_t read_iov_count;
};

struct RuntRtw {
	Base b;
	uint32_t rma_iov_count;
	uint64_t msg_length;
	uint32_t send_id;
	uint32_t credit_or_iovs;
	uint64_t seg_offset;
	uint64_t runt_length;
};

struct Rtr { /* SHORT_RTR (recv_length is padding) and LONGCTS_RTR */
	Base b;
	uint32_t rma_iov_count;
	uint64_t msg_length;
	uint32_t recv_id;
	uint32_t recv_length;
};

struct Rta { /* WRITE_RTA, FETCH_RTA, COMPARE_RTA, DC_WRITE_RTA */
	Base b;
	uint32_t msg_id;
	uint32_t rma_iov_count;
	uint32_t atomic_datatype;
	uint32_t atomic_op;
	uint32_t id; /* WRITE_RTA: padding; FETCH/COMPARE: recv_id; DC_WRITE: send_id */
};

/* The REQ optional raw address header: addr_len, then the address (we send 36 bytes:
 * our 32-byte address and 4 bytes of padding, as the reference does). */
struct ReqRawAddr {
	uint32_t addr_len;
};
inline constexpr size_t kReqRawAddrLen = 40; /* the whole optional header we send */
inline constexpr size_t kReqConnIdLen = 4;
inline constexpr size_t kCqDataLen = 8;

/* ------------------------------------------------------------------ our extension (not v4) */

/*
 * Three packets v4 lacks, exchanged only between endpoints of this provider. An endpoint
 * announces that it takes them with kExtMagic right after its HANDSHAKE's optional
 * fields (a v4 node ignores what follows them), and sends them only to peers whose
 * HANDSHAKE carried it. Their type numbers lie outside every range v4 uses.
 *
 *  - EXT_ERROR: a target refused an emulated RMA or atomic (key, bounds, access,
 *    datatype); the initiator's operation fails with `err`. A v4 target reports such a
 *    refusal only locally, and its initiator waits.
 *  - EXT_VOID: message ids `msg_id` .. msg_id + count - 1 will never come (their sends
 *    failed with FI_ENORX under FI_RM_DISABLED); the receiver's reorder buffer skips
 *    them. Passes the reorder buffer like a REQ (by msg_id).
 *  - EXT_WRITE_DATA: the remote CQ data of a device RDMA write, sent once the write is
 *    acknowledged, to a peer whose QP takes unsolicited write receive: a write with
 *    immediate data would take an entry of its receive CQ that nothing reserved; this
 *    packet takes one of its receive buffers, whose CQ entries are reserved.
 */
inline constexpr uint8_t kExtMagic[8] = {'e', 'f', 'a', '-', 'c', 'p', 'p', 'x'};

struct ExtError {
	Base b;
	uint32_t connid; /* always present (kFlagConnId) */
	uint32_t op_id;	 /* the initiator's send_id / recv_id of the operation */
	uint32_t err;	 /* positive FI_E* */
};

struct ExtVoid {
	Base b;
	uint32_t connid; /* always present (kFlagConnId) */
	uint32_t msg_id;
	uint32_t count;
};

struct ExtWriteData {
	Base b;
	uint32_t connid; /* always present (kFlagConnId) */
	uint64_t cq_data;
	uint64_t length; /* the write's */
};

/* ------------------------------------------------------------------ the layout, checked */

#define EFA_V4_AT(T, f, off) static_assert(offsetof(T, f) == (off), #T "." #f " is at byte " #off)
static_assert(sizeof(Base) == 4);
static_assert(sizeof(RmaIov) == 24);
static_assert(sizeof(Handshake) == 8);
EFA_V4_AT(Handshake, nextra_p3, 4);
static_assert(sizeof(Cts) == 24);
EFA_V4_AT(Cts, connid, 4);
EFA_V4_AT(Cts, send_id, 8);
EFA_V4_AT(Cts, recv_id, 12);
EFA_V4_AT(Cts, recv_length, 16);
static_assert(sizeof(CtsData) == 24);
EFA_V4_AT(CtsData, recv_id, 4);
EFA_V4_AT(CtsData, seg_length, 8);
EFA_V4_AT(CtsData, seg_offset, 16);
static_assert(sizeof(ReadRsp) == 24);
EFA_V4_AT(ReadRsp, recv_id, 8);
EFA_V4_AT(ReadRsp, send_id, 12);
EFA_V4_AT(ReadRsp, seg_length, 16);
static_assert(sizeof(Eor) == 16);
EFA_V4_AT(Eor, send_id, 4);
EFA_V4_AT(Eor, recv_id, 8);
EFA_V4_AT(Eor, connid, 12);
static_assert(sizeof(AtomRsp) == 24);
EFA_V4_AT(AtomRsp, recv_id, 12);
EFA_V4_AT(AtomRsp, seg_length, 16);
static_assert(sizeof(Receipt) == 16);
EFA_V4_AT(Receipt, send_id, 4);
EFA_V4_AT(Receipt, msg_id, 8);
EFA_V4_AT(Receipt, connid, 12);
static_assert(sizeof(RtmBase) == 8);
EFA_V4_AT(RtmBase, msg_id, 4);
static_assert(sizeof(EagerRtm) == 8);
static_assert(sizeof(MediumRtm) == 24);
EFA_V4_AT(MediumRtm, msg_length, 8);
EFA_V4_AT(MediumRtm, seg_offset, 16);
static_assert(sizeof(LongCtsRtm) == 24);
EFA_V4_AT(LongCtsRtm, msg_length, 8);
EFA_V4_AT(LongCtsRtm, send_id, 16);
EFA_V4_AT(LongCtsRtm, credit_request, 20);
static_assert(sizeof(LongReadRtm) == 24);
EFA_V4_AT(LongReadRtm, read_iov_count, 20);
static_assert(sizeof(DcEagerRtm) == 16);
EFA_V4_AT(DcEagerRtm, send_id, 8);
static_assert(sizeof(DcMediumRtm) == 32);
EFA_V4_AT(DcMediumRtm, send_id, 8);
EFA_V4_AT(DcMediumRtm, msg_length, 16);
EFA_V4_AT(DcMediumRtm, seg_offset, 24);
static_assert(sizeof(RuntRtm) == 40);
EFA_V4_AT(RuntRtm, seg_offset, 24);
EFA_V4_AT(RuntRtm, runt_length, 32);
static_assert(sizeof(EagerRtw) == 8);
static_assert(sizeof(DcEagerRtw) == 16);
EFA_V4_AT(DcEagerRtw, send_id, 8);
static_assert(sizeof(LongCtsRtw) == 24);
EFA_V4_AT(LongCtsRtw, msg_length, 8);
EFA_V4_AT(LongCtsRtw, send_id, 16);
static_assert(sizeof(LongReadRtw) == 24);
EFA_V4_AT(LongReadRtw, read_iov_count, 20);
static_assert(sizeof(RuntRtw) == 40);
EFA_V4_AT(RuntRtw, runt_length, 32);
static_assert(sizeof(Rtr) == 24);
EFA_V4_AT(Rtr, msg_length, 8);
EFA_V4_AT(Rtr, recv_id, 16);
EFA_V4_AT(Rtr, recv_length, 20);
static_assert(sizeof(Rta) == 24);
EFA_V4_AT(Rta, msg_id, 4);
EFA_V4_AT(Rta, rma_iov_count, 8);
EFA_V4_AT(Rta, atomic_datatype, 12);
EFA_V4_AT(Rta, atomic_op, 16);
EFA_V4_AT(Rta, id, 20);
static_assert(sizeof(ExtError) == 16);
EFA_V4_AT(ExtError, connid, 4);
static_assert(sizeof(ExtVoid) == 16);
EFA_V4_AT(ExtVoid, msg_id, 8);
static_assert(sizeof(ExtWriteData) == 24);
EFA_V4_AT(ExtWriteData, cq_data, 8);
EFA_V4_AT(ExtWriteData, length, 16);
#undef EFA_V4_AT

} // namespace efa::rdm::v4

#endif
