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
 * TxShm per send, the MsgRx per message.
 *
 * Everything runs under the endpoint's lock: shm's callbacks come from inside our own
 * calls into shm (its progress runs when we read its CQs), so they never take it.
 */
#ifndef EFA_RDM_SHM_H
#define EFA_RDM_SHM_H

#include "addr.h"
#include "rdm/ops.h"
#include "rdm/pool.h"

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
#include <vector>

namespace efa::rdm {

struct Ep;

struct ShmStats {
	uint64_t sends = 0;	 /* sends handed to shm */
	uint64_t recvs = 0;	 /* messages shm delivered */
	uint64_t unexpected = 0; /* of them, found no receive on arrival */
};

class ShmPath {
public:
	/* shm for `ep` (enabled: its QP exists), or null when it is off
	 * (FI_EFA_ENABLE_SHM_TRANSFER=0, FI_REMOTE_COMM without FI_LOCAL_COMM) or cannot be
	 * opened (one info line says why; same-host peers then use the device). */
	static std::unique_ptr<ShmPath> open(Ep &ep);
	~ShmPath();
	ShmPath(const ShmPath &) = delete;
	ShmPath &operator=(const ShmPath &) = delete;

	/* The shm address of AV entry `a`, or FI_ADDR_NOTAVAIL when it is not a same-host
	 * peer (or not in the AV). */
	fi_addr_t route(fi_addr_t a)
	{
		if (av_count() != scanned_)
			sync();
		return a < to_shm_.size() && valid(a) ? to_shm_[a] : FI_ADDR_NOTAVAIL;
	}
	/* A send to same-host peer `dest` (its shm address). 0 or -FI_E*. */
	ssize_t send(const SendArgs &a, fi_addr_t dest);
	/* Reads shm's CQs (which runs shm's progress: its callbacks) and completes. */
	void progress();
	/* A queued message was bound to a receive: shm copies it (its completion comes
	 * through progress), or drops it when discarded. */
	int start(MsgRx &m);
	void discard(MsgRx &m);

	const ShmStats &stats() const { return stats_; }

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
		uint64_t flags = 0;
		bool completion = true;
		std::vector<uint8_t> bounce; /* an inject larger than shm's inject size */
	};

	explicit ShmPath(Ep &ep) : ep_(ep) {}
	int init();
	size_t av_count() const;
	bool valid(fi_addr_t a) const;
	void sync();
#if EFA_SHM_PATH
	int arrival(bool tagged, fi_addr_t addr, uint64_t tag, uint64_t size, fi_peer_rx_entry **out);
	/* Hands m's entry e to shm: the data goes to iov[0..count), then to the sink when
	 * `with_sink` and an iov is left (true when it was added); the completion names m. */
	bool fill(fi_peer_rx_entry &e, MsgRx &m, const iovec *iov, size_t count, bool with_sink);
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
