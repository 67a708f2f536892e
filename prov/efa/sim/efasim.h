/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Public extension of the software EFA device (libefasim.so).
 *
 * Everything else the device offers is the rdma-core API (ibv_*, efadv_*). This header
 * adds what only a software device can give: its statistics, for tests and users. A
 * program that may also run on hardware looks the function up with dlsym() and treats
 * its absence as "not the software device".
 */
#ifndef EFASIM_H
#define EFASIM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct ibv_context;

/* Counters of one device in this process (all contexts opened on it). Grows at the end. */
struct efasim_stats {
	uint64_t tx_packets;       /* datagrams handed to the network, retransmissions included */
	uint64_t rx_packets;       /* datagrams received and parsed */
	uint64_t tx_bytes;
	uint64_t rx_bytes;
	uint64_t retransmits;      /* data packets sent again after a timeout */
	uint64_t acks_sent;        /* stand-alone acknowledgement packets */
	uint64_t rnr_naks_sent;    /* receiver not ready: no receive posted */
	uint64_t rnr_naks_received;
	uint64_t rnr_retries;      /* sends repeated after an RNR NAK */
	uint64_t qkey_drops;       /* data packets for a QP whose QKEY did not match */
	uint64_t duplicates;       /* data packets received twice (dropped) */
	uint64_t out_of_order;     /* data packets that overtook an earlier one */
	uint64_t malformed;        /* datagrams dropped by the parser */
	uint64_t remote_errors;    /* NAKs sent for bad keys, bounds, access, unknown peer */
	uint64_t rdma_read_bytes;  /* served as target */
	uint64_t rdma_write_bytes; /* placed as target */
	uint64_t unsolicited_recvs;
	uint64_t hinted_wrs;       /* work requests that carried processing hints */
	uint64_t sl_nonzero_wrs;   /* work requests posted on a QP with sl != 0 */
	uint64_t fault_dropped;    /* injected loss */
	uint64_t fault_duplicated; /* injected duplication */
	uint64_t fault_delayed;    /* injected delay or reordering */
	uint64_t peer_timeouts;    /* peers declared unresponsive or unreachable */
	uint64_t cq_overruns;      /* completions beyond a CQ's size (kept, not lost) */
	uint64_t engine_wakeups;   /* wake-ups of the device's engine thread */
	uint64_t poll_drains;      /* socket drains done by a polling application thread */
	uint64_t ud_sent;          /* UD datagrams sent (lost ones included) */
	uint64_t ud_received;      /* UD datagrams that consumed a posted receive */
	uint64_t ud_no_recv;       /* UD datagrams dropped: no receive posted */
	uint64_t ud_dropped;       /* UD datagrams dropped: QP not ready, or a QP of the other type */
	uint64_t dma_bytes;        /* RDMA read bytes placed, as target, by one copy into another
				    * process on this device (loopback DMA; also in rdma_read_bytes),
				    * and RDMA write bytes pulled from one (also in rdma_write_bytes) */
	uint64_t dma_refused;      /* loopback DMA offers not taken (no proof, or the kernel
				    * refused the copy): those streamed instead */
	uint64_t tx_batches;       /* sendmsg calls that carried several datagrams (UDP_SEGMENT) */
	uint64_t rx_coalesced;     /* datagrams that arrived in a coalesced buffer (UDP_GRO) */
};

/*
 * Copies the statistics of the device behind `context` into `stats` (at most `len`
 * bytes). Returns 0, or EINVAL when `context` is not a software device context.
 */
int efasim_query_stats(struct ibv_context *context, struct efasim_stats *stats, size_t len);

/* Name of the capability profile the device emulates ("default", "no-rdma-write", ...). */
const char *efasim_profile_name(void);

#ifdef __cplusplus
}
#endif

#endif /* EFASIM_H */
