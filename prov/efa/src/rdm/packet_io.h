/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The RDM endpoint's packets and their way to and from the device: what moves bytes,
 * not what they mean.
 *
 *  - Pkt: one MTU-sized packet buffer. Receive buffers (registered) stay posted to the
 *    device; transmit buffers (registered) carry packets out; copies (heap, the packet's
 *    length) keep packets that must outlive their receive buffer (out of order,
 *    unexpected). Unexpected messages' copies hold at most FI_EFA_RX_COPY_MAX bytes
 *    per endpoint; beyond, the receive buffer itself is kept (not reposted), so that
 *    senders flooding a receiver that does not take its messages meet receiver-not-
 *    ready instead of growing its memory. Spare copies are kept only a few at a time:
 *    an idle endpoint gives the memory back.
 *  - PacketIo: the pools, reposting receive buffers, sending a built packet to its peer,
 *    each peer's queue of packets held back (receiver not ready, or a full send queue)
 *    and their resending, in order, after the peer's backoff (protocol.md section 7).
 *
 * Whether a packet may go to a peer at all (the peer failed, was removed) and what a
 * refused post means for its operation are the endpoint's decisions (Ep::post).
 */
#ifndef EFA_RDM_PACKET_IO_H
#define EFA_RDM_PACKET_IO_H

#include "fork.h"
#include "rdm/ilist.h"
#include "rdm/reorder.h"
#include "verbs/resources.h"
#include "verbs/qp.h"

#include <cstdint>
#include <memory>
#include <vector>

namespace efa::rdm {

struct Peer;
struct TxOp;
struct MsgRx;
struct CopyLink;

struct Pkt : IListNode<Pkt>, ReorderLink<Pkt> {
	enum class Kind : uint8_t { Rx, Tx, Copy };
	uint8_t *buf = nullptr;
	uint32_t cap = 0;
	uint32_t len = 0;
	uint32_t lkey = 0;
	Kind kind = Kind::Tx;
	uint8_t rnr_tries = 0;
	bool queued = false; /* tx: waiting on its peer's queue (RNR) */
	bool probe = false;  /* tx: a liveness probe (a HANDSHAKE) */
	bool inject = false; /* tx: an inject sent without an operation entry (Sender::inject):
			      * its end counts a send, success or failure */
	bool held = false;   /* rx: kept in place of a copy (not reposted until released) */
	uint16_t refs = 0;   /* copy or held: owners (copy_of of a copy adds one) */
	Peer *peer = nullptr; /* tx: destination; copy: sender */
	TxOp *op = nullptr;   /* tx: the operation it carries data of (null: control) */
	MsgRx *msg = nullptr; /* tx: the message an RDMA read (LONGREAD) fetches for */
	/* tx: payload sent from the application's registered memory after buf[0, len), as a
	 * second SGE (Sender::payload_ref), instead of copied into buf. */
	const uint8_t *data = nullptr;
	uint32_t data_len = 0;
	uint32_t data_lkey = 0;
	Pkt *next_free = nullptr;
};

/* Registered packet buffers of one size, with a free list. */
class PktPool {
public:
	int init(const verbs::Pd &pd, size_t count, size_t size, Pkt::Kind kind);
	void reset();
	Pkt *get();
	void put(Pkt *p);
	size_t avail() const { return avail_; }
	size_t count() const { return pkts_.size(); }

private:
	DmaBuffer mem_; /* MADV_DONTFORK: fork.h */
	verbs::Mr mr_;
	std::vector<Pkt> pkts_;
	Pkt *free_ = nullptr;
	size_t avail_ = 0;
};

/* The pools, posting and the RNR queue (see the top of this file). */
class PacketIo {
public:
	/* At fi_enable, once the QP exists: `ntx` transmit and `nrx` receive buffers of
	 * `size` bytes, registered with `pd`. 0 or the registration's error. */
	int init(const verbs::Pd &pd, verbs::Qp &qp, size_t ntx, size_t nrx, size_t size, size_t copy_max = SIZE_MAX);
	/* Posts every receive buffer. */
	void start();
	/* At close, once the QP is gone. */
	void reset();
	void set_backoff(uint32_t first_us, uint32_t max_us)
	{
		backoff_first_us_ = first_us;
		backoff_max_us_ = max_us;
	}
	size_t tx_count() const { return tx_.count(); }
	size_t rx_count() const { return rx_.count(); }

	/* Transmit buffers. */
	Pkt *get_tx() { return tx_.get(); }
	void put_tx(Pkt *p) { tx_.put(p); }
	size_t tx_avail() const { return tx_.avail(); }

	/* Receive buffers and copies of them. copy_of: a copy of `pkt` (a new owner of it
	 * when it is a copy or held already); `bounded` (an unexpected message's packet):
	 * `pkt` itself, held, when copies are at their limit, and then its receive must not
	 * be reposted (Pkt::held). Out-of-order packets are never held: the one they wait
	 * for must get in (the reorder window bounds them). free_copy: one owner is done. */
	void repost(Pkt *pkt);
	Pkt *copy_of(Pkt &pkt, bool bounded = false);
	void free_copy(Pkt *pkt);
	/* Copies: bytes held now, and the most held at once. */
	size_t copy_bytes() const { return copy_bytes_; }
	size_t held_count() const { return held_; }
	~PacketIo();

	/* Sends a built packet to pkt->peer now: 0, -ENOMEM (the send queue is full) or
	 * the device's error. */
	int send(Pkt *pkt);
	/* A burst: packets sent with send_more() leave with one doorbell, rung by ring()
	 * (nothing else may post in between). The device takes the whole batch or none of
	 * it: ring() returns 0, or its error with the packets back in `refused` (counted
	 * as never sent), for the caller to queue or fail. */
	void send_more(Pkt *pkt);
	int ring(std::vector<Pkt *> &refused);
	/* A work request (a send, or an RDMA read or write posted by the caller) to `p`
	 * is on the device / came back. */
	static void posted(Peer &p);
	/* Keeps pkt on its peer's queue; resend() sends it, after those queued before it. */
	void queue(Pkt *pkt);
	/* The peer of pkt answered RNR: pkt is queued, and the peer backs off from the
	 * second RNR of one packet on (a random, doubling time). */
	void on_rnr(Pkt *pkt, uint64_t now);
	/* A peer with something owed that resend() must call `owes` for (e.g. a packet
	 * that found no transmit buffer). */
	void mark_busy(Peer &p);
	/* The peer failed: it leaves the busy list (its queue is the caller's to empty). */
	void unbusy(Peer &p);
	/* For each busy peer: `owes(ctx, p)` sends what it owes (true: still owes), then its
	 * queued packets go out unless it backs off or the send queue is full. */
	void resend(uint64_t now, bool (*owes)(void *ctx, Peer &p), void *ctx);
	bool any_busy() const { return !busy_.empty(); }

	/* Counters (fi_efa_ep_stats): packets by protocol v4 type each way (rx: counted by
	 * the endpoint), refusals by the peers' devices and packets sent again after one. */
	struct Stats {
		uint64_t tx_pkts[256] = {}, tx_bytes[256] = {};
		uint64_t rx_pkts[256] = {}, rx_bytes[256] = {};
		uint64_t rnr_received = 0, rnr_resent = 0;
	} stats;

private:
	/* The statistics of a packet on the device (inline in packet_io.cpp: every send
	 * takes it), or of one a refused doorbell took back (Sign -1). */
	template <int Sign>
	[[gnu::always_inline]] inline void count_sent(Pkt *pkt, uint32_t bytes);
	int post_sges(Pkt *pkt, uint32_t flags);
	verbs::Qp *qp_ = nullptr;
	std::vector<Pkt *> burst_; /* sent with send_more, doorbell not rung yet */
	PktPool tx_, rx_;
	size_t size_ = 0;
	size_t copy_max_ = SIZE_MAX; /* FI_EFA_RX_COPY_MAX */
	size_t copy_bytes_ = 0;	     /* in live copies */
	size_t held_ = 0;	     /* receive buffers kept in place of copies */
	std::vector<Pkt *> spare_;   /* freed copies of full size, kept for reuse (a few) */
	CopyLink *copies_ = nullptr; /* the live copies (packet_io.cpp) */
	IList<Peer> busy_; /* peers with queued packets, or owing one */
	uint32_t backoff_first_us_ = 0;
	uint32_t backoff_max_us_ = 0;
};

} // namespace efa::rdm

#endif
