/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The efa fabric's RDM endpoint: upstream's RDM protocol v4 (docs/protocol.md) over one
 * SRD QP.
 *
 * Its parts (docs/architecture.md): the records (ops.h), packets and their pools
 * (packet_io.h), the peer table (peer_table.h), the receiving side (receiver.h); the
 * sending side and the glue are Ep's own.
 *
 * Concurrency: one lock per endpoint guards all of them; the API entry points
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
#include "rdm/ops.h"
#include "rdm/packet_io.h"
#include "rdm/peer_table.h"
#include "rdm/pool.h"
#include "rdm/receiver.h"
#include "rdm/sender.h"
#include "rdm/shm.h"

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

/* The Sender's port (sender.h) over this endpoint's peer checks, PacketIo, device,
 * registrations, CQs and counters. */
class EpTxPort final : public TxPort {
public:
	explicit EpTxPort(Ep &ep) : ep_(ep) {}
	Peer *tx_peer(fi_addr_t dest, bool new_id, ssize_t &err) override;
	size_t tx_avail() override;
	Pkt *tx_buf(Peer &p) override;
	void tx_post(Pkt *pkt) override;
	void tx_post_ready(Pkt *pkt) override;
	void tx_post_more(Pkt *pkt) override;
	void tx_ring() override;
	bool tx_data_lkey(void *desc, const void *buf, size_t len, uint32_t &lkey) override;
	void tx_put(Pkt *pkt) override;
	void tx_handshake(Peer &p) override;
	int tx_read_key(void *buf, size_t len, void *desc, InternalMr &reg, uint64_t &key) override;
	bool tx_device_ok(const TxOp &op) override;
	int tx_rdma(Pkt *pkt, const TxOp &op, bool write, uint64_t off, uint64_t len, uint64_t raddr,
		    uint32_t rkey) override;
	void tx_write_data(Peer &p, uint64_t data, uint64_t len) override;
	void tx_complete(const fi_cq_tagged_entry &e) override;
	void tx_error(void *context, uint64_t flags, int err, uint32_t prov_errno, const std::string &text,
		      uint64_t len, uint64_t data, uint64_t tag) override;
	void tx_count(CntrIdx cntr, bool ok) override;

private:
	Ep &ep_;
};

/* The Receiver's port (receiver.h) over this endpoint's PacketIo, device, CQs and
 * counters. A member, not a base of Ep: Ep's fid must stay at its start. */
class EpRxPort final : public RxPort {
public:
	explicit EpRxPort(Ep &ep) : ep_(ep) {}
	Pkt *rx_tx_pkt(Peer &p) override;
	void rx_post(Pkt *pkt) override;
	void rx_put_tx(Pkt *pkt) override;
	Pkt *rx_copy(Pkt &pkt) override;
	void rx_free_copy(Pkt *pkt) override;
	void rx_adopt_pending() override;
	int rx_reg(void *buf, size_t len, InternalMr &out) override;
	int rx_read(Pkt *pkt, void *buf, uint32_t len, const InternalMr &mr, uint64_t raddr, uint32_t rkey) override;
	void rx_complete(const fi_cq_tagged_entry &e, fi_addr_t src) override;
	void rx_error(void *context, uint64_t flags, int err, uint32_t prov_errno, const std::string &text,
		      uint64_t len, uint64_t olen, void *buf, uint64_t data, uint64_t tag) override;
	void rx_count(bool remote_write, bool ok) override;
	int rx_shm_start(MsgRx &m) override;
	void rx_shm_discard(MsgRx &m) override;

private:
	Ep &ep_;
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

/* Hang reports asked for by signal (FI_EFA_REPORT_SIGNAL): a count each endpoint's
 * progress compares with the one it last saw (report.cpp). */
extern std::atomic<uint64_t> g_report_requests;
/* Installs the FI_EFA_REPORT_SIGNAL handler, once per process. */
void install_report_signal();
/* With FI_EFA_REPORT_AT_CLOSE: an enabled endpoint (on) reports at exit if still open;
 * off at fi_close. */
void report_watch(Ep *ep, bool on);

struct Ep : EpBase {
	static constexpr Magic kMagic = Magic::RdmEp;

	DataLock lock; /* off when the application serialises (common/lock.h) */
	Hook hook{this};

	/* Configuration, fixed at fi_enable. */
	size_t mtu = 0;
	size_t inject_size = 0;
	size_t max_medium = 0;
	size_t min_read = 0;
	size_t max_medium_foreign = 0; /* toward peers that are not ours (TxConfig) */
	size_t min_read_foreign = 0;
	size_t credits = 0;
	uint32_t rx_window = 0;
	uint64_t features = 0;	     /* ours, as the handshake announces them */
	uint32_t device_version = 0; /* our device's vendor_part_id, in the handshake */
	bool rm_enabled = true;
	bool use_device_rdma = true; /* FI_OPT_EFA_USE_DEVICE_RDMA */
	bool directed = false;
	size_t min_multi_recv = 0;
	uint64_t probe_ns = 0; /* FI_EFA_PEER_PROBE_INTERVAL; 0: no probes */
	uint64_t next_probe_check = 0;

	/* Packets and peers. */
	PacketIo io;
	PeerTable peers;
	std::deque<Ctl> ctl_pending; /* target answers waiting for a buffer */

	/* Statistics, for logs and tests. */
	Drops drops;
	bool warned_malformed = false, warned_foreign = false;
	bool warned_far = false;

	/* The sending and receiving sides (sender.h, receiver.h), and their ways out. */
	EpTxPort tx_port{*this};
	Sender tx{tx_port, drops};
	EpRxPort rx_port{*this};
	Receiver rx{rx_port, drops};
	/* Same-host peers through shm (shm.h); null when off. After rx: it uses it. */
	std::unique_ptr<ShmPath> shm;

	/* fi_enable: enable() sets up the QP and packets (endpoint lock held); the caller
	 * then attaches to the CQs without it, and start() posts the receive buffers. */
	int enable();
	void start();
	bool enabling = false;
	int close();

	/* The application's operations: the endpoint's checks (send and recv here, rma and
	 * atomic in rma.cpp), then the Sender or the Receiver. send and recv are inline:
	 * each fi_msg / fi_tagged entry point has them with its own constant arguments
	 * (msg_ops.cpp, do_inject). */
	[[gnu::always_inline]] ssize_t send(const SendArgs &a)
	{
		if (ssize_t r = check_start(a.tagged ? "fi_tsendmsg" : "fi_sendmsg", a.flags, kSendFlags))
			return r;
		if (shm) {
			if (const fi_addr_t to = shm->route(a.dest); to != FI_ADDR_NOTAVAIL)
				return shm->send(a, to);
		}
		/* The eager inject through this endpoint's own port, whose calls then inline. */
		if (ssize_t r; (a.flags & FI_INJECT) && tx.inject(tx_port, a, r))
			return r;
		return tx.send_op(a);
	}
	ssize_t rma(const RmaArgs &a);
	ssize_t atomic(const AtomicArgs &a);
	/* A receive: refused before fi_enable or without a receive CQ, else the Receiver. */
	[[gnu::always_inline]] ssize_t recv(const RecvArgs &a)
	{
		if (!enabled || !rx_cq) [[unlikely]]
			return recv_refused();
		return rx.recv(a);
	}
	/* Why a receive cannot be posted (not enabled, no receive CQ), with its warning. */
	ssize_t recv_refused() const;
	/* The device's verdict on a sent packet (peer.cpp): RNR, EXT_VOID runs, peer gone. */
	void tx_done(Pkt *pkt, const verbs::Wc &wc);

	/* rdm/pkt_ctl.cpp: the control packets, built, sent and handled */
	bool send_handshake(Peer &p);
	void handle_handshake(Peer &p, const Parsed &pk);
	void handle_write_data(Peer &p, const Parsed &pk);
	/* A target's answer (RECEIPT, ATOMRSP, EXT_ERROR): sent now, or queued on
	 * ctl_pending for progress when no transmit buffer is free (EXT_ERROR: or until the
	 * peer's HANDSHAKE says whether it takes it). */
	void send_ctl(Ctl c);
	bool try_ctl(Ctl &c);
	void send_pending_ctl();
	/* An EXT_ERROR to a live peer whose HANDSHAKE has not said whether it takes one. */
	static bool waits_handshake(const Ctl &c)
	{
		return c.type == Type::ExtError && !c.peer->hs_got && !c.peer->dead && !c.peer->released;
	}

	/* rdm/target.cpp: the target of emulated RMA and atomics */
	int check_rma(const RmaIov *iov, uint32_t n, uint64_t access, iovec *out);
	/* The same for the remote iovs of an RTW, RTR or RTA (1 to kMaxRmaIov); `total`: their bytes. */
	int check_rma(const Parsed &pk, uint64_t access, iovec *out, uint64_t &total);
	void handle_write_req(Peer &p, const Parsed &pk);
	void handle_read_req(Peer &p, const Parsed &pk);
	void handle_atomic_req(Peer &p, const Parsed &pk);
	void remote_write_imm(const verbs::Wc &wc);

	/* rdm/arrival.cpp: every received packet */
	void rx_done(Pkt *pkt, const verbs::Wc &wc);
	/* The common small message without the general path's steps, or false (arrival.cpp). */
	bool rx_eager(Pkt *pkt, const verbs::Wc &wc);
	/* A packet from p: the counters and p's liveness. */
	void arrived(Peer &p, Pkt &pkt)
	{
		io.stats.rx_pkts[pkt.buf[0]]++;
		io.stats.rx_bytes[pkt.buf[0]] += pkt.len;
		p.rx_pkts++;
		p.rx_bytes += pkt.len;
		peer_heard(p);
		p.got_pkt = true;
		pkt.peer = &p;
	}
	void dispatch(Peer &p, Pkt *pkt, const Parsed &pk);
	void ordered_req(Peer &p, Pkt *pkt, const Parsed &pk);
	void process_req(Peer &p, Pkt *pkt, const Parsed &pk);
	/* Whether an ordered REQ for an id ahead duplicates what is queued for that id. */
	static bool queued_dup(const Pkt *chain, const Parsed &pk);
	/* A REQ we do not take (the runting protocols, more read iovs than we name): the
	 * log line says what the peer should change. */
	void refuse_req(Peer &p, const Parsed &pk, const char *why);
	static const char *req_fault(const Parsed &pk);

	/* rdm/peer.cpp: peers as operations and packets meet them; progress */
	Peer *peer_for_addr(fi_addr_t addr)
	{
		/* A peer met before (every send but the first) is the answer without asking
		 * the AV: the peers of removed entries were just released. */
		sync_removed();
		if (Peer *p = peers.find(addr))
			return p;
		return new_peer_for_addr(addr);
	}
	Peer *new_peer_for_addr(fi_addr_t addr);
	/* A peer that answered RNR is left alone until its backoff ends and its queue of
	 * packets to resend is empty: new work to it waits (-FI_EAGAIN, or queued). */
	/* New packets to p wait behind its RNR backoff. Not with FI_RM_DISABLED: they go to
	 * the device, which refuses them (FI_ENORX) while the peer has no buffer. */
	bool held_back(const Peer &p) const
	{
		return rm_enabled && (!p.queued.empty() || (p.backoff_until && now_ns() < p.backoff_until));
	}
	/* A new message id for p would be the reorder reach (protocol.md section 6) or more
	 * ahead of the oldest refused id p has not been told to skip (FI_RM_DISABLED). */
	bool ids_full(const Peer &p) const
	{
		if (!p.void_pkt)
			return false;
		uint32_t oldest = p.voids.empty() ? p.next_tx_id : p.voids.front().first;
		if (p.void_pkt->len) /* on its way: its run is the oldest */
			oldest = reinterpret_cast<const v4::ExtVoid *>(p.void_pkt->buf)->msg_id;
		for (const auto &r : p.voids)
			if (int32_t(r.first - oldest) < 0)
				oldest = r.first;
		/* v4 does not say a peer's reorder window: ours is assumed (fi_efa(7)). */
		const uint32_t reach = std::max(rx_window, ReorderBuffer<Pkt>::kMinReach);
		return p.next_tx_id - oldest >= reach;
	}
	void void_ids(Peer &p, Pkt *pkt, uint32_t id);
	void void_next(Peer &p, Pkt *pkt);
	/* The sender of a packet: by the device's source (address handle and QP number)
	 * and the packet's connid when it carries one, else by its raw address header. */
	Peer *peer_from_wc(const verbs::Wc &wc, const Parsed &pk);
	Peer *known_peer(uint16_t ahn, uint32_t qpn, bool has_conn, uint32_t conn);
	/* An implicit peer got its fi_addr: its unreceived messages now come from it. */
	void adopted(Peer &p) { rx.adopted(p); }
	/* Adopts implicit peers inserted into the AV since the last look (cheap when none). */
	void adopt_pending()
	{
		peers.adopt_inserted([this](Peer &p) { adopted(p); });
		if (shm)
			shm->look();
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
	/* A packet that will not be delivered ends what it carried: its operation (err,
	 * status), or an inject's send (counted as failed); a control packet, nothing. */
	void pkt_lost(TxOp *op, bool inject, int err, uint32_t status)
	{
		if (op)
			tx.pkt_failed(op, err, status);
		else if (inject)
			count(kCntrSend, false);
	}
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
	/* A packet of another protocol version than v4 arrived: drop it and, when its
	 * sender is a known peer, fail that peer for good (protocol.md section 2). */
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
	 * (-FI_EINVAL), failed (dead_peer), backing off or, when it takes a new message id
	 * (`new_id`), too far ahead (-FI_EAGAIN). */
	[[gnu::always_inline]] Peer *tx_peer(fi_addr_t dest, bool new_id, ssize_t &err)
	{
		Peer *p = peer_for_addr(dest);
		if (p && !p->dead && !held_back(*p) && !(new_id && ids_full(*p)))
			return p;
		err = tx_peer_error(dest, p);
		return nullptr;
	}
	ssize_t tx_peer_error(fi_addr_t dest, Peer *p);
	void probe_peers(uint64_t now);
	bool send_probe(Peer &p);
	/* A work request to the peer of `pkt` came back from the device. */
	void unpost(Peer *p)
	{
		p->posted--;
		if (p->released && !p->posted && p->msgs.empty()) [[unlikely]]
			peers.free_retired(p);
	}
	/* Work no completion drives: a report asked for by signal, removed AV entries, the
	 * shm path, probes, queued and owed packets, the Sender's and Receiver's windows.
	 * The checks inline: an fi_cq_read that finds nothing usually has none of it. */
	void progress()
	{
		if (!enabled)
			return;
		if (g_report_requests.load(std::memory_order_relaxed) != report_seen || peers.removed() || shm ||
		    (probe_ns && (tx.busy() || rx.busy())) || io.any_busy() || !ctl_pending.empty() ||
		    tx.has_pending() || rx.has_pending())
			progress_work();
	}
	void progress_work();
	/* Packets: a transmit buffer with the base header's fields filled by the caller. */
	Pkt *tx_pkt(Peer &p, TxOp *op);
	/* Posts (or, while the peer backs off, queues) a built packet. 0 or -FI_E*. */
	int post(Pkt *pkt)
	{
		const Peer &p = *pkt->peer;
		if (p.dead || p.released || held_back(p)) [[unlikely]]
			return post_held(pkt);
		return post_ready(pkt);
	}
	/* post() of a packet to a peer that tx_peer() let through just before (Sender's
	 * tx_post_ready). */
	int post_ready(Pkt *pkt)
	{
		const int r = io.send(pkt);
		return r ? post_failed(pkt, r) : 0;
	}
	/* post() in a burst (PacketIo::send_more): the doorbell waits for ring(). */
	void post_more(Pkt *pkt)
	{
		const Peer &p = *pkt->peer;
		if (p.dead || p.released || held_back(p)) [[unlikely]]
			post_held(pkt);
		else
			io.send_more(pkt);
	}
	void ring();
	/* post() to a peer that is gone, or backing off. */
	int post_held(Pkt *pkt);
	/* The device refused the post with r: queued when its send queue is full, else the
	 * packet is lost (-FI_EIO). */
	int post_failed(Pkt *pkt, int r);
	RawAddr self_addr() const;
	uint64_t now_ns() const;

	/* Hang reports and statistics (report.cpp, fi_ext_efa.h). */
	int report(uint64_t min_age_ns, const char *why);
	ssize_t query_stats(fi_efa_ep_stats *out, size_t len);
	ssize_t query_peer(fi_addr_t addr, fi_efa_peer_stats *out, size_t len);
	std::string peer_name(const Peer &p) const;
	std::unordered_map<const Peer *, size_t> ops_per_peer(); /* transmit operations by peer */
	uint64_t reports = 0;	  /* written */
	uint64_t report_seen = 0; /* g_report_requests when this endpoint last looked */

	/* Completions. */
	void complete_tx(TxOp &op);
	void report_error(Cq *cq, void *context, uint64_t flags, int err, uint32_t prov_errno, const std::string &text,
			  uint64_t len = 0, uint64_t olen = 0, void *buf = nullptr, uint64_t data = 0, uint64_t tag = 0);
};

/* Inline: the eager inject (Sender::inject) calls them through the final port. */
[[gnu::always_inline]] inline Peer *EpTxPort::tx_peer(fi_addr_t dest, bool new_id, ssize_t &err)
{
	return ep_.tx_peer(dest, new_id, err);
}
inline Pkt *EpTxPort::tx_buf(Peer &p) { return ep_.tx_pkt(p, nullptr); }
inline void EpTxPort::tx_post(Pkt *pkt) { ep_.post(pkt); }
inline void EpTxPort::tx_post_ready(Pkt *pkt) { ep_.post_ready(pkt); }
inline void EpTxPort::tx_post_more(Pkt *pkt) { ep_.post_more(pkt); }
inline void EpTxPort::tx_ring() { ep_.ring(); }

/* Inline: the arrival shortcut (Ep::rx_eager) calls them through the final port. */
inline void EpRxPort::rx_complete(const fi_cq_tagged_entry &e, fi_addr_t src)
{
	if (ep_.rx_cq)
		ep_.rx_cq->push(e, src);
}

inline void EpRxPort::rx_count(bool remote_write, bool ok)
{
	ep_.count(remote_write ? kCntrRemoteWrite : kCntrRecv, ok);
}

extern fi_ops_msg g_msg_ops;
extern fi_ops_tagged g_tagged_ops;
extern fi_ops_rma g_rma_ops;
extern fi_ops_atomic g_atomic_ops;

} // namespace efa::rdm

#endif
