/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The RDM endpoint's records, shared by its parts (ep.h, receiver.h):
 *  - Peer: what the endpoint knows of one remote endpoint: its address handle, the
 *    message ids in each direction, the reorder buffer, the handshake, RNR backoff,
 *    liveness.
 *  - TxOp: one operation this endpoint started (send, RMA, atomic).
 *  - RxOp: one receive the application posted.
 *  - MsgRx: one message arriving (matched to an RxOp, or unexpected).
 * and the normalised arguments of every call.
 */
#ifndef EFA_RDM_OPS_H
#define EFA_RDM_OPS_H

#include "domain.h"
#include "info.h"
#include "rdm/atomic_ops.h"
#include "rdm/ilist.h"
#include "rdm/packet_io.h"
#include "rdm/pkt.h"
#include "rdm/proto.h"
#include "rdm/reorder.h"
#include "verbs/resources.h"

#include <rdma/fi_atomic.h>
#include <rdma/fi_ext_efa.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <ctime>
#include <vector>

namespace efa::rdm {

struct Peer;
struct TxOp;
/* When an operation started, for hang reports (report.cpp): a coarse clock (a few ms of
 * resolution, a memory read through the vDSO), so that stamping costs the data path
 * next to nothing. */
inline uint64_t coarse_now_ns()
{
	timespec ts;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec);
}

struct MsgRx;

/* A message's place on its sender's list (Peer::msgs), apart from the list MsgRx itself
 * is on (unexpected or rx_pending). */
struct MsgLink : IListNode<MsgLink> {
	MsgRx *m = nullptr;
};

struct Peer : IListNode<Peer> {
	explicit Peer(uint32_t window) : rob(window) {}
	fi_addr_t addr = FI_ADDR_NOTAVAIL; /* in the AV, or FI_ADDR_NOTAVAIL (implicit) */
	RawAddr raw{};
	Domain::AhRef *ah = nullptr;	   /* our reference */
	verbs::Dest dest{};
	uint32_t next_tx_id = 0;
	ReorderBuffer<Pkt> rob;
	bool hs_sent = false;	  /* our HANDSHAKE is out (or owed: hs_owed) */
	bool hs_owed = false;	  /* could not be sent yet */
	bool hs_inflight = false; /* one is on the device (not acknowledged yet) */
	bool hs_got = false;	  /* theirs arrived */
	bool got_pkt = false;	  /* a packet of theirs arrived (ever) */
	bool hs_blind = false;	  /* ours went out before any of theirs arrived: a v4 peer
				   * that did not know us yet dropped it */
	uint64_t features = 0;	  /* theirs: v4 extra_info word 0 */
	bool ext = false;	  /* it takes our extension (EXT_ERROR, EXT_VOID) */
	/* Medium messages being reassembled, in message id order, found by message id (few
	 * at a time; no allocation on the data path). */
	IList<MsgLink> active;
	/* FI_RM_DISABLED: message ids of sends refused with FI_ENORX that the peer has not
	 * been told to skip yet, as runs (first id, count); `void_pkt` is the one EXT_VOID
	 * packet that tells it, on the device or waiting to be resent (protocol.md,
	 * "FI_RM_DISABLED"). Only a peer of ours takes it (Peer::ext). */
	std::vector<std::pair<uint32_t, uint32_t>> voids; /* few; empty: no allocation */
	Pkt *void_pkt = nullptr;
	/* RNR: packets to resend, in order, not before `backoff_until` (steady ns). */
	IList<Pkt> queued;
	uint64_t backoff_until = 0;
	uint32_t backoff_us = 0;
	/* Liveness (docs/reliability.md, "Peer failure"). Messages from it not finished yet;
	 * whether it was heard from (a packet, or the device's ack of ours) since the last
	 * look of probe_peers, and since when it has been silent at those looks; a probe on
	 * its way; declared unresponsive by the device (new work fails fast until it is
	 * heard from again); removed from the AV (kept only while the device holds
	 * `posted` work requests to it). */
	IList<MsgLink> msgs;
	uint64_t silent_since = 0;
	uint32_t posted = 0;
	bool heard = false;
	bool probe_out = false;
	bool waiting = false; /* scratch of probe_peers */
	bool dead = false;
	uint32_t down = 0;     /* while dead: the status its operations failed with */
	bool replaced = false; /* dead for good: a new endpoint has its QP number */
	uint8_t foreign = 0;   /* dead for good: it sent a packet of this protocol version */
	bool released = false;
	/* Counters (fi_efa_peer_stats). */
	uint64_t tx_pkts = 0, tx_bytes = 0, rx_pkts = 0, rx_bytes = 0;
	uint64_t rnr_received = 0, rnr_resent = 0;
};

enum class TxKind : uint8_t { Msg, Tagged, Write, Read, Atomic };

struct TxOp : IListNode<TxOp> {
	uint64_t start_ns = coarse_now_ns();
	TxKind kind = TxKind::Msg;
	Proto proto{};
	Peer *peer = nullptr;
	fi_addr_t addr = FI_ADDR_NOTAVAIL;
	void *context = nullptr;
	uint64_t flags = 0;    /* the operation's flags */
	uint64_t cq_flags = 0; /* fi_cq entry flags */
	bool completion = false;
	iovec iov[kMaxRmaIov];	/* [iov_count]: entries beyond are not set (ObjPool) */
	void *desc[kMaxRmaIov]; /* [iov_count] */
	size_t iov_count = 0;
	uint64_t len = 0;
	uint64_t tag = 0;
	uint64_t data = 0;
	uint32_t msg_id = 0;
	uint32_t id = 0;      /* send_id / recv_id the peer answers to */
	uint32_t peer_id = 0; /* the peer's id for this operation (CTS recv_id) */
	uint64_t sent = 0;    /* payload bytes packed so far */
	uint64_t window = 0;  /* long-CTS: bytes the receiver accepts beyond `sent` */
	uint64_t done = 0;    /* emulated read / atomic response: bytes received */
	uint32_t inflight = 0;
	bool need_receipt = false; /* a RECEIPT (delivery complete) or EOR ends it */
	bool notice = false;	   /* a device write with CQ data: EXT_WRITE_DATA once acknowledged */
	bool got_receipt = false;
	bool responder = false; /* the responder of an emulated read: READRSP, then CTSDATA */
	bool rsp_sent = false;	/* its READRSP is out */
	int err = 0;	     /* first error (positive FI_E*) */
	uint32_t prov_errno = 0;
	/* RMA and atomics */
	fi_rma_iov rma[kMaxRmaIov]; /* [rma_count] */
	size_t rma_count = 0;
	fi_op aop = static_cast<fi_op>(FI_ATOMIC_OP_LAST); /* an enumerator of fi_op in 1.x, of an unnamed enum in 2.x */
	fi_datatype adt = static_cast<fi_datatype>(FI_DATATYPE_LAST);
	iovec result[kMaxRmaIov]; /* [result_count] */
	size_t result_count = 0;
	iovec compare[kMaxRmaIov]; /* [compare_count] */
	size_t compare_count = 0;
	/* LONGREAD: registrations of iovs whose descriptor grants no remote read. */
	InternalMr reg[kMaxRmaIov];

	/* What every operation records when it starts: its kind, peer and the call's
	 * context, flags and completion entry flags (`completion`: whether it reports one). */
	void start(TxKind k, Peer *p, fi_addr_t dest, void *ctx, uint64_t op_flags, uint64_t entry_flags,
		   bool wants_completion)
	{
		kind = k;
		peer = p;
		addr = dest;
		context = ctx;
		flags = op_flags;
		cq_flags = entry_flags;
		completion = wants_completion;
	}
	/* The local buffers of a send or RMA (count <= kMaxRmaIov, checked by the caller). */
	void set_iov(const iovec *v, void **d, size_t count, uint64_t total)
	{
		std::copy(v, v + count, iov);
		if (d)
			std::copy(d, d + count, desc);
		else
			std::fill(desc, desc + count, nullptr);
		iov_count = count;
		len = total;
	}
};

struct RxOp : IListNode<RxOp> {
	uint64_t start_ns = coarse_now_ns();
	bool tagged = false;
	fi_addr_t src = FI_ADDR_UNSPEC;
	uint64_t tag = 0;
	uint64_t ignore = 0;
	void *context = nullptr;
	uint64_t flags = 0;
	bool completion = true;
	iovec iov[kMaxRmaIov]; /* [iov_count] */
	size_t iov_count = 0;
	uint64_t cap = 0;
	/* FI_MULTI_RECV */
	bool multi = false;
	uint64_t used = 0;
	uint32_t msgs = 0;     /* messages placed in it and not completed */
	bool released = false; /* left the posted list */
	/* Taken by a same-host message (Receiver::shm_take; set there, not here): its
	 * length if shm told it (untagged), and whether shm's entry for it has the
	 * truncation sink (shm.h). */
	uint64_t shm_len;
	bool shm_sink;

	/* What every receive records from its call (`tag`, `ignore`, `src` and FI_MULTI_RECV
	 * are the caller's). */
	void start(bool is_tagged, void *ctx, uint64_t op_flags, bool wants_completion, const iovec *v, size_t count,
		   uint64_t total)
	{
		tagged = is_tagged;
		context = ctx;
		flags = op_flags;
		completion = wants_completion;
		std::copy(v, v + count, iov);
		iov_count = count;
		cap = total;
	}
};

/* How a message's data arrives: in its REQ, in MEDIUM segments, under CTS windows
 * (CTSDATA), by our RDMA reads of the sender's buffers, or through libfabric's shm
 * provider from a same-host peer (shm.h: shm copies it once the message is bound). */
enum class RxKind : uint8_t { Eager, Medium, LongCts, LongRead, Shm };

struct MsgRx : IListNode<MsgRx> {
	uint64_t start_ns = coarse_now_ns();
	Peer *peer = nullptr;
	fi_addr_t src = FI_ADDR_NOTAVAIL;
	RxKind kind = RxKind::Eager;
	bool write = false; /* the target of an emulated write: no receive, no completion */
	bool tagged = false;
	uint32_t msg_id = 0;
	uint64_t msg_len = 0;
	uint64_t tag = 0;
	uint64_t data = 0;
	bool has_data = false;
	bool dc = false;
	uint32_t send_id = 0;
	uint32_t id = 0; /* recv_id (long-CTS, long-read) */
	bool has_id = false;
	/* Bytes placed; with long-CTS, the window granted so far. */
	uint64_t received = 0;
	uint64_t granted = 0;
	/* MEDIUM: the segments taken so far (offset, length), sorted by offset; a segment
	 * that overlaps one of them is a duplicate and is dropped. */
	std::vector<std::pair<uint64_t, uint64_t>> segs;
	/* Until matched: the packets that arrived (copies), in order. */
	IList<Pkt> held;
	/* Once matched (or discarded): */
	bool bound = false;
	RxOp *rx = nullptr; /* a multi-receive buffer it takes a slice of */
	void *context = nullptr;
	bool completion = true;
	iovec dst[kMaxRmaIov]; /* [dst_count] */
	size_t dst_count = 0;
	uint64_t cap = 0;
	bool owes_cts = false;	   /* a CTS could not be sent yet */
	bool owes_receipt = false; /* a RECEIPT could not be sent yet */
	bool claimed = false;	   /* FI_CLAIM: waits for the claiming receive */
	bool discard = false;	   /* FI_DISCARD: data dropped, completion without data */
	/* LONGREAD: the sender's iovs, our registrations of the destination, progress. */
	RmaIov rd[kMaxRmaIov]; /* [rd_count] */
	uint32_t rd_count = 0;
	InternalMr reg[kMaxRmaIov];
	uint64_t rd_posted = 0; /* bytes of reads posted */
	uint64_t rd_done = 0;
	/* RUNTREAD: the first `runt` bytes come in packets (MEDIUM-like segments, counted in
	 * runt_got), the rest by our reads; `reads_over`: the reads are done and the message
	 * waits for the rest of its runt. */
	uint64_t runt = 0;
	uint64_t runt_got = 0;
	bool reads_over = false;
	bool rd_started = false;
	bool owes_reads = false;
	bool owes_eor = false;
	int err = 0;
	uint32_t prov_errno = 0;
	/* Shm: shm's entry for the message (fi_peer_rx_entry), until shm is told to copy or
	 * discard it (shm_sent); the message ends when shm's completion for it is read. One
	 * that found no receive is copied into our memory at once (pulled, shm.h): then its
	 * bytes are in shm_buf and a receive takes them as it takes an eager message's. */
	void *shm = nullptr;
	fi_addr_t shm_src = FI_ADDR_NOTAVAIL; /* the sender's address in shm's AV */
	bool shm_sent = false;
	bool sink = false;	  /* shm's copy has the truncation sink (shm.h) */
	bool pull_queued = false; /* waits for a pull slot */
	bool pulling = false;	  /* shm is copying it into our memory */
	int8_t slot = -1;	  /* the pull slot it is copied into, if any */
	std::unique_ptr<uint8_t[]> shm_buf;
	MsgLink plink; /* on peer->msgs until finished */
	MsgLink alink; /* MEDIUM: on peer->active until finished */
};

/* The flags each kind of call accepts (fi_msg(3), fi_tagged(3), fi_rma(3), fi_atomic(3)). */
inline constexpr uint64_t kCompletionFlags = FI_COMPLETION | FI_INJECT_COMPLETE | FI_TRANSMIT_COMPLETE |
					     FI_DELIVERY_COMPLETE | FI_MORE | FI_FENCE;
inline constexpr uint64_t kSendFlags = kCompletionFlags | FI_INJECT | FI_REMOTE_CQ_DATA;
inline constexpr uint64_t kRecvFlags = FI_COMPLETION | FI_MORE | FI_MULTI_RECV | FI_PEEK | FI_CLAIM | FI_DISCARD;
/* FI_EFA_WR_HIGH_PPS: the processing hint, passed on with device RDMA writes. */
inline constexpr uint64_t kRmaFlags = kCompletionFlags | FI_INJECT | FI_REMOTE_CQ_DATA | FI_EFA_WR_HIGH_PPS;
inline constexpr uint64_t kAtomicFlags = kCompletionFlags | FI_INJECT;

/* The arguments of every send-like call, once normalised. */
struct SendArgs {
	const iovec *iov;
	void **desc;
	size_t count;
	fi_addr_t dest;
	uint64_t tag;
	uint64_t data;
	uint64_t flags;
	void *context;
	bool tagged;
};

/* The arguments of every RMA call. */
struct RmaArgs {
	const iovec *iov;
	void **desc;
	size_t count;
	fi_addr_t dest;
	const fi_rma_iov *rma;
	size_t rma_count;
	uint64_t data;
	uint64_t flags;
	void *context;
	bool write;
};

/* The arguments of every atomic call, with fi_ioc counts in elements. */
struct AtomicArgs {
	AtomicKind kind;
	const fi_ioc *src;
	size_t src_count;
	const fi_ioc *cmp;
	size_t cmp_count;
	const fi_ioc *res;
	size_t res_count;
	size_t count; /* elements (FI_ATOMIC_READ: from the result buffers) */
	fi_addr_t dest;
	const fi_rma_ioc *rma;
	size_t rma_count;
	fi_datatype dt;
	fi_op op;
	uint64_t flags;
	void *context;
};

/* A control packet (RECEIPT, ATOMRSP, EXT_ERROR, EXT_WRITE_DATA), sent by progress when
 * no transmit buffer is free (or, EXT_ERROR, until the peer's HANDSHAKE says it takes
 * it). */
struct Ctl {
	Peer *peer;
	Type type;
	uint32_t a;   /* send_id (RECEIPT, EXT_ERROR) / recv_id (ATOMRSP) */
	uint32_t b;   /* msg_id (RECEIPT) */
	uint32_t err; /* EXT_ERROR: positive FI_E* */
	std::vector<uint8_t> payload;
	uint64_t data = 0; /* EXT_WRITE_DATA: the remote CQ data and the write's length */
	uint64_t len = 0;
};

/* The arguments of every receive-like call. */
struct RecvArgs {
	const iovec *iov;
	void **desc;
	size_t count;
	fi_addr_t src;
	uint64_t tag;
	uint64_t ignore;
	uint64_t flags;
	void *context;
	bool tagged;
};

/* Packets dropped, by reason (for the log at close and for tests). */
struct Drops {
	uint64_t malformed = 0; /* failed to parse, or more bytes than their message has */
	uint64_t unknown = 0;	/* for an operation or message not known (any more) */
	uint64_t dup = 0;	/* duplicates */
	uint64_t far = 0;	/* requests beyond the reorder reach */
	uint64_t foreign = 0;	/* of another protocol version */
};

/* Copies between iovecs and a flat buffer at an offset into the iovec space. Returns the
 * bytes copied (short when the iovecs end first). */
size_t iov_copy(const iovec *iov, size_t count, uint64_t off, uint8_t *buf, size_t len, bool to_iov);
/* iov_copy, inline for the common case: one iov that holds the whole range. */
inline size_t iov_copy_inline(const iovec *iov, size_t count, uint64_t off, uint8_t *buf, size_t len, bool to_iov)
{
	if (count != 1 || off > iov[0].iov_len || len > iov[0].iov_len - off)
		return iov_copy(iov, count, off, buf, len, to_iov);
	uint8_t *at = static_cast<uint8_t *>(iov[0].iov_base) + off;
	if (len) /* a zero-length iov may have a null base */
		std::memcpy(to_iov ? at : buf, to_iov ? buf : at, len);
	return len;
}
inline size_t iov_to_buf(const iovec *iov, size_t count, uint64_t off, void *dst, size_t len)
{
	return iov_copy_inline(iov, count, off, static_cast<uint8_t *>(dst), len, false);
}
inline size_t buf_to_iov(const iovec *iov, size_t count, uint64_t off, const void *src, size_t len)
{
	return iov_copy_inline(iov, count, off, static_cast<uint8_t *>(const_cast<void *>(src)), len, true);
}
inline uint64_t iov_total(const iovec *iov, size_t count)
{
	if (count == 1) /* the common call, without the loop's vectorised set-up */
		return iov[0].iov_len;
	uint64_t n = 0;
	for (size_t i = 0; i < count; i++)
		n += iov[i].iov_len;
	return n;
}
/* -FI_EINVAL for a send of `count` iovs beyond tx_attr->iov_limit or without them, logged once. */
ssize_t bad_send_iovs(size_t count);
/* The iovs of a send (at most tx_attr->iov_limit, none missing): -FI_EINVAL with its
 * warning, else 0 with their bytes in len. */
inline ssize_t send_iovs(const SendArgs &a, uint64_t &len)
{
	if (a.count > kRdmIovLimit || (a.count && !a.iov)) [[unlikely]]
		return bad_send_iovs(a.count);
	len = iov_total(a.iov, a.count);
	return 0;
}


} // namespace efa::rdm

#endif
