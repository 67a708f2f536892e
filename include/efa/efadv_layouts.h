/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The current layouts of the efadv structs that grew after rdma-core 44, as member
 * lists, written once for both headers that need them: efa/efadv_compat.h declares them
 * as `*_cur` structs over whatever efadv.h is installed (the provider and the software
 * device), include/efadv-current/infiniband/efadv.h under their own names (outside
 * programs built for the device). Layouts follow the efadv man pages of current
 * rdma-core (shared/reference/efadv).
 */
#ifndef EFA_EFADV_LAYOUTS_H
#define EFA_EFADV_LAYOUTS_H

#define EFA_EFADV_DEVICE_ATTR_MEMBERS \
	uint64_t comp_mask;           \
	uint32_t max_sq_wr;           \
	uint32_t max_rq_wr;           \
	uint16_t max_sq_sge;          \
	uint16_t max_rq_sge;          \
	uint16_t inline_buf_size;     \
	uint16_t inline_buf_size_ex;  \
	uint32_t device_caps;         \
	uint32_t max_rdma_size;

#define EFA_EFADV_QP_INIT_ATTR_MEMBERS \
	uint64_t comp_mask;            \
	uint32_t driver_qp_type;       \
	uint16_t flags;                \
	uint8_t sl;                    \
	uint8_t reserved[1];           \
	uint64_t wr_flags;

#define EFA_EFADV_CQ_INIT_ATTR_MEMBERS \
	uint64_t comp_mask;            \
	uint64_t wc_flags;             \
	uint64_t flags;                \
	struct {                       \
		uint8_t *buffer;       \
		uint64_t length;       \
		uint64_t offset;       \
		int32_t fd;            \
		uint8_t reserved[4];   \
	} ext_mem_dmabuf;

#define EFA_EFADV_CQ_MEMBERS                                                  \
	uint64_t comp_mask;                                                   \
	int (*wc_read_sgid)(struct efadv_cq * efadv_cq, union ibv_gid * sgid); \
	bool (*wc_is_unsolicited)(struct efadv_cq * efadv_cq);

#define EFA_EFADV_QP_MEMBERS \
	uint64_t comp_mask;  \
	void (*wr_set_processing_hints)(struct efadv_qp * efadv_qp, uint32_t hints);

#endif
