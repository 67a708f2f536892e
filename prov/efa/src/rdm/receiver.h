/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The receiving side of the RDM endpoint (docs/protocol.md section 5): posted
 * receives and unexpected messages and their matching, FI_PEEK / FI_CLAIM / FI_DISCARD,
 * FI_MULTI_RECV, fi_cancel, placing data and reassembly, read-based messages (the RDMA
 * reads and the EOR), the control packets a message owes its sender (CTS, RECEIPT, EOR)
 * until a transmit buffer is free, and the completion of a message.
 *
 * It owns its receives and messages and reaches everything else through RxPort: packets
 * out (a transmit buffer, posting it, an RDMA read), copies of packets it holds until a
 * message is matched, and completions. The endpoint implements RxPort with PacketIo,
 * the device and its CQs and counters; test_rdm_receiver implements it with lists, so
 * the matching and reassembly rules are tested without a device.
 *
 * Packets reach it already parsed, from a known peer, in message-id order (arrival.cpp
 * and the peer's reorder buffer): start_msg for the first packet of a message,
 * add_segment / route_segment for later MEDIUM segments, handle_data for CTSDATA,
 * start_write for the REQ of an emulated write, skip_ids for EXT_VOID.
 */
#ifndef EFA_RDM_RECEIVER_H
#define EFA_RDM_RECEIVER_H

#include "rdm/match.h"
#include "rdm/ops.h"
#include "rdm/pool.h"

#include <string>
#include <unordered_map>

namespace efa::rdm {

/* What the Receiver needs from the rest of the endpoint (see the top of this file). */
class RxPort {
public:
	virtual ~RxPort() = default;
	/* A transmit buffer for a packet to p, or null when none is free now (the Receiver
	 * keeps the message on its pending list and tries again in progress()). */
	virtual Pkt *rx_tx_pkt(Peer &p) = 0;
	/* Sends a built packet (or queues it behind p's backoff). */
	virtual void rx_post(Pkt *pkt) = 0;
	/* A transmit buffer taken and not used after all. */
	virtual void rx_put_tx(Pkt *pkt) = 0;
	/* Copies of received packets held by unmatched messages. */
	virtual Pkt *rx_copy(Pkt &pkt) = 0;
	virtual void rx_free_copy(Pkt *pkt) = 0;
	/* Senders inserted into the AV since the last look get their fi_addr (before a
	 * directed receive or peek matches). */
	virtual void rx_adopt_pending() = 0;
	/* Read-based messages: registers a receive buffer for local write; posts an RDMA
	 * read of `len` bytes from (raddr, rkey) at the endpoint of pkt->msg's sender into
	 * `buf` (registered as `mr`), whose completion comes back to read_done(pkt, ...).
	 * 0 or -FI_E*. */
	virtual int rx_reg(void *buf, size_t len, InternalMr &out) = 0;
	virtual int rx_read(Pkt *pkt, void *buf, uint32_t len, const InternalMr &mr, uint64_t raddr, uint32_t rkey) = 0;
	/* Completions: an entry on the receive CQ (dropped when there is none), an error
	 * entry, and the receive (or remote-write) counter. */
	virtual void rx_complete(const fi_cq_tagged_entry &e, fi_addr_t src) = 0;
	virtual void rx_error(void *context, uint64_t flags, int err, uint32_t prov_errno, const std::string &text,
			      uint64_t len, uint64_t olen, void *buf, uint64_t data, uint64_t tag) = 0;
	virtual void rx_count(bool remote_write, bool ok) = 0;
	/* Same-host messages (shm.h): shm copies bound message m into m.dst, or drops a
	 * discarded one (no completion follows a discard). 0 or -FI_E*. Ports without a
	 * same-host path never see such a message. */
	virtual int rx_shm_start(MsgRx &) { return -FI_ENOSYS; }
	virtual void rx_shm_discard(MsgRx &) {}
};

/* Fixed at fi_enable. */
struct RxConfig {
	bool directed = false;	     /* FI_DIRECTED_RECV: receives match their source */
	bool selective = false;	     /* FI_SELECTIVE_COMPLETION on the receive side */
	size_t min_multi_recv = 0;   /* FI_OPT_MIN_MULTI_RECV */
	size_t size = 0;	     /* rx_attr->size: receives posted at once */
	uint32_t qkey = 0;	     /* our QP's, in the headers of the packets it sends */
	uint64_t cts_window = 0;     /* bytes one CTS grants */
	uint64_t max_read = 0;	     /* bytes one RDMA read moves */
};

class Receiver {
public:
	Receiver(RxPort &port, Drops &drops) : port_(port), drops_(drops) {}
	Receiver(const Receiver &) = delete;
	Receiver &operator=(const Receiver &) = delete;

	void configure(const RxConfig &c);
	const RxConfig &config() const { return cfg_; }
	/* FI_OPT_MIN_MULTI_RECV may change at any time. */
	void set_min_multi_recv(size_t v) { cfg_.min_multi_recv = v; }

	/* The application's calls (the endpoint checked that it is enabled and has a
	 * receive CQ). 0 or -FI_E*; a peek that finds nothing reports FI_ENOMSG. */
	/* Inline for the common call (performance.md, "Instructions per small message"):
	 * one buffer, no peek, claim or multi-receive, not directed, and no message waiting
	 * in the queue it would go to; every other takes recv_general. */
	[[gnu::always_inline]] ssize_t recv(const RecvArgs &a)
	{
		if ((a.flags & ~(FI_COMPLETION | FI_MORE)) || a.count != 1 || !a.iov || !match_.unexpected(a.tagged).empty() ||
		    (cfg_.directed && a.src != FI_ADDR_UNSPEC))
			return recv_general(a);
		RxOp *r = new_rxop(a, FI_ADDR_UNSPEC, false);
		if (!r)
			return -FI_EAGAIN;
		match_.post(r->tagged, r);
		return 0;
	}
	ssize_t recv_general(const RecvArgs &a);
	int cancel(void *context);
	size_t posted_count() const { return rxops_.in_use(); }
	size_t pool_bytes() const { return rxops_.bytes() + msgs_.bytes() + ids_.bytes(); }
	bool busy() const { return msgs_.in_use() != 0; }
	/* Messages in progress or receives posted (hang reports at close and exit). */
	bool pending() const { return busy() || rxops_.in_use() != 0; }

	/* Packets (see the top of this file). */
	void start_msg(Peer &p, Pkt &pkt, const Parsed &pk);
	/* An eager message (no delivery complete) that a posted receive takes whole:
	 * placed and completed, true; false (nothing done) otherwise. Through the port type
	 * P: the endpoint's arrival shortcut passes its own final port, whose calls then
	 * inline (Ep::rx_eager); start_msg passes the RxPort. */
	template <class P> bool take_eager(P &port, Peer &p, const v4::Eager &pk)
	{
		const bool tagged = pk.tagged;
		RxOp *r = match_.find_posted(tagged, p.addr, pk.tag);
		if (!r || r->multi || pk.payload_len > r->cap)
			return false;
		match_.unpost(tagged, r);
		buf_to_iov(r->iov, r->iov_count, 0, pk.payload, pk.payload_len);
		port.rx_count(false, true);
		if (r->completion) {
			fi_cq_tagged_entry e{};
			e.op_context = r->context;
			e.flags = FI_RECV | (tagged ? FI_TAGGED : FI_MSG) | (pk.has_cq_data ? FI_REMOTE_CQ_DATA : 0);
			e.len = pk.payload_len;
			e.buf = r->iov_count ? r->iov[0].iov_base : nullptr;
			e.data = pk.cq_data & 0xffffffffu; /* cq_data_size is 4 */
			e.tag = pk.tag;
			port.rx_complete(e, p.addr);
		}
		rxops_.put(r);
		return true;
	}
	/* A MEDIUM segment of a message already started (a duplicate when none is). */
	void route_segment(Peer &p, Pkt &pkt, const Parsed &pk);
	/* A MEDIUM segment of m: taken once, held until m is matched, else placed. */
	void add_segment(MsgRx &m, Pkt &pkt, const Parsed &pk);
	/* The medium message with id `msg_id` p is sending us, if one is being reassembled. */
	static MsgLink *active_msg(const Peer &p, uint32_t msg_id)
	{
		return p.active.find([msg_id](const MsgLink &l) { return l.m->msg_id == msg_id; });
	}
	void handle_data(Peer &p, const Parsed &pk);
	/* The target of an emulated write: its REQ (EAGER_RTW, LONGCTS_RTW, LONGREAD_RTW,
	 * with or without delivery complete) starts a message into dst (checked). */
	void start_write(Peer &p, const Parsed &pk, const iovec *dst, size_t count);
	/* EXT_VOID: p's message ids from the packet's on will not come. */
	void skip_ids(Peer &p, const Parsed &pk);
	/* An RDMA read of a read-based message came back (status `ok`, else `status`). */
	void read_done(Pkt *pkt, bool ok, uint32_t status);

	/* Same-host messages (shm.h). A message shm announces (its source as an fi_addr of
	 * ours, its length when shm tells it): matched against the posted receives (then
	 * bound, and shm copies it at once), or left for the caller to queue with
	 * shm_queue once shm keeps it (shm_forget when it does not). Null when no message
	 * entry is free. shm_done: shm's completion (or error) for a message it copied.
	 * libfabric 1.17 tells an untagged message's length on arrival, a tagged one's only
	 * in its completion (`len` is 0 until then). */
	MsgRx *shm_arrival(bool tagged, fi_addr_t src, uint64_t tag, uint64_t len, void *entry);
	/* The common case first, without a message entry: a posted receive (not a
	 * multi-receive buffer) that takes the message from known sender `src`, unposted,
	 * or null. shm copies the message straight into it, so a receive of `sink_room`
	 * iovs or more must be large enough for it (shm.h, the truncation sink).
	 * shm_taken_done is shm's completion (or error): `len` the message's whole
	 * length. */
	RxOp *shm_take(bool tagged, fi_addr_t src, uint64_t tag, uint64_t len, size_t sink_room);
	void shm_taken_done(RxOp *r, uint64_t len, uint64_t data, bool has_data, int err);
	void shm_queue(MsgRx &m) { match_.add_unexpected(m.tagged, &m); }
	void shm_forget(MsgRx &m) { msgs_.put(&m); }
	void shm_done(MsgRx &m, uint64_t len, uint64_t olen, uint64_t data, bool has_data, int err);
	/* An unexpected shm message is in our memory now (m.shm_buf, `len` bytes), or its
	 * copy failed (err): a receive that took it meanwhile completes. */
	void shm_pulled(MsgRx &m, uint64_t len, uint64_t data, bool has_data, int err);
	/* The same-host sender shm knows as `shm_src` was inserted as `src`: its unmatched
	 * messages that came before come from src now. */
	void shm_resolved(fi_addr_t shm_src, fi_addr_t src);

	/* Peers. An implicit peer got its fi_addr: its unmatched messages come from it. */
	void adopted(Peer &p);
	/* p failed (or was removed, `released`): messages from it end with err and status;
	 * a whole unmatched message stays for the application unless p was removed. */
	void peer_failed(Peer &p, int err, uint32_t status);

	/* Sends what messages owe (CTS, RECEIPT, RDMA reads, EOR) now that buffers may be
	 * free (inline: called after every poll, usually with nothing owed). */
	void progress()
	{
		if (has_pending())
			send_owed();
	}
	bool has_pending() const { return !pending_.empty(); }
	/* A long message (or write) from its REQ: long-CTS (the first bytes came with it) or
	 * long-read (the sender's buffers). */
	static void start_long(MsgRx &m, RxKind kind, uint64_t msg_len, uint32_t send_id, const Parsed &pk);
	/* Records a MEDIUM segment of m; false when it overlaps one taken already. */
	static bool take_segment(MsgRx &m, const Parsed &pk);

	Matcher<RxOp, MsgRx> &matcher() { return match_; }
	/* Each posted receive and each message arriving or unexpected (reports). */
	template <typename F> void for_each_recv(F &&f) { rxops_.for_each_live(f); }
	template <typename F> void for_each_msg(F &&f) { msgs_.for_each_live(f); }

private:
	ssize_t peek(const RecvArgs &a);
	/* A posted receive for the call, from source `src` (FI_ADDR_UNSPEC: any); null when
	 * rx_attr->size are posted. */
	RxOp *new_rxop(const RecvArgs &a, fi_addr_t src, bool multi)
	{
		RxOp *r = rxops_.get();
		if (!r)
			return nullptr;
		r->start(a.tagged, a.context, a.flags, completion(a.flags), a.iov, a.count, iov_total(a.iov, a.count));
		r->src = src;
		r->tag = a.tag;
		r->ignore = a.ignore;
		r->multi = multi;
		return r;
	}
	bool completion(uint64_t flags) const { return !cfg_.selective || (flags & FI_COMPLETION); }
	void link(Peer &p, MsgRx &m)
	{
		m.plink.m = &m;
		p.msgs.push_back(&m.plink);
	}
	void place(MsgRx &m, const Parsed &pk);
	void segment(MsgRx &m, uint64_t off, const uint8_t *data, size_t len);
	void bind(MsgRx &m, RxOp *r);
	void drain_held(MsgRx &m);
	void advance(MsgRx *m);
	void finish(MsgRx *m);
	void complete(MsgRx &m);
	/* What a receive's successful (or truncated) completion says. */
	struct Delivered {
		void *context;
		bool completion; /* an entry unless truncated (then always one) */
		uint64_t flags;
		uint64_t len; /* the message's (0: discarded) */
		uint64_t cap;
		void *buf;
		uint64_t data;
		uint64_t tag;
		fi_addr_t src;
	};
	void deliver(const Delivered &d);
	void shm_start(MsgRx &m);
	void shm_deliver(MsgRx &m);
	/* What shm's completion of m says. */
	static void shm_record(MsgRx &m, uint64_t len, uint64_t data, bool has_data, int err);
	void send_owed();
	void owe(MsgRx &m)
	{
		if (!m.on_list())
			pending_.push_back(&m);
	}
	/* Read-based messages (longread.cpp). */
	void read_start(MsgRx &m);
	void read_pump(MsgRx &m);
	void read_end(MsgRx &m);
	/* The control packets it sends (pkt_ctl.cpp): false when no buffer was free (owed). */
	bool send_cts(MsgRx &m);
	bool send_eor(MsgRx &m);
	bool send_receipt(MsgRx &m);

	RxPort &port_;
	Drops &drops_;
	RxConfig cfg_;
	ObjPool<RxOp> rxops_;
	ObjPool<MsgRx> msgs_;
	IdTable<MsgRx> ids_; /* recv_id of long-CTS messages and emulated writes */
	Matcher<RxOp, MsgRx> match_;
	std::unordered_map<void *, MsgRx *> claimed_; /* FI_CLAIM, by context */
	IList<MsgRx> pending_;			      /* messages owing a control packet */
};

} // namespace efa::rdm

#endif
