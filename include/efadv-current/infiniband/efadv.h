/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The efadv API of current rdma-core, for building OUTSIDE programs against it on a
 * system whose rdma-core is older (Debian 12 ships rdma-core 44).
 *
 * Put this directory first on the include path (-I.../include/efadv-current) and
 * `#include <infiniband/efadv.h>` finds this header instead of the installed one. It is
 * a complete replacement: the struct layouts are today's (so `inlen` = sizeof is the
 * current size), and it declares exactly the entry points and flags the software EFA
 * device (libefasim.so) implements, so a program configured against it compiles in
 * the paths that use RDMA write, unsolicited write receive, service levels and
 * processing hints, and resolves every efadv symbol it calls from libefasim.so when
 * run with LD_PRELOAD. It deliberately does not declare what the device lacks
 * (efadv_query_mr, efadv_query_qp_wqs, efadv_query_cq, completion counters): a program
 * that probes for those with configure keeps its fallback.
 *
 * Used by contrib/libfabric2.sh to build upstream libfabric's EFA provider for the
 * software device. The provider and the device themselves use
 * include/efa/efadv_compat.h with the installed header; its `_cur` structs
 * and the structs below take their members from include/efa/efadv_layouts.h. Layouts follow the efadv man pages (shared/reference/efadv).
 */
#ifndef __EFADV_H__
#define __EFADV_H__
#define EFA_EFADV_CURRENT_H 1

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include <infiniband/verbs.h>

/* The member lists, shared with the provider's compatibility header. */
#include "../../efa/efadv_layouts.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------ queue pairs */
enum {
	EFADV_QP_DRIVER_TYPE_SRD = 0,
};

enum {
	EFADV_QP_FLAGS_UNSOLICITED_WRITE_RECV = 1 << 0,
	EFADV_QP_FLAGS_INLINE_WRITE = 1 << 1,
};

enum {
	EFADV_WR_EX_WITH_PROCESSING_HINTS = 1 << 0,
};

struct efadv_qp_init_attr {
	EFA_EFADV_QP_INIT_ATTR_MEMBERS
};

struct ibv_qp *efadv_create_driver_qp(struct ibv_pd *ibvpd, struct ibv_qp_init_attr *attr,
				      uint32_t driver_qp_type);
struct ibv_qp *efadv_create_qp_ex(struct ibv_context *ibvctx, struct ibv_qp_init_attr_ex *attr_ex,
				  struct efadv_qp_init_attr *efa_attr, uint32_t inlen);

/* Extended send operations of an SRD QP created with EFADV_WR_EX_WITH_PROCESSING_HINTS. */
enum {
	EFADV_WR_PROCESSING_HINT_BURST_PPS_SENSITIVE = 1 << 0,
};

struct efadv_qp {
	EFA_EFADV_QP_MEMBERS
};

/* Weak: libefa of rdma-core 44 does not define it, so a library built with this header
 * still links programs against that libefa; where the call is made (a device with
 * processing hints) the definition comes from the device's library (libefasim.so under
 * LD_PRELOAD, or a current libefa). */
struct efadv_qp *efadv_qp_from_ibv_qp_ex(struct ibv_qp_ex *ibvqpx) __attribute__((weak));

static inline void efadv_wr_set_processing_hints(struct efadv_qp *efadv_qp, uint32_t hints)
{
	efadv_qp->wr_set_processing_hints(efadv_qp, hints);
}

/* ------------------------------------------------------------ device */
enum {
	EFADV_DEVICE_ATTR_CAPS_RDMA_READ = 1 << 0,
	EFADV_DEVICE_ATTR_CAPS_RNR_RETRY = 1 << 1,
	EFADV_DEVICE_ATTR_CAPS_CQ_WITH_SGID = 1 << 2,
	EFADV_DEVICE_ATTR_CAPS_RDMA_WRITE = 1 << 3,
	EFADV_DEVICE_ATTR_CAPS_UNSOLICITED_WRITE_RECV = 1 << 4,
};

struct efadv_device_attr {
	EFA_EFADV_DEVICE_ATTR_MEMBERS
};

int efadv_query_device(struct ibv_context *ibvctx, struct efadv_device_attr *attr, uint32_t inlen);

/* ------------------------------------------------------------ address handles */
struct efadv_ah_attr {
	uint64_t comp_mask;
	uint16_t ahn;
	uint8_t reserved[6];
};

int efadv_query_ah(struct ibv_ah *ibvah, struct efadv_ah_attr *attr, uint32_t inlen);

/* ------------------------------------------------------------ completion queues */
enum {
	EFADV_WC_EX_WITH_SGID = 1 << 0,
	EFADV_WC_EX_WITH_IS_UNSOLICITED = 1 << 1,
};

struct efadv_cq_init_attr {
	EFA_EFADV_CQ_INIT_ATTR_MEMBERS
};

struct efadv_cq {
	EFA_EFADV_CQ_MEMBERS
};

struct ibv_cq_ex *efadv_create_cq(struct ibv_context *ibvctx, struct ibv_cq_init_attr_ex *attr_ex,
				  struct efadv_cq_init_attr *efa_attr, uint32_t inlen);
struct efadv_cq *efadv_cq_from_ibv_cq_ex(struct ibv_cq_ex *ibvcqx);

static inline int efadv_wc_read_sgid(struct efadv_cq *efadv_cq, union ibv_gid *sgid)
{
	return efadv_cq->wc_read_sgid(efadv_cq, sgid);
}

static inline bool efadv_wc_is_unsolicited(struct efadv_cq *efadv_cq)
{
	return efadv_cq->wc_is_unsolicited(efadv_cq);
}

#ifdef __cplusplus
}
#endif

#endif /* __EFADV_H__ */
