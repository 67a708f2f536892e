/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The current efadv ABI, whatever efadv.h is installed.
 *
 * Debian 12 ships rdma-core 44, whose efadv.h predates RDMA write, unsolicited write
 * receive, wide inline, QP flags/sl/wr_flags and processing hints. Both the provider
 * (which must use those features on a current device) and the software device (which
 * implements them) need the current layouts, so this header:
 *
 *  - defines the enum values the installed header lacks (configure's HAVE_DECL_*);
 *  - defines, under `*_cur` names, the current layout of every struct that grew
 *    (member lists in efa/efadv_layouts.h, shared with include/efadv-current)
 *    (efadv_device_attr, efadv_qp_init_attr, efadv_cq_init_attr, efadv_cq). A struct
 *    cannot be redefined, so code always uses the `_cur` type and passes its size as
 *    `inlen`; where the installed header already has the new members, static_asserts
 *    prove the layouts are identical;
 *  - declares struct efadv_qp, efadv_qp_from_ibv_qp_ex() and
 *    efadv_wr_set_processing_hints() when the installed header lacks them, and the
 *    queue depth queries (efadv_get_max_sq_depth / efadv_get_max_rq_depth, with their
 *    structs), which the provider only ever reaches through dlsym.
 *
 * Layouts follow the efadv man pages of current rdma-core (shared/reference/efadv).
 */
#ifndef EFA_EFADV_COMPAT_H
#define EFA_EFADV_COMPAT_H

#include "config.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>
#include <infiniband/efadv.h>

#include "efa/efadv_layouts.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------ device capabilities */
#if !HAVE_DECL_EFADV_DEVICE_ATTR_CAPS_RDMA_WRITE
#define EFADV_DEVICE_ATTR_CAPS_RDMA_WRITE (1 << 3)
#endif
#if !HAVE_DECL_EFADV_DEVICE_ATTR_CAPS_UNSOLICITED_WRITE_RECV
#define EFADV_DEVICE_ATTR_CAPS_UNSOLICITED_WRITE_RECV (1 << 4)
#endif
#if !HAVE_DECL_EFADV_DEVICE_ATTR_CAPS_CQ_WITH_EXT_MEM_DMABUF
#define EFADV_DEVICE_ATTR_CAPS_CQ_WITH_EXT_MEM_DMABUF (1 << 5)
#endif
#if !HAVE_DECL_EFADV_DEVICE_ATTR_CAPS_COMP_CNTR
#define EFADV_DEVICE_ATTR_CAPS_COMP_CNTR (1 << 6)
#endif

/* ------------------------------------------------------------ QP creation flags */
#if !HAVE_DECL_EFADV_QP_FLAGS_UNSOLICITED_WRITE_RECV
#define EFADV_QP_FLAGS_UNSOLICITED_WRITE_RECV (1 << 0)
#endif
#if !HAVE_DECL_EFADV_QP_FLAGS_INLINE_WRITE
#define EFADV_QP_FLAGS_INLINE_WRITE (1 << 1)
#endif
#if !HAVE_DECL_EFADV_WR_EX_WITH_PROCESSING_HINTS
#define EFADV_WR_EX_WITH_PROCESSING_HINTS (1 << 0)
#endif
#if !HAVE_DECL_EFADV_WR_PROCESSING_HINT_BURST_PPS_SENSITIVE
#define EFADV_WR_PROCESSING_HINT_BURST_PPS_SENSITIVE (1 << 0)
#endif

/* ------------------------------------------------------------ CQ creation flags */
#if !HAVE_DECL_EFADV_WC_EX_WITH_IS_UNSOLICITED
#define EFADV_WC_EX_WITH_IS_UNSOLICITED (1 << 1)
#endif
#ifndef EFADV_CQ_INIT_FLAGS_EXT_MEM_DMABUF
#define EFADV_CQ_INIT_FLAGS_EXT_MEM_DMABUF (1 << 0)
#endif

/* ------------------------------------------------------------ current struct layouts */
struct efadv_device_attr_cur {
	EFA_EFADV_DEVICE_ATTR_MEMBERS
};

struct efadv_qp_init_attr_cur {
	EFA_EFADV_QP_INIT_ATTR_MEMBERS
};

struct efadv_cq_init_attr_cur {
	EFA_EFADV_CQ_INIT_ATTR_MEMBERS
};

struct efadv_cq_cur {
	EFA_EFADV_CQ_MEMBERS
};

/* Sizes of the first published layouts: the smallest inlen a caller may pass. */
#define EFADV_DEVICE_ATTR_V1_SIZE 24u /* up to inline_buf_size + reserved[2] */
#define EFADV_QP_INIT_ATTR_V1_SIZE 16u /* up to driver_qp_type + reserved[4] */
#define EFADV_CQ_INIT_ATTR_V1_SIZE 16u /* comp_mask + wc_flags */
#define EFADV_AH_ATTR_V1_SIZE 16u

#if !HAVE_DECL_EFADV_QP_FROM_IBV_QP_EX
struct efadv_qp {
	EFA_EFADV_QP_MEMBERS
};

struct efadv_qp *efadv_qp_from_ibv_qp_ex(struct ibv_qp_ex *ibvqpx);
#endif

#if !HAVE_DECL_EFADV_WR_SET_PROCESSING_HINTS
static inline void efadv_wr_set_processing_hints(struct efadv_qp *efadv_qp, uint32_t hints)
{
	efadv_qp->wr_set_processing_hints(efadv_qp, hints);
}
#endif

/* Queue depths as the device allows them for a queue's attributes (rdma-core 2026:
 * a wide inline size or inline RDMA write needs wide send queue entries, fewer of which
 * fit). Both return the depth, or a negative errno. */
#if !HAVE_DECL_EFADV_SQ_DEPTH_ATTR_INLINE_WRITE
#define EFADV_SQ_DEPTH_ATTR_INLINE_WRITE (1 << 0)
#endif
#if !HAVE_DECL_EFADV_GET_MAX_SQ_DEPTH
struct efadv_sq_depth_attr {
	uint64_t comp_mask;
	uint32_t flags;
	uint32_t max_send_sge;
	uint32_t max_rdma_sge;
	uint32_t max_inline_data;
};

int efadv_get_max_sq_depth(struct ibv_context *ibvctx, struct efadv_sq_depth_attr *attr, uint32_t inlen);
#endif
#if !HAVE_DECL_EFADV_GET_MAX_RQ_DEPTH
struct efadv_rq_depth_attr {
	uint64_t comp_mask;
	uint32_t max_recv_sge;
};

int efadv_get_max_rq_depth(struct ibv_context *ibvctx, struct efadv_rq_depth_attr *attr, uint32_t inlen);
#endif

/* efadv_wc_is_unsolicited() through the current efadv_cq layout. */
static inline bool efadv_wc_is_unsolicited_cur(struct efadv_cq *efadv_cq)
{
	return ((struct efadv_cq_cur *)(void *)efadv_cq)->wc_is_unsolicited(efadv_cq);
}

#ifdef __cplusplus
} /* extern "C" */

/* Where the installed header has the new members, its layout must be ours. */
static_assert(sizeof(efadv_device_attr_cur) == 32, "efadv_device_attr ABI");
static_assert(sizeof(efadv_qp_init_attr_cur) == 24, "efadv_qp_init_attr ABI");
static_assert(sizeof(efadv_cq_init_attr_cur) == 56, "efadv_cq_init_attr ABI");
static_assert(offsetof(efadv_device_attr_cur, device_caps) == 24, "efadv_device_attr ABI");
static_assert(offsetof(efadv_device_attr_cur, max_rdma_size) ==
		      offsetof(efadv_device_attr, max_rdma_size),
	      "efadv_device_attr ABI");
#if HAVE_STRUCT_EFADV_DEVICE_ATTR_INLINE_BUF_SIZE_EX
static_assert(offsetof(efadv_device_attr_cur, inline_buf_size_ex) ==
		      offsetof(efadv_device_attr, inline_buf_size_ex),
	      "efadv_device_attr ABI");
#endif
#if HAVE_STRUCT_EFADV_QP_INIT_ATTR_WR_FLAGS
static_assert(offsetof(efadv_qp_init_attr_cur, wr_flags) ==
		      offsetof(efadv_qp_init_attr, wr_flags),
	      "efadv_qp_init_attr ABI");
#endif
#if HAVE_STRUCT_EFADV_QP_INIT_ATTR_SL
static_assert(offsetof(efadv_qp_init_attr_cur, sl) == offsetof(efadv_qp_init_attr, sl),
	      "efadv_qp_init_attr ABI");
#endif
#if HAVE_STRUCT_EFADV_CQ_WC_IS_UNSOLICITED
static_assert(offsetof(efadv_cq_cur, wc_is_unsolicited) ==
		      offsetof(efadv_cq, wc_is_unsolicited),
	      "efadv_cq ABI");
#endif
static_assert(offsetof(efadv_cq_cur, wc_read_sgid) == offsetof(efadv_cq, wc_read_sgid),
	      "efadv_cq ABI");
static_assert(sizeof(efadv_sq_depth_attr) == 24 && offsetof(efadv_sq_depth_attr, max_inline_data) == 20,
	      "efadv_sq_depth_attr ABI");
static_assert(sizeof(efadv_rq_depth_attr) == 16 && offsetof(efadv_rq_depth_attr, max_recv_sge) == 8,
	      "efadv_rq_depth_attr ABI");
#endif /* __cplusplus */

#endif /* EFA_EFADV_COMPAT_H */
