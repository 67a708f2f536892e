/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The sending side of the RDM endpoint: the life of every operation this endpoint
 * starts (docs/protocol.md): sends (the EAGER, MEDIUM, LONGCTS and LONGREAD RTMs, with
 * or without delivery complete), RMA (device RDMA, or emulated with the RTWs and RTRs),
 * atomics (the RTAs), and the responder's side of an emulated read (READRSP, then
 * CTSDATA). It chooses the protocol, builds the REQs and CTSDATA, fills CTS windows,
 * takes the answers (CTS, RECEIPT, EOR, READRSP and CTSDATA of a read, ATOMRSP,
 * EXT_ERROR, READ_NACK) and the device's verdicts, and completes or fails each operation
 * once.
 *
 * It owns its operations (TxOp), their ids and the list of long sends with a window to
 * fill, and reaches everything else through TxPort: the peer of a new operation (the
 * endpoint's lookup, liveness and backoff checks), transmit buffers and posting,
 * registrations and device RDMA, and completions. The endpoint implements TxPort
 * (EpTxPort, ep.cpp); test_rdm_sender implements it with lists, so the protocol rules
 * are tested without a device.
 *
 * Its methods live in sender.cpp (the lifecycle), pkt_rtm.cpp, pkt_data.cpp,
 * pkt_rma.cpp and pkt_atomic.cpp (the packets of each family), rma.cpp (RMA and atomic
 * initiators) and pkt_ctl.cpp (the answers it takes).
 */
#ifndef EFA_RDM_SENDER_H
#define EFA_RDM_SENDER_H

#include "ep_base.h"
#include "rdm/ops.h"
#include "rdm/pool.h"

#include <string>

namespace efa::rdm {

class TxPort {
public:
	virtual ~TxPort() = default;
	/* The peer a new operation goes to, or null with the call's answer in err (not in
	 * the AV, failed, backing off, too far ahead). */
	virtual Peer *tx_peer(fi_addr_t dest, bool new_id, ssize_t &err) = 0;
	/* Transmit buffers free now. */
	virtual size_t tx_avail() = 0;
	/* A transmit buffer to p (null: none free). */
	virtual Pkt *tx_buf(Peer &p) = 0;
	/* Sends a built packet, or queues it behind p's backoff. A packet the endpoint
	 * refuses (its peer is gone, the device failed the post) fails its operation
	 * through Sender::pkt_failed before this returns. */
	virtual void tx_post(Pkt *pkt) = 0;
	/* tx_post of a packet to a peer that tx_peer let through just before, with nothing
	 * in between that changes the peer (an inject): no second look at it. */
	virtual void tx_post_ready(Pkt *pkt) { tx_post(pkt); }
	/* A burst of one operation's packets: tx_post_more for each, then tx_ring, which
	 * rings one doorbell for them all (a refused packet fails its operation, as in
	 * tx_post). Nothing else may post in between. */
	virtual void tx_post_more(Pkt *pkt) { tx_post(pkt); }
	virtual void tx_ring() {}
	/* The local key under which the device may read [buf, buf + len) in place: `desc`
	 * is a registration of this domain that covers it, and the device takes a second
	 * SGE. False: the caller copies. */
	virtual bool tx_data_lkey(void *desc, const void *buf, size_t len, uint32_t &lkey)
	{
		(void)desc, (void)buf, (void)len, (void)lkey;
		return false;
	}
	/* A buffer taken and not used after all. */
	virtual void tx_put(Pkt *pkt) = 0;
	/* Our HANDSHAKE to p (the first packet to a peer goes after it). */
	virtual void tx_handshake(Peer &p) = 0;
	/* Read-based messages: the remote key of buf (the application's registration when
	 * `desc` grants remote read and covers it, else a registration kept in `reg`). */
	virtual int tx_read_key(void *buf, size_t len, void *desc, InternalMr &reg, uint64_t &key) = 0;
	/* Device RMA: whether the local buffers of op can go by device RDMA (descriptors that
	 * cover them, few enough of them), and posting bytes [off, off + len) of op's iovs
	 * as one RDMA write or read at (raddr, rkey), whose completion comes back as pkt's. */
	virtual bool tx_device_ok(const TxOp &op) = 0;
	virtual int tx_rdma(Pkt *pkt, const TxOp &op, bool write, uint64_t off, uint64_t len, uint64_t raddr,
			    uint32_t rkey) = 0;
	/* The EXT_WRITE_DATA a device write with CQ data owes a peer of ours (rma.cpp). */
	virtual void tx_write_data(Peer &p, uint64_t data, uint64_t len) = 0;
	/* Completions on the transmit CQ, and the counters. */
	virtual void tx_complete(const fi_cq_tagged_entry &e) = 0;
	virtual void tx_error(void *context, uint64_t flags, int err, uint32_t prov_errno, const std::string &text,
			      uint64_t len, uint64_t data, uint64_t tag) = 0;
	virtual void tx_count(CntrIdx cntr, bool ok) = 0;
};

/* Fixed at fi_enable (use_device_rdma may change later: FI_OPT_EFA_USE_DEVICE_RDMA). */
struct TxConfig {
	size_t mtu = 0;
	size_t inject_size = 0;
	size_t max_medium = 0;	/* FI_EFA_INTER_MAX_MEDIUM_MESSAGE_SIZE */
	size_t min_read = 0;	/* FI_EFA_INTER_MIN_READ_MESSAGE_SIZE */
	/* Toward a peer that is not ours (no extension mark in its HANDSHAKE): the same
	 * unless the device's defaults differ from upstream's, then upstream's (fi_efa(7)). */
	size_t max_medium_foreign = 0;
	size_t min_read_foreign = 0;
	size_t credits = 0;	/* announced in a long-CTS REQ */
	size_t size = 0;	/* tx_attr->size: operations at once */
	size_t max_atomic = 0;	/* bytes of one atomic */
	uint64_t max_rdma = 0;	/* bytes of one RDMA work request */
	uint64_t features = 0;	/* ours, as the handshake announces them (v4 extra_info word 0) */
	uint32_t qkey = 0;	/* our connection id, in every packet */
	RawAddr self{};		/* our address, in REQs to peers whose handshake is unknown */
	bool rm_enabled = true; /* FI_RM_ENABLED: MEDIUM allowed */
	bool selective = false; /* FI_SELECTIVE_COMPLETION on the transmit side */
	bool use_device_rdma = true;
};

class Sender {
public:
	Sender(TxPort &port, Drops &drops) : port_(port), drops_(drops) {}
	Sender(const Sender &) = delete;
	Sender &operator=(const Sender &) = delete;

	void configure(const TxConfig &c);
	const TxConfig &config() const { return cfg_; }
	void set_use_device_rdma(bool v) { cfg_.use_device_rdma = v; }

	/* The application's calls, once the endpoint checked its state and the flags.
	 * 0 or -FI_E*; nothing is sent unless it returns 0. */
	ssize_t send(const SendArgs &a)
	{
		ssize_t ret;
		if ((a.flags & FI_INJECT) && inject(port_, a, ret))
			return ret;
		return send_op(a);
	}
	/* The common small send, an eager inject: no operation entry (nothing completes
	 * it, its data is in the packet, its end counts it: Ep::tx_done). Through the port
	 * type P, so that the endpoint, which passes its own final port, has the port's
	 * calls inlined (performance.md, "Instructions per small message"). True when it
	 * answered the call (`ret`: 0 or -FI_E*), false when the send needs an entry or
	 * another protocol (send_op). FI_RM_DISABLED keeps the entry, which an RNR fails;
	 * FI_DELIVERY_COMPLETE keeps it for the RECEIPT. */
	template <class P> [[gnu::always_inline]] bool inject(P &port, const SendArgs &a, ssize_t &ret)
	{
		uint64_t len = 0;
		if ((ret = send_iovs(a, len)))
			return true;
		if (len > cfg_.inject_size) {
			ret = inject_too_long(len, "fi_send");
			return true;
		}
		Peer *p = port.tx_peer(a.dest, true, ret);
		if (!p)
			return true;
		const bool data = a.flags & FI_REMOTE_CQ_DATA;
		if (len > inject_eager_ || !p->hs_sent || !cfg_.rm_enabled || (a.flags & FI_DELIVERY_COMPLETE))
			return false;
		Pkt *pkt = port.tx_buf(*p);
		if (!pkt) {
			ret = -FI_EAGAIN;
			return true;
		}
		counts.inject++;
		pkt->inject = true;
		const uint16_t kind = uint16_t(v4::kReqMsg | (a.tagged ? v4::kReqTagged : 0));
		send_eager(port, pkt, *p, req_flags(*p, data, kind),
			   EagerReq{a.tagged, false, p->next_tx_id++, 0, a.tag, a.data, a.iov, a.count, len}, true);
		ret = 0;
		return true;
	}
	/* A send with an operation entry: every protocol (send() tried the inject). */
	ssize_t send_op(const SendArgs &a);
	ssize_t rma(const RmaArgs &a);
	ssize_t atomic(const AtomicArgs &a);
	/* Their arguments' checks alone, for the shm path: 0 (with the length in bytes) or
	 * -FI_EINVAL / -FI_EOPNOTSUPP, logged. */
	static ssize_t check_rma(const RmaArgs &a, uint64_t &len);
	static ssize_t check_atomic(const AtomicArgs &a, size_t max_atomic, uint64_t &bytes);
	/* The responder of an emulated read answers it (READRSP, then CTSDATA under the
	 * requester's window, from src); false when no operation entry is free. */
	bool respond_read(Peer &p, uint32_t recv_id, uint64_t len, uint64_t window, const iovec *src, size_t count);

	/* Answers from peers (pkt_ctl.cpp, pkt_data.cpp, pkt_atomic.cpp). */
	void handle_cts(Peer &p, const Parsed &pk);
	void handle_eor(Peer &p, const Parsed &pk);
	void handle_receipt(Peer &p, const Parsed &pk);
	void handle_read_rsp(Peer &p, const Parsed &pk);
	void handle_read_data(Peer &p, const Parsed &pk);
	void handle_atom_rsp(Peer &p, const Parsed &pk);
	void handle_error(Peer &p, const Parsed &pk);
	void handle_read_nack(Peer &p, const Parsed &pk);
	/* Whether an id a peer names in a CTSDATA is one of ours (an emulated read's). */
	static bool owns_id(uint32_t id) { return IdTable<TxOp>::marked(id); }

	/* The device's verdict on a packet of op: sent (acknowledged), or failed (positive
	 * FI_E* and the status; the operation reports the first error once nothing of it is
	 * in flight). */
	void pkt_sent(TxOp *op)
	{
		op->inflight--;
		finish(op);
	}
	void pkt_failed(TxOp *op, int err, uint32_t status)
	{
		op->inflight--;
		fail(op, err, status);
	}

	/* Operations waiting on p end with err and status (liveness). */
	void peer_failed(Peer &p, int err, uint32_t status);
	/* Marks the peers that operations wait for an answer from (Peer::waiting). */
	void mark_waiting();
	/* Long-CTS windows to fill now that buffers may be free (inline: called after every
	 * poll of a CQ, usually with nothing to do). */
	void progress()
	{
		if (has_pending())
			pump_pending();
	}
	bool has_pending() const { return !pending_.empty(); }
	size_t in_use() const { return ops_.in_use(); }
	size_t pool_bytes() const { return ops_.bytes() + ids_.bytes(); }
	/* Protocol chosen per send through the device (fi_efa_ep_stats). */
	struct Counts {
		uint64_t inject = 0, eager = 0, medium = 0, longcts = 0, longread = 0;
	} counts;
	/* Each operation in progress (reports). */
	template <typename F> void for_each_op(F &&f) { ops_.for_each_live(f); }
	bool busy() const { return ops_.in_use() != 0; }

private:
	bool completion(uint64_t flags) const { return !cfg_.selective || (flags & FI_COMPLETION); }
	/* What every send and RMA call checks once its length is known: an inject within
	 * inject_size (else -FI_EMSGSIZE with a log line naming `instead`, the call to
	 * use), then its peer (TxPort::tx_peer). Null with the call's answer in err. */
	Peer *call_peer(bool inject, uint64_t len, const char *instead, fi_addr_t dest, bool new_id, ssize_t &err);
	/* A transmit buffer for op's packet to p (op->inflight counts it). */
	Pkt *tx_pkt(Peer &p, TxOp *op)
	{
		Pkt *k = port_.tx_buf(p);
		if (k) {
			k->op = op;
			op->inflight++;
		}
		return k;
	}
	/* REQ flags to p: what the REQ is (`kind`: kReqMsg, with kReqTagged; kReqRma;
	 * kReqAtomic, as the specification's table 3.1 says and upstream asserts), the raw
	 * address header until p's handshake has arrived, then the connid header; the CQ data
	 * header with `data`. */
	static uint16_t req_flags(const Peer &p, bool data, uint16_t kind)
	{
		return kind | (p.hs_got ? v4::kFlagConnId : v4::kReqRawAddr) | (data ? v4::kReqCqData : 0);
	}
	/* The optional headers those flags announce, in the protocol's order. */
	void req_opts(v4::Writer &w, const Peer &p, uint16_t flags, uint64_t data) const
	{
		if (flags & v4::kReqRawAddr)
			w.raw_addr(cfg_.self);
		if (flags & v4::kReqCqData)
			w.cq_data(data);
		if (flags & v4::kFlagConnId)
			w.connid(cfg_.qkey);
		(void)p;
	}
	/* Whether an emulated write or atomic write to p asks for a RECEIPT: when the
	 * application asks for delivery complete, and always to a peer of ours (or one whose
	 * HANDSHAKE has not come yet), whose refusal (EXT_ERROR) must find the operation. */
	static bool write_dc(const Peer &p, uint64_t flags)
	{
		return (flags & FI_DELIVERY_COMPLETE) || !p.hs_got || p.ext;
	}
	void pump(TxOp &op);
	void pump_pending();
	void read_data(Peer &p, const Parsed &pk, uint32_t recv_id);
	/* Ends the hold a multi-packet post keeps on op (op.inflight): a post refused
	 * meanwhile failed op, which now completes if nothing else of it is in flight. */
	void release(TxOp &op)
	{
		op.inflight--;
		if (op.err)
			finish(&op);
	}
	void finish(TxOp *op);
	void fail(TxOp *op, int err, uint32_t status);
	void complete(TxOp &op);
	/* The REQs of a message (pkt_rtm.cpp); LONGREAD: 0, or the registration's error
	 * (the caller falls back to LONGCTS). */
	bool longread_ok(const Peer &p, uint64_t len, size_t iov_count, size_t min_read) const;
	/* The mandatory header of a message's REQ of `type` (the untagged, non-DC member of
	 * its family; tagged and DC twins are chosen from op). */
	template <typename H> H *rtm(v4::Writer &w, Type type, const TxOp &op, uint16_t flags) const;
	void post_eager(TxOp &op, uint16_t flags);
	/* What an EAGER REQ carries (with a send_id when it asks for delivery complete). */
	struct EagerReq {
		bool tagged, dc;
		uint32_t msg_id, send_id;
		uint64_t tag, data;
		const iovec *iov;
		size_t count;
		uint64_t len;
	};
	/* The EAGER REQ without delivery complete to a peer whose HANDSHAKE came (no raw
	 * address header), written field by field: the same bytes as the Writer below, which
	 * checks each field against the buffer's end; here the caller's protocol choice
	 * (eager_max) already bounds the whole packet by the MTU. Returns its length. The
	 * Writer without its checks (a template variant, tried) still cost 23 instructions
	 * more per ping-pong iteration on this, the commonest packet (performance.md). */
	size_t eager_fast(uint8_t *b, uint16_t flags, const EagerReq &r) const
	{
		const v4::RtmBase h{{uint8_t(rtm_type(Type::EagerMsgRtm, r.tagged, false)), v4::kVersion, flags},
				    r.msg_id};
		static_assert(sizeof h == sizeof(v4::EagerRtm));
		std::memcpy(b, &h, sizeof h);
		size_t n = sizeof h;
		if (r.tagged) {
			std::memcpy(b + n, &r.tag, sizeof r.tag);
			n += sizeof r.tag;
		}
		if (flags & v4::kReqCqData) {
			std::memcpy(b + n, &r.data, sizeof r.data);
			n += sizeof r.data;
		}
		if (flags & v4::kFlagConnId) {
			std::memcpy(b + n, &cfg_.qkey, sizeof(uint32_t));
			n += sizeof(uint32_t);
		}
		iov_to_buf(r.iov, r.count, 0, b + n, r.len);
		return n + r.len;
	}
	/* Builds the EAGER REQ into pkt (bound for p) and posts it through `port` (`ready`:
	 * tx_post_ready). */
	template <class P> [[gnu::always_inline]] void send_eager(P &port, Pkt *pkt, Peer &p, uint16_t flags, const EagerReq &r,
							     bool ready = false)
	{
		if (!r.dc && !(flags & v4::kReqRawAddr)) [[likely]] {
			pkt->len = uint32_t(eager_fast(pkt->buf, flags, r));
			if (ready)
				port.tx_post_ready(pkt);
			else
				port.tx_post(pkt);
			return;
		}
		v4::Writer w(pkt->buf, pkt->cap);
		const Type t = rtm_type(Type::EagerMsgRtm, r.tagged, r.dc);
		if (r.dc) {
			v4::DcEagerRtm *h = w.header<v4::DcEagerRtm>(t, flags);
			h->r.msg_id = r.msg_id;
			h->send_id = r.send_id;
		} else {
			w.header<v4::EagerRtm>(t, flags)->r.msg_id = r.msg_id;
		}
		if (r.tagged)
			w.u64(r.tag);
		req_opts(w, p, flags, r.data);
		iov_to_buf(r.iov, r.count, 0, w.reserve(r.len), r.len);
		pkt->len = uint32_t(w.size());
		port.tx_post(pkt);
	}
	/* -FI_EMSGSIZE for an inject beyond inject_size, logged once (`instead`: the call
	 * to use). */
	ssize_t inject_too_long(uint64_t len, const char *instead) const;
	void post_medium(TxOp &op, uint16_t flags, size_t seg);
	/* Bytes [off, off + n) of op's buffers as pkt's payload, after what w wrote: in
	 * place (a second SGE, Pkt::data) when they lie in one iov the device can read
	 * (TxPort::tx_data_lkey), else copied on through w. */
	void payload(Pkt *pkt, const TxOp &op, uint64_t off, size_t n, v4::Writer &w);
	void post_longcts(TxOp &op, uint16_t flags, size_t room);
	int longread_send(TxOp &op, uint16_t flags);
	/* Emulated RMA and atomics (pkt_rma.cpp, pkt_atomic.cpp). */
	void post_write_req(TxOp &op, size_t room);
	void post_read_req(TxOp &op);
	void post_atomic_req(TxOp &op, const AtomicArgs &a);
	/* Device RMA (rma.cpp). */
	bool device_rma_ok(const TxOp &op, bool write);
	void post_device_rma(TxOp &op, bool write);

	TxPort &port_;
	Drops &drops_;
	TxConfig cfg_;
	/* The longest inject that is one EAGER packet with every optional header (at most
	 * inject_size, which fi_enable already bounds so: rdm_limits). */
	uint64_t inject_eager_ = 0;
	ObjPool<TxOp> ops_;
	IdTable<TxOp> ids_{true}; /* send_id / recv_id the peers answer to (marked: apart from the Receiver's) */
	IList<TxOp> pending_;	/* long-CTS sends with a window to fill */
};

} // namespace efa::rdm

#endif
