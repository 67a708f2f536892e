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

#ifdef __cplusplus
}
#endif

#endif /* FI_EXT_EFA_H */
