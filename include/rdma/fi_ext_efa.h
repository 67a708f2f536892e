/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Public extensions of the efa provider: endpoint options and operation flags, with the
 * values upstream libfabric uses, for applications built against libfabric headers that
 * lack them (1.17 declares only FI_OPT_EFA_RNR_RETRY).
 */
#ifndef FI_EXT_EFA_H
#define FI_EXT_EFA_H

#include <rdma/fabric.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_ext.h>

#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#if FI_VERSION_LT(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), FI_VERSION(1, 18))
/* Endpoint options (level FI_OPT_ENDPOINT), added to fi_ext.h in libfabric 1.18. */
#define FI_OPT_EFA_EMULATED_READ (-FI_PROV_SPECIFIC_EFA + 1)          /* bool, getopt */
#define FI_OPT_EFA_EMULATED_WRITE (-FI_PROV_SPECIFIC_EFA + 2)         /* bool, getopt */
#define FI_OPT_EFA_EMULATED_ATOMICS (-FI_PROV_SPECIFIC_EFA + 3)       /* bool, getopt */
#define FI_OPT_EFA_USE_DEVICE_RDMA (-FI_PROV_SPECIFIC_EFA + 4)        /* bool */
#define FI_OPT_EFA_SENDRECV_IN_ORDER_ALIGNED_128_BYTES (-FI_PROV_SPECIFIC_EFA + 5) /* bool */
#define FI_OPT_EFA_WRITE_IN_ORDER_ALIGNED_128_BYTES (-FI_PROV_SPECIFIC_EFA + 6)    /* bool */
/* Generic options of later libfabric versions, by number. */
#define FI_OPT_CUDA_API_PERMITTED 10
#endif
#if FI_VERSION_LT(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), FI_VERSION(1, 21))
#define FI_OPT_SHARED_MEMORY_PERMITTED 11
#endif
#if FI_VERSION_LT(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), FI_VERSION(2, 4))
/* bool, set before fi_enable (libfabric 2.4's value): false makes a remote write with data
 * consume a receive at this endpoint, as without the device's unsolicited write receive. */
#define FI_OPT_EFA_USE_UNSOLICITED_WRITE_RECV (-FI_PROV_SPECIFIC_EFA + 8)
#endif

/* Operation flag for RDMA writes: the work request is part of a bursty, packet-rate
 * sensitive stream (EFA processing hint). */
#ifndef FI_EFA_WR_HIGH_PPS
#define FI_EFA_WR_HIGH_PPS (1ULL << 60)
#endif

/*
 * Statistics and hang reports of an efa-fabric endpoint (fi_efa(7), STATISTICS AND
 * REPORTS): fi_open_ops(&ep->fid, FI_EFA_STATS_OPS, 0, (void **)&ops, NULL) gives a
 * struct fi_efa_ops_stats. The structures only grow at their end: a caller passes the
 * size of its own, and gets that much (or less, from an older provider: the call
 * returns the size filled).
 */
#define FI_EFA_STATS_OPS "efa_stats_ops"
#define FI_EFA_PKT_TYPES 256 /* packet counters are indexed by protocol v4 type (0-255) */

struct fi_efa_ep_stats {
	uint64_t tx_pkts[FI_EFA_PKT_TYPES];  /* packets sent to the device, by type */
	uint64_t tx_bytes[FI_EFA_PKT_TYPES]; /* their bytes, headers included */
	uint64_t rx_pkts[FI_EFA_PKT_TYPES];  /* packets received, by type */
	uint64_t rx_bytes[FI_EFA_PKT_TYPES];
	uint64_t rnr_received; /* packets a peer's device refused (receiver not ready) */
	uint64_t rnr_resent;   /* packets sent again after a refusal (retransmissions requested) */
	uint64_t rx_held;      /* receive buffers kept for unexpected messages, now (FI_EFA_RX_COPY_MAX) */
	uint64_t rx_copy_bytes;	 /* bytes in packet copies, now */
	/* Protocol chosen per send (messages through the device). */
	uint64_t send_inject, send_eager, send_medium, send_longcts, send_longread;
	uint64_t shm_sends, shm_recvs; /* messages to and from same-host peers through shm */
	/* The domain's registration cache. */
	uint64_t mr_cache_hits, mr_cache_misses;
	/* Packets dropped: malformed, for unknown operations, duplicates, beyond the reorder
	 * reach, of another protocol version. */
	uint64_t drop_malformed, drop_unknown, drop_dup, drop_far, drop_foreign;
	uint64_t peers;	     /* peers with state */
	uint64_t tx_ops;     /* transmit operations in progress (sends, RMA, atomics) */
	uint64_t rx_ops;     /* receives posted, not completed */
	uint64_t rx_msgs;    /* messages arriving or unexpected */
	uint64_t reports;    /* hang reports written */
	uint64_t pool_bytes; /* heap kept by the operation pools and id tables (their high-water mark) */
};

struct fi_efa_peer_stats {
	uint64_t tx_pkts, tx_bytes, rx_pkts, rx_bytes;
	uint64_t rnr_received, rnr_resent;
	uint64_t tx_ops;	   /* operations to it in progress */
	uint64_t rx_msgs;	   /* messages from it arriving or unexpected */
	uint32_t reorder_expected; /* next message id expected from it */
	uint32_t reorder_held;	   /* packets held for later ids */
	uint32_t backoff_us;	   /* receiver-not-ready backoff now (0: none) */
	uint32_t queued;	   /* packets waiting for their retry */
	uint32_t flags;		   /* FI_EFA_PEER_* */
};
#define FI_EFA_PEER_HANDSHAKE_SENT (1u << 0)
#define FI_EFA_PEER_HANDSHAKE_RECEIVED (1u << 1)
#define FI_EFA_PEER_UNRESPONSIVE (1u << 2) /* its device stopped answering */
#define FI_EFA_PEER_PROBING (1u << 3)	   /* silent: a probe is on its way */

struct fi_efa_ops_stats {
	size_t size; /* sizeof(struct fi_efa_ops_stats) of the provider */
	/* Returns the bytes filled (at most len), or -FI_EINVAL. */
	ssize_t (*query_ep)(struct fid_ep *ep, struct fi_efa_ep_stats *stats, size_t len);
	/* addr: an fi_addr of the endpoint's AV; -FI_ENOENT when no state exists for it. */
	ssize_t (*query_peer)(struct fid_ep *ep, fi_addr_t addr, struct fi_efa_peer_stats *stats, size_t len);
	/* Writes the endpoint's hang report now (operations older than min_age_ms), where
	 * FI_EFA_REPORT_PATH says. Returns 0 or a negative error. */
	int (*report)(struct fid_ep *ep, uint64_t min_age_ms);
};

#ifdef __cplusplus
}
#endif

#endif /* FI_EXT_EFA_H */
