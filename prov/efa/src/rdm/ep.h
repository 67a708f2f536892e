/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The efa fabric's RDM endpoint: the protocol of docs/protocol.md over one SRD QP.
 *
 * Objects (packets and their pools: packet_io.h; the peer table: peer_table.h):
 *  - Peer: what the endpoint knows of one remote endpoint: its address handle, the
 *    message ids in each direction, the reorder buffer, the handshake, RNR backoff.
 *  - TxOp: one operation this endpoint started (send, RMA, atomic).
 *  - RxOp: one receive the application posted.
 *  - MsgRx: one message arriving (matched to an RxOp, or unexpected).
 *
 * Concurrency: one lock per endpoint guards all of the above; the API entry points
 * take it, and so does the completion path (Cq::progress -> Hook, which holds the CQ's
 * lock first). Completions are staged on CQs under their stage_lock (innermost). All
 * are off under FI_THREAD_DOMAIN and FI_THREAD_COMPLETION (common/lock.h).
 *
 * Progress is manual (FI_PROGRESS_MANUAL): reading a bound CQ (or a counter) polls the
 * device, handles packets, resends what RNR held back and refills receive buffers.
 */
#ifndef EFA_RDM_EP_H
#define EFA_RDM_EP_H

#include "common/lock.h"
#include "ep_base.h"
#include "rdm/entry.h"
#include "rdm/match.h"
#include "rdm/packet_io.h"
#include "rdm/peer_table.h"
#include "rdm/pkt.h"
#include "rdm/pool.h"
#include "rdm/proto.h"
#include "rdm/reorder.h"

#include <rdma/fi_atomic.h>
#include <rdma/fi_ext_efa.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

#include <algorithm>
#include <deque>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace efa::rdm {

struct Ep;
struct Peer;
struct TxOp;
struct MsgRx;

/* A message's place on its sender's list (Peer::msgs), apart from the list MsgRx itself
 * is on (unexpected or rx_pending). */
struct MsgLink : IListNode<MsgLink> {
	MsgRx *m = nullptr;
};

/* A send's place on its peer's list of sends waiting for a RECEIPT (Peer::receipts),
 * apart from the list TxOp itself is on (tx_pending). */
struct TxLink : IListNode<TxLink> {
	TxOp *op = nullptr;
};

struct Peer : IListNode<Peer> {
	explicit Peer(uint32_t window) : rob(window) {}
	fi_addr_t addr = FI_ADDR_NOTAVAIL; /* in the AV, or FI_ADDR_NOTAVAIL (implicit) */
	RawAddr raw{};
	Domain::AhRef *ah = nullptr;	   /* our reference */
	verbs::Dest dest{};
	uint32_t next_tx_id = 0;
	ReorderBuffer<Pkt> rob;
	bool hs_sent = false;  /* our HANDSHAKE is out (or owed: hs_owed) */
	bool hs_owed = false;  /* could not be sent yet */
	bool hs_got = false;   /* theirs arrived */
	/* Known to speak our protocol: its address carries kRdmNameMark, or a packet of
	 * ours (or our probe) came from it. Until then nothing of our protocol goes to it:
	 * the probe first (`asked_at`: when, steady ns), and work waits (protocol.md 12.2). */
	bool speaks_ours = false;
	bool asked_warned = false;
	uint64_t asked_at = 0;
	uint64_t features = 0; /* theirs */
	uint32_t max_payload = 0;
	uint32_t rx_window = 0; /* theirs (0: not known yet) */
	/* Medium messages being reassembled, and our eager and medium sends waiting for a
	 * RECEIPT: both in message id order, found by message id (few at a time; no
	 * allocation on the data path). */
	IList<MsgLink> active;
	IList<TxLink> receipts;
	/* FI_RM_DISABLED: message ids of sends refused with FI_ENORX that the peer has not
	 * been told to skip yet, as runs (first id, count); `void_pkt` is the one VOID
	 * packet that tells it, on the device or waiting to be resent (protocol.md
	 * section 11). */
	std::deque<std::pair<uint32_t, uint32_t>> voids;
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
};

enum class TxKind : uint8_t { Msg, Tagged, Write, Read, Atomic };

struct TxOp : IListNode<TxOp> {
	TxKind kind;
	Proto proto;
	Peer *peer = nullptr;
	fi_addr_t addr = FI_ADDR_NOTAVAIL;
	void *context = nullptr;
	uint64_t flags = 0;    /* the operation's flags */
	uint64_t cq_flags = 0; /* fi_cq entry flags */
	bool completion = false;
	iovec iov[kMaxRmaIov] = {};
	void *desc[kMaxRmaIov] = {};
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
	bool need_receipt = false;
	bool notice = false; /* a device write with CQ data: WRITE_DATA once it is acknowledged */
	bool got_receipt = false;
	bool responder = false; /* the target side of an emulated read: sends READRSP */
	int err = 0;	     /* first error (positive FI_E*) */
	uint32_t prov_errno = 0;
	/* RMA and atomics */
	fi_rma_iov rma[kMaxRmaIov] = {};
	size_t rma_count = 0;
	fi_op aop = static_cast<fi_op>(FI_ATOMIC_OP_LAST); /* an enumerator of fi_op in 1.x, of an unnamed enum in 2.x */
	fi_datatype adt = static_cast<fi_datatype>(FI_DATATYPE_LAST);
	iovec result[kMaxRmaIov] = {};
	size_t result_count = 0;
	iovec compare[kMaxRmaIov] = {};
	size_t compare_count = 0;
	/* LONGREAD: registrations of iovs whose descriptor grants no remote read. */
	verbs::Mr reg[kMaxRmaIov];
	TxLink rlink; /* on peer->receipts while it waits for one */

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
		iov_count = count;
		len = total;
	}
};

struct RxOp : IListNode<RxOp> {
	bool tagged = false;
	fi_addr_t src = FI_ADDR_UNSPEC;
	uint64_t tag = 0;
	uint64_t ignore = 0;
	void *context = nullptr;
	uint64_t flags = 0;
	bool completion = true;
	iovec iov[kMaxRmaIov] = {};
	size_t iov_count = 0;
	uint64_t cap = 0;
	/* FI_MULTI_RECV */
	bool multi = false;
	uint64_t used = 0;
	uint32_t msgs = 0;     /* messages placed in it and not completed */
	bool released = false; /* left the posted list */

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

struct MsgRx : IListNode<MsgRx> {
	Peer *peer = nullptr;
	fi_addr_t src = FI_ADDR_NOTAVAIL;
	PktType type = PktType::EagerMsg;
	bool tagged = false;
	uint32_t msg_id = 0;
	uint64_t msg_len = 0;
	uint64_t tag = 0;
	uint64_t data = 0;
	bool has_data = false;
	bool dc = false;
	uint32_t send_id = 0;
	uint32_t id = 0; /* recv_id (long-CTS) */
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
	iovec dst[kMaxRmaIov] = {};
	size_t dst_count = 0;
	uint64_t cap = 0;
	bool owes_cts = false;	   /* a CTS could not be sent yet */
	bool owes_receipt = false; /* a RECEIPT could not be sent yet */
	bool claimed = false;	   /* FI_CLAIM: waits for the claiming receive */
	bool discard = false;	   /* FI_DISCARD: data dropped, completion without data */
	/* LONGREAD: the sender's iovs, our registrations of the destination, progress. */
	RmaIov rd[kMaxRmaIov] = {};
	uint32_t rd_count = 0;
	verbs::Mr reg[kMaxRmaIov];
	uint64_t rd_posted = 0; /* bytes of reads posted */
	uint64_t rd_done = 0;
	bool owes_reads = false;
	bool owes_eor = false;
	int err = 0;
	uint32_t prov_errno = 0;
	MsgLink plink; /* on peer->msgs until finished */
	MsgLink alink; /* MEDIUM: on peer->active until finished */
};

class Hook : public CqUser {
public:
	explicit Hook(Ep *ep) : ep_(ep) {}
	uint32_t qpn() const override;
	void on_wc(const verbs::Wc &wc, Cq &cq) override;
	void on_progress(Cq &cq) override;

private:
	Ep *ep_;
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

/* A control packet that found no transmit buffer, sent by progress. */
struct Ctl {
	Peer *peer;
	PktType type; /* Receipt, Error or AtomRsp */
	uint32_t a;   /* send_id / op_id / recv_id */
	uint32_t b;   /* msg_id */
	uint32_t err;
	std::vector<uint8_t> payload;
	uint64_t data = 0; /* WriteData: the remote CQ data and the write's length */
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

struct Ep : EpBase {
	static constexpr Magic kMagic = Magic::RdmEp;

	DataLock lock; /* off when the application serialises (common/lock.h) */
	Hook hook{this};

	/* Configuration, fixed at fi_enable. */
	size_t mtu = 0;
	size_t inject_size = 0;
	size_t max_medium = 0;
	size_t min_read = 0;
	size_t credits = 0;
	uint32_t rx_window = 0;
	uint64_t features = 0; /* ours, as the handshake announces them */
	bool rm_enabled = true;
	bool use_device_rdma = true; /* FI_OPT_EFA_USE_DEVICE_RDMA */
	bool directed = false;
	size_t min_multi_recv = 0;
	uint64_t probe_ns = 0; /* FI_EFA_PEER_PROBE_INTERVAL; 0: no probes */
	static constexpr uint64_t kAskWarnNs = 2000000000; /* ask_protocol's warning */
	uint64_t next_probe_check = 0;

	/* Packets and entries. */
	PacketIo io;
	ObjPool<TxOp> txops;
	ObjPool<RxOp> rxops;
	ObjPool<MsgRx> msgs;
	IdTable<TxOp> tx_ids;
	IdTable<MsgRx> rx_ids;

	PeerTable peers;

	Matcher<RxOp, MsgRx> match;
	std::unordered_map<void *, MsgRx *> claimed; /* FI_CLAIM, by context */
	IList<TxOp> tx_pending;			     /* long-CTS sends with a window to fill */
	IList<MsgRx> rx_pending;		     /* receives owing a control packet */
	std::deque<Ctl> ctl_pending;		     /* target answers waiting for a buffer */

	/* Statistics, for logs and tests. */
	uint64_t dropped_malformed = 0, dropped_unknown = 0, dropped_dup = 0, dropped_foreign = 0;
	bool warned_malformed = false, warned_foreign = false;
	bool warned_far = false;
	uint64_t dropped_far = 0; /* requests beyond the reorder reach */

	/* fi_enable: enable() sets up the QP and packets (endpoint lock held); the caller
	 * then attaches to the CQs without it, and start() posts the receive buffers. */
	int enable();
	void start();
	bool enabling = false;
	int close();

	/* rdm/send.cpp: the life of a send */
	ssize_t send(const SendArgs &a);
	void pump(TxOp &op);
	void tx_done(Pkt *pkt, const verbs::Wc &wc);
	void finish_tx(TxOp *op);
	/* Reports an operation's failure (positive FI_E*) once it has nothing in flight. */
	void fail_tx(TxOp *op, int err, uint32_t prov_errno);

	/* rdm/receive.cpp: receives and arriving messages */
	ssize_t recv(const RecvArgs &a);
	int cancel(void *context);
	void start_msg(Peer &p, Pkt *pkt, const Parsed &pk);
	ssize_t peek(const RecvArgs &a);
	void msg_segment(MsgRx &m, uint64_t off, const uint8_t *data, size_t len);
	void place(MsgRx &m, const Parsed &pk);
	void bind_msg(MsgRx &m, RxOp *rx);
	void drain_held(MsgRx &m);
	void advance_msg(MsgRx *m);
	void finish_msg(MsgRx *m);
	/* A MEDIUM segment of a message already started (dropped as a duplicate if none is). */
	void route_segment(Peer &p, const Pkt &pkt, const Parsed &pk);
	/* A MEDIUM segment of m: taken once, held until m is matched, else placed. */
	void add_segment(MsgRx &m, const Pkt &pkt, const Parsed &pk);
	/* The medium message with id `msg_id` p is sending us, if one is being reassembled. */
	static MsgLink *active_msg(const Peer &p, uint32_t msg_id)
	{
		return p.active.find([msg_id](const MsgLink &l) { return l.m->msg_id == msg_id; });
	}
	void handle_data(Peer &p, const Parsed &pk);
	/* LONGREAD (rdm/longread.cpp) */
	bool longread_ok(const Peer &p, uint64_t len, size_t iov_count) const;
	int longread_send(TxOp &op, uint16_t flags);
	void longread_start(MsgRx &m);
	void longread_pump(MsgRx &m);
	void longread_read_done(Pkt *pkt, const verbs::Wc &wc);

	/* rdm/pkt_ctl.cpp: the control packets, built, sent and handled */
	bool send_handshake(Peer &p);
	/* Work to p, not known to speak our protocol: sends the probe once, warns when the
	 * answer is late, and returns -FI_EAGAIN (protocol.md section 12.2). */
	ssize_t ask_protocol(Peer &p);
	/* A probe arrived (rx_done): its sender is one of ours and gets our HANDSHAKE. */
	void handle_probe(const RawAddr &from, const verbs::Wc &wc);
	void handle_handshake(Peer &p, const Parsed &pk);
	bool send_cts(MsgRx &m);
	void handle_cts(Peer &p, const Parsed &pk);
	bool send_eor(MsgRx &m);
	void handle_eor(Peer &p, const Parsed &pk);
	void handle_receipt(Peer &p, const Parsed &pk);
	void handle_write_data(Peer &p, const Parsed &pk);
	void handle_error(Peer &p, const Parsed &pk);
	/* A target's answer (RECEIPT, WRITE_DATA, ERROR, ATOMRSP): sent now, or queued on
	 * ctl_pending for progress when no transmit buffer is free. */
	void send_ctl(Ctl c);
	bool try_ctl(Ctl &c);

	/* rdm/rma.cpp: the initiator */
	ssize_t rma(const RmaArgs &a);
	ssize_t atomic(const AtomicArgs &a);
	bool device_rma_ok(const TxOp &op, bool write) const;
	void post_device_rma(TxOp &op, bool write);
	void handle_read_rsp(Peer &p, const Parsed &pk);
	void handle_atom_rsp(Peer &p, const Parsed &pk);

	/* rdm/target.cpp: the target of emulated RMA and atomics */
	int check_rma(const RmaIov *iov, uint32_t n, uint64_t access, iovec *out);
	void handle_write_req(Peer &p, const Parsed &pk);
	void handle_read_req(Peer &p, const Parsed &pk);
	void handle_atomic_req(Peer &p, const Parsed &pk);
	void remote_write_imm(const verbs::Wc &wc);

	/* rdm/arrival.cpp: every received packet */
	void rx_done(Pkt *pkt, const verbs::Wc &wc);
	void dispatch(Peer &p, Pkt *pkt, const Parsed &pk);
	void ordered_req(Peer &p, Pkt *pkt, const Parsed &pk);
	void process_req(Peer &p, Pkt *pkt, const Parsed &pk);
	/* Records a MEDIUM segment of m; false when it overlaps one taken already. */
	static bool take_segment(MsgRx &m, const Parsed &pk);
	/* Whether an ordered REQ for an id ahead duplicates what is queued for that id. */
	static bool queued_dup(const Pkt *chain, const Parsed &pk);

	/* rdm/peer.cpp: peers as operations and packets meet them; progress */
	Peer *peer_for_addr(fi_addr_t addr);
	/* A peer that answered RNR is left alone until its backoff ends and its queue of
	 * packets to resend is empty: new work to it waits (-FI_EAGAIN, or queued). */
	/* New packets to p wait behind its RNR backoff. Not with FI_RM_DISABLED: they go to
	 * the device, which refuses them (FI_ENORX) while the peer has no buffer. */
	bool held_back(const Peer &p) const
	{
		return rm_enabled && (!p.queued.empty() || now_ns() < p.backoff_until);
	}
	/* A new message id for p would be the reorder reach (protocol.md section 7) or more
	 * ahead of the oldest refused id p has not been told to skip (FI_RM_DISABLED). */
	bool ids_full(const Peer &p) const
	{
		if (!p.void_pkt)
			return false;
		uint32_t oldest = reinterpret_cast<const RtmHdr *>(p.void_pkt->buf)->msg_id;
		for (const auto &r : p.voids)
			if (int32_t(r.first - oldest) < 0)
				oldest = r.first;
		const uint32_t reach = std::max(p.rx_window, ReorderBuffer<Pkt>::kMinReach);
		return p.next_tx_id - oldest >= reach;
	}
	void void_ids(Peer &p, Pkt *pkt, uint32_t id);
	void void_next(Peer &p, Pkt *pkt);
	Peer *peer_from_wc(const verbs::Wc &wc, const Parsed &pk);
	/* The same from the connection id and the address a packet carries (`what`: its kind, for the log). */
	Peer *peer_from_src(const verbs::Wc &wc, uint32_t conn, const RawAddr *ra, const char *what);
	Peer *known_peer(uint16_t ahn, uint32_t qpn, uint32_t conn);
	/* An implicit peer got its fi_addr: its unreceived messages now come from it. */
	void adopted(Peer &p);
	/* Adopts implicit peers inserted into the AV since the last look (cheap when none). */
	void adopt_pending()
	{
		peers.adopt_inserted([this](Peer &p) { adopted(p); });
	}

	/* rdm/liveness.cpp: peer failure, probes, fi_av_remove (docs/reliability.md, "Peer failure"). */
	/* Releases the peers of entries removed from the AV since the last look (cheap
	 * when none). */
	void sync_removed()
	{
		if (peers.removed())
			release_removed();
	}
	void release_removed();
	/* Ends every operation waiting on `p` with err (positive FI_E*) and status. */
	void peer_failed(Peer &p, int err, uint32_t status);
	/* The device says `p` is gone: fail its work, mark it dead. */
	void peer_unresponsive(Peer &p, uint32_t status);
	/* A packet or an ack came from `p`. */
	void peer_heard(Peer &p)
	{
		p.heard = true;
		if (p.dead && !p.replaced && !p.foreign)
			peer_revived(p);
	}
	void peer_revived(Peer &p);
	/* A packet from `p`'s QP number with another connection id `conn`. */
	void peer_replaced(Peer &p, uint32_t conn);
	/* A packet of another protocol version (not ours: e.g. upstream's v4) arrived:
	 * drop it and, when its sender is a known peer, fail that peer for good
	 * (protocol.md section 12). */
	void foreign_packet(const Pkt &pkt, const verbs::Wc &wc);
	void peer_foreign(Peer &p, unsigned version);
	/* The answer of an operation on a dead peer, with a log line. */
	ssize_t dead_peer(const Peer &p) const;
	/* The start of every send, RMA and atomic call (`what`: the call, for the log):
	 * check_call's verdict as 0 or an error code with its warning. */
	ssize_t check_start(const char *what, uint64_t flags, uint64_t allowed) const
	{
		const CallCheck c = rdm::check_call(enabled, tx_cq != nullptr, flags, allowed);
		return c == CallCheck::Ok ? 0 : call_error(c, what, flags, allowed);
	}
	ssize_t call_error(CallCheck c, const char *what, uint64_t flags, uint64_t allowed) const;
	/* The peer an operation goes to, or null with the answer in `err`: not in the AV
	 * (-FI_EINVAL), failed (dead_peer), not known to speak our protocol (ask_protocol),
	 * backing off or, when it takes a new message id (`new_id`), too far ahead
	 * (-FI_EAGAIN). */
	Peer *tx_peer(fi_addr_t dest, bool new_id, ssize_t &err)
	{
		Peer *p = peer_for_addr(dest);
		if (p && !p->dead && p->speaks_ours && !held_back(*p) && !(new_id && ids_full(*p)))
			return p;
		err = tx_peer_error(dest, p);
		return nullptr;
	}
	ssize_t tx_peer_error(fi_addr_t dest, Peer *p);
	void probe_peers(uint64_t now);
	bool send_probe(Peer &p);
	/* A work request to the peer of `pkt` came back from the device. */
	void unpost(Peer *p);
	void link_msg(Peer &p, MsgRx &m) { m.plink.m = &m; p.msgs.push_back(&m.plink); }
	void progress();
	/* Packets: a transmit buffer with the base header's fields filled by the caller. */
	Pkt *tx_pkt(Peer &p, TxOp *op);
	/* Posts (or, while the peer backs off, queues) a built packet. 0 or -FI_E*. */
	int post(Pkt *pkt);
	/* Flags of a REQ to `p`: RAW_ADDR until p's handshake has arrived. */
	uint16_t req_flags(const Peer &p) const { return p.hs_got ? 0 : kFlagRawAddr; }
	RawAddr self_addr() const;
	HandshakeInfo own_handshake() const; /* what our HANDSHAKEs announce */
	void write_raw_addr(PktWriter &w, const Peer &p);
	uint64_t now_ns() const;

	/* Completions. */
	void complete_tx(TxOp &op);
	void complete_rx(MsgRx &m);
	void report_error(Cq *cq, void *context, uint64_t flags, int err, uint32_t prov_errno, const std::string &text,
			  uint64_t len = 0, uint64_t olen = 0, void *buf = nullptr, uint64_t data = 0, uint64_t tag = 0);
};

extern fi_ops_msg g_msg_ops;
extern fi_ops_tagged g_tagged_ops;
extern fi_ops_rma g_rma_ops;
extern fi_ops_atomic g_atomic_ops;

/* Copies between iovecs and a flat buffer at an offset into the iovec space. Returns the
 * bytes copied (short when the iovecs end first). */
size_t iov_to_buf(const iovec *iov, size_t count, uint64_t off, void *dst, size_t len);
size_t buf_to_iov(const iovec *iov, size_t count, uint64_t off, const void *src, size_t len);
uint64_t iov_total(const iovec *iov, size_t count);

} // namespace efa::rdm

#endif
