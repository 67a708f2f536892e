/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Same-host peers through libfabric's shm provider (docs/design.md, "Same-host peers").
 *
 * An endpoint with FI_EFA_ENABLE_SHM_TRANSFER on opens one shm endpoint of its own,
 * named after its address as upstream names it (GID_QPN_QKEY_UID), so a peer derives the
 * name from the address it already has. A peer is on this host when its GID is our
 * device's: the same device, hence the same machine and network namespace. Sends to such
 * a peer go to shm; what shm receives is matched against the endpoint's one receive
 * queue through the peer shared-receive-context interface of rdma/fi_ext.h (we own the
 * queue, shm asks get_msg/get_tag and queues what finds no receive), so tagged and
 * untagged matching, directed receives, FI_SOURCE, peek/claim/discard and multi-receive
 * follow the same rules whichever path a message took (receiver.h, RxKind::Shm).
 *
 * libfabric 1.17 refuses a peer CQ (fi_cq_open with FI_PEER), so shm completes into two
 * CQs of its own (transmit, receive) that the endpoint reads in its progress and turns
 * into its completions, counters and error entries. The contexts shm sees are ours: a
 * TxShm per send; per message, the receive that took it on arrival (the common case,
 * no message entry) or the MsgRx of one that had to wait or be pulled.
 *
 * Everything runs under the endpoint's lock: shm's callbacks come from inside our own
 * calls into shm (its progress runs when we read its CQs), so they never take it.
 *
 * Senders. libfabric 1.17's shm names a message's sender only by the fi_addr its own AV
 * has for it (FI_ADDR_NOTAVAIL when we never inserted it there). So, before its first
 * message to a same-host peer, a sender writes its address into the peer's inbox (a
 * part of the peer's key-table file, below), and the peer inserts every address it
 * finds there into its shm AV at its next progress. A message whose sender the
 * application has not inserted keeps its shm address and gets the sender's fi_addr at
 * the insert; one that shm reads before our progress took its sender's announcement is
 * refused with -FI_EAGAIN, which 1.17's shm retries. A peer without an inbox gets our
 * messages through the device.
 *
 * Remote keys. RMA and atomics to a same-host peer go through shm too, with one key for
 * both paths: every registration of the domain is registered with our shm domain under
 * the same key (MrMirror). libfabric 1.17's shm drops an RMA or atomic whose key it
 * refuses without a word to the initiator, which would wait for ever; so each endpoint
 * also publishes its registrations in a shared-memory table (/dev/shm/efa_keys_<shm
 * name>), and the initiator checks the remote iov there before posting: a refusal
 * completes at once (FI_EACCES, PEER_KEY_REFUSED). A peer whose table cannot be read
 * or is full keeps the device for RMA and atomics.
 */
#ifndef EFA_RDM_SHM_H
#define EFA_RDM_SHM_H

#include "addr.h"
#include "ep_base.h"
#include "rdm/ops.h"
#include "rdm/pool.h"
#include "rdm/shm_inbox.h"

#include <rdma/fabric.h>
#include <rdma/fi_endpoint.h>

/* The path is built against libfabric 1.17's peer interface (rdma/fi_ext.h); later
 * versions moved it to rdma/providers/fi_peer.h and changed it (get_tag's arguments, the
 * rx entry). Built against another version, ShmPath::open says so and returns null. */
#if FI_MAJOR_VERSION == 1 && FI_MINOR_VERSION == 17
#define EFA_SHM_PATH 1
#include <rdma/fi_ext.h>
#else
#define EFA_SHM_PATH 0
#endif

#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace efa::rdm {

struct Ep;

struct ShmStats {
	uint64_t sends = 0;	 /* sends handed to shm */
	uint64_t recvs = 0;	 /* messages shm delivered */
	uint64_t unexpected = 0; /* of them, found no receive on arrival */
	uint64_t rma = 0;	 /* writes and reads handed to shm */
	uint64_t atomics = 0;	 /* atomics handed to shm */
	uint64_t deferred = 0;	 /* messages refused until their sender's announcement was taken */
};

class ShmPath final : public MrMirror {
public:
	/* shm for `ep` (enabled: its QP exists), or null when it is off
	 * (FI_EFA_ENABLE_SHM_TRANSFER=0, FI_REMOTE_COMM without FI_LOCAL_COMM) or cannot be
	 * opened (one info line says why; same-host peers then use the device). */
	static std::unique_ptr<ShmPath> open(Ep &ep);
	/* Whether an endpoint with these caps tries shm (the switch and the hint rule);
	 * open() may still fail (another libfabric than 1.17, no shm). */
	static bool wanted(uint64_t caps);
	/* The bytes of one atomic through libfabric 1.17's shm: a compare's operand and
	 * comparand share its 4 KiB inject buffer. Where shm may carry atomics, the
	 * endpoint's limit is this too (fi_atomicvalid, fi_query_atomic), one limit
	 * whichever path a peer takes. */
	static constexpr size_t kMaxAtomic = 2048;
	~ShmPath();
	ShmPath(const ShmPath &) = delete;
	ShmPath &operator=(const ShmPath &) = delete;

	/* The shm address of AV entry `a`, or FI_ADDR_NOTAVAIL when it is not a same-host
	 * peer (or not in the AV). */
	fi_addr_t route(fi_addr_t a)
	{
		look();
		return a < to_shm_.size() && valid(a) ? to_shm_[a] : FI_ADDR_NOTAVAIL;
	}
	/* Takes in AV entries inserted since the last look (before a directed receive
	 * matches: messages of a sender that announced itself get its fi_addr). */
	void look()
	{
		if (av_count() != scanned_)
			sync();
	}
	/* A send, RMA or atomic to same-host peer `dest` (its shm address), its arguments
	 * checked (Sender::check_rma, check_atomic). 0 or -FI_E*. */
	ssize_t send(const SendArgs &a, fi_addr_t dest);
	ssize_t rma(const RmaArgs &a, uint64_t len, fi_addr_t dest);
	ssize_t atomic(const AtomicArgs &a, fi_addr_t dest);
	/* Whether RMA and atomics to same-host peer `dest` go through shm: its key table
	 * (the top of this file) is readable and complete. */
	bool keys_known(fi_addr_t dest) { return peer_keys(dest) != nullptr; }
	/* How many elements of `dt` one atomic of this kind through shm carries (0: shm
	 * has no such atomic). */
	size_t atomic_count(AtomicKind kind, fi_datatype dt, fi_op op);
	/* Reads shm's CQs (which runs shm's progress: its callbacks) and completes. */
	void progress();
	/* A queued message was bound to a receive: shm copies it (its completion comes
	 * through progress), or drops it when discarded. */
	int start(MsgRx &m);
	void discard(MsgRx &m);

	const ShmStats &stats() const { return stats_; }
	size_t pool_bytes() const
	{
#if EFA_SHM_PATH
		return txs_.bytes() + entries_.bytes();
#else
		return txs_.bytes();
#endif
	}

	/* The domain's registrations, mirrored into our shm domain under the same keys
	 * (MrMirror): a same-host peer's RMA and atomics are checked there by shm. */
	int mirror_reg(const Mr &m) override;
	void mirror_dereg(const Mr &m) override;

private:
#if EFA_SHM_PATH
	struct Srx {
		fid_peer_srx srx; /* first: shm's callbacks get it */
		ShmPath *path;
	};
	struct Entry {
		fi_peer_rx_entry e; /* first: shm hands it back */
		iovec iov[kMaxRmaIov + 1];
	};
#endif
	struct TxShm {
		void *context = nullptr;
		uint64_t flags = 0;	     /* of its completion */
		CntrIdx cntr = kCntrSend;    /* the counter it bumps */
		bool completion = true;
		std::vector<uint8_t> bounce; /* an inject larger than shm's inject size */
	};

	explicit ShmPath(Ep &ep) : ep_(ep) {}
	int init();
	int open_remote_counters();
	void read_remote_counters();
	/* A send's or write's entry and what shm gets: begin_tx refuses an inject beyond
	 * tx_attr->inject_size (-FI_EMSGSIZE, logged as `call`), -FI_EAGAIN without an entry. */
	struct Tx {
		TxShm *t = nullptr;
		const iovec *iov = nullptr;
		size_t count = 0;
		uint64_t flags = 0;
		iovec copy{}; /* iov names it when shm gets our copy */
	};
	ssize_t begin_tx(Tx &x, const char *call, void *context, uint64_t op_flags, uint64_t cq_flags, CntrIdx cntr,
			 const iovec *iov, size_t count, uint64_t len);
	/* A TxShm for an operation (its completion's flags, its counter), or null. */
	TxShm *new_tx(void *context, uint64_t op_flags, uint64_t cq_flags, CntrIdx cntr);
	/* The flags shm gets for a send or write; an inject larger than shm takes inline
	 * goes from t's copy (iov, count then name it). */
	uint64_t shm_flags(TxShm &t, uint64_t op_flags, const iovec *&iov, size_t &count, uint64_t len, iovec &copy);
	ssize_t posted(TxShm *t, ssize_t r);
	/* Hands a send (its iovs, context t) to shm; counts it in the stats when taken. */
	ssize_t post_send(const SendArgs &a, const iovec *iov, size_t count, fi_addr_t dest, TxShm *t, uint64_t flags);
	/* Remote keys (the top of this file): the peer's table, or null; whether it has
	 * the region; t completes with FI_EACCES when not. */
	const void *peer_keys(fi_addr_t dest);
	bool remote_ok(fi_addr_t dest, uint64_t key, uint64_t addr, uint64_t len, uint64_t access);
	void refuse(TxShm *t);
	void remote_event(const fi_cq_tagged_entry &c, fi_addr_t src, int err);
	size_t av_count() const;
	bool valid(fi_addr_t a) const;
	void sync();
	/* A same-host endpoint as shm knows it (by its shm name in names_). */
	struct Known {
		fi_addr_t sa = FI_ADDR_NOTAVAIL; /* in shm's AV (NOTAVAIL: shm refused it) */
		int8_t announced = -1;		 /* we wrote our address into its inbox (-1: not tried) */
		bool heard = false;		 /* it announced itself in ours */
	};
	/* addr's entry (`name`: its shm name), inserted into shm's AV at first sight; with
	 * `announce_first`, only once we could announce ourselves to it (it is alive). */
	Known &known(const RawAddr &addr, const std::string &name, bool announce_first);
	/* Announces us to k's peer (`name`), logging why not; false when it has no shm
	 * endpoint at all. */
	bool announce_to(Known &k, const RawAddr &addr, const std::string &name);
	/* Announcements (shm.h, "Senders"; rdm/shm_inbox.h): takes those written into our
	 * inbox. */
	void take_announcements();
	/* Whether a written one is not taken yet. */
	bool announcement_waiting() const;
#if EFA_SHM_PATH
	int arrival(bool tagged, fi_addr_t addr, uint64_t tag, uint64_t size, fi_peer_rx_entry **out);
	/* Hands entry e to shm: the data goes to iov[0..count) (the receive's own iovs for
	 * one that took the message on arrival), then to the sink when `with_sink` and an
	 * iov is left (true when it was added); the completion names m, or r by its
	 * taken_context. */
	bool fill(fi_peer_rx_entry &e, MsgRx &m, const iovec *iov, size_t count, bool with_sink);
	/* Receives of fewer iovs than this have room for the sink. */
	size_t sink_room() const { return std::min<size_t>(iov_limit_, kMaxRmaIov + 1); }
	/* Whether bound message m may not fit its receive and the receive has no iov left
	 * for the sink: shm copies it into our memory (a pull), then we into the receive. */
	bool through_pull(const MsgRx &m) const;
	bool fill(fi_peer_rx_entry &e, RxOp &r, bool with_sink);
	bool fill_entry(fi_peer_rx_entry &e, bool tagged, void *context, const iovec *iov, size_t count,
			bool with_sink);
	/* A receive that took a message on arrival (Receiver::shm_take) is named in shm's
	 * completion by its address with the low bit set (operation entries are aligned). */
	static_assert(alignof(RxOp) > 1 && alignof(MsgRx) > 1);
	static void *taken_context(RxOp *r) { return reinterpret_cast<void *>(reinterpret_cast<uintptr_t>(r) | 1); }
	static RxOp *taken(void *context)
	{
		const uintptr_t v = reinterpret_cast<uintptr_t>(context);
		return v & 1 ? reinterpret_cast<RxOp *>(v & ~uintptr_t(1)) : nullptr;
	}
	/* Tells shm to copy a queued message into what fill() gave it. */
	int copy(fi_peer_rx_entry &e, bool tagged);
	void tx_done(TxShm *t, int err, uint32_t prov_errno);
	/* Pulls (the top of this file). */
	void run_pulls();
	bool pull(MsgRx &m);
	void pull_done(MsgRx &m, uint64_t len, uint64_t data, bool has_data, int err);
	void unqueue_pull(MsgRx &m);
	void rx_completion(MsgRx &m, uint64_t len, uint64_t olen, uint64_t data, bool has_data, int err);

	static Srx *srx_of(fid_peer_srx *s) { return reinterpret_cast<Srx *>(s); }
	static fi_ops_srx_owner owner_ops_; /* shm's calls into our receive queue */
	static int get_msg(fid_peer_srx *s, fi_addr_t addr, size_t size, fi_peer_rx_entry **e);
	static int get_tag(fid_peer_srx *s, fi_addr_t addr, uint64_t tag, fi_peer_rx_entry **e);
	static int queue(fi_peer_rx_entry *e);
	static void free_entry(fi_peer_rx_entry *e);

#endif
	Ep &ep_;
	fid_domain *domain_ = nullptr;
	fid_av *av_ = nullptr;
	fid_cq *tx_cq_ = nullptr;
	fid_cq *rx_cq_ = nullptr;
	fid_ep *ep_shm_ = nullptr;
	bool holds_fabric_ = false; /* a reference to the process's shm fabric */
	bool mirrors_ = false;	    /* in the domain's mr_mirrors */
	std::unordered_map<const Mr *, fid_mr *> mrs_; /* our copies, under the domain's lock */
	void *keys_ = nullptr;			       /* our key table */
	std::string keys_name_;
	std::vector<const void *> peer_keys_; /* peers' tables by shm address (MAP_FAILED: none) */
	inbox::Inbox *inbox_ = nullptr;		      /* ours, in the key table's file */
	uint32_t inbox_rung_ = 0;		      /* its doorbell when last looked at */
	bool inbox_dirty_ = false;		      /* shm met a sender whose announcement waits */
	std::unordered_map<std::string, Known> names_;
	std::vector<std::string> sa_owner_; /* by shm fi_addr: the name it was given to */
	/* Remote writes and reads (FI_REMOTE_WRITE, FI_REMOTE_READ counters bound): shm
	 * counts them in counters of its own, whose growth we add to the endpoint's. */
	fid_cntr *rem_cntr_[2] = {};
	uint64_t rem_seen_[2] = {};
	size_t inject_size_ = 0;
	size_t iov_limit_ = 0; /* shm's receive iovs */
#if EFA_SHM_PATH
	Srx srx_{};
	ObjPool<Entry> entries_;
#endif
	ObjPool<TxShm> txs_;
	struct Slot {
		void *base = nullptr;
		bool busy = false;
	};
	static constexpr size_t kPullSlots = 4;
	Slot slots_[kPullSlots];
	std::deque<MsgRx *> pulls_; /* waiting for a slot, oldest first */
	std::vector<fi_addr_t> to_shm_;	  /* by our fi_addr */
	std::vector<fi_addr_t> from_shm_; /* by shm's fi_addr */
	size_t scanned_ = 0;		  /* AV entries looked at */
	ShmStats stats_;
};

} // namespace efa::rdm

#endif
