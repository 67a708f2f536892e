/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * L0: the non-inline rdma-core entry points the provider uses, in one table, loaded at
 * run time from the real libibverbs + libefa or from the software device (libefasim.so).
 *
 * The provider never links rdma-core: it still loads where rdma-core is absent, and the
 * same binary runs on hardware and on the software device. The data path does not go
 * through this table: L1 calls rdma-core's inline dispatch (ibv_wr_*, ibv_post_recv,
 * ibv_start_poll, ...) on the objects, which reach whichever device created them.
 *
 * Entries marked optional may be null (an older rdma-core lacks them); L1 checks.
 */
#ifndef EFA_VERBS_API_H
#define EFA_VERBS_API_H

#include "efa/efadv_compat.h"

#include <string>

struct efasim_stats;

namespace efa::verbs {

struct Api {
	ibv_device **(*get_device_list)(int *num);
	void (*free_device_list)(ibv_device **list);
	const char *(*get_device_name)(ibv_device *dev);
	ibv_context *(*open_device)(ibv_device *dev);
	int (*close_device)(ibv_context *ctx);
	int (*query_device)(ibv_context *ctx, ibv_device_attr *attr);
	int (*query_port)(ibv_context *ctx, uint8_t port, _compat_ibv_port_attr *attr);
	int (*query_gid)(ibv_context *ctx, uint8_t port, int index, ibv_gid *gid);
	ibv_pd *(*alloc_pd)(ibv_context *ctx);
	int (*dealloc_pd)(ibv_pd *pd);
	ibv_mr *(*reg_mr)(ibv_pd *pd, void *addr, size_t len, int access);
	ibv_mr *(*reg_mr_iova2)(ibv_pd *pd, void *addr, size_t len, uint64_t iova, unsigned access); /* optional */
	int (*dereg_mr)(ibv_mr *mr);
	ibv_ah *(*create_ah)(ibv_pd *pd, ibv_ah_attr *attr);
	int (*destroy_ah)(ibv_ah *ah);
	int (*destroy_cq)(ibv_cq *cq);
	ibv_comp_channel *(*create_comp_channel)(ibv_context *ctx);
	int (*destroy_comp_channel)(ibv_comp_channel *ch);
	int (*get_cq_event)(ibv_comp_channel *ch, ibv_cq **cq, void **cq_context);
	void (*ack_cq_events)(ibv_cq *cq, unsigned int n);
	int (*modify_qp)(ibv_qp *qp, ibv_qp_attr *attr, int mask);
	int (*query_qp)(ibv_qp *qp, ibv_qp_attr *attr, int mask, ibv_qp_init_attr *init);
	int (*destroy_qp)(ibv_qp *qp);
	ibv_qp_ex *(*qp_to_qp_ex)(ibv_qp *qp);
	int (*fork_init)(void);                       /* optional */
	ibv_fork_status (*is_fork_initialized)(void); /* optional (rdma-core 35) */

	int (*efadv_query_device)(ibv_context *ctx, efadv_device_attr *attr, uint32_t inlen);
	int (*efadv_query_ah)(ibv_ah *ah, efadv_ah_attr *attr, uint32_t inlen);
	ibv_qp *(*efadv_create_qp_ex)(ibv_context *ctx, ibv_qp_init_attr_ex *attr, efadv_qp_init_attr *efa,
				      uint32_t inlen);
	ibv_cq_ex *(*efadv_create_cq)(ibv_context *ctx, ibv_cq_init_attr_ex *attr, efadv_cq_init_attr *efa,
				      uint32_t inlen);                    /* optional (EFA_1.2) */
	efadv_cq *(*efadv_cq_from_ibv_cq_ex)(ibv_cq_ex *cq);             /* optional (EFA_1.2) */
	efadv_qp *(*efadv_qp_from_ibv_qp_ex)(ibv_qp_ex *qp);             /* optional (processing hints) */
	/* optional (rdma-core 2026): queue depths for given queue attributes */
	int (*efadv_get_max_sq_depth)(ibv_context *ctx, efadv_sq_depth_attr *attr, uint32_t inlen);
	int (*efadv_get_max_rq_depth)(ibv_context *ctx, efadv_rq_depth_attr *attr, uint32_t inlen);

	int (*efasim_query_stats)(ibv_context *ctx, efasim_stats *st, size_t len); /* software device only */

	bool software;      /* the software EFA device */
	std::string origin; /* the library (or libraries) the table came from */
};

enum class SimMode { Auto, On, Off };

/* Parses FI_EFA_SIM ("auto", "1"/"on"/"yes", "0"/"off"/"no"). false if unknown. */
bool parse_sim_mode(const char *s, SimMode &out);

/*
 * Loads rdma-core (libibverbs.so.1 + libefa.so.1). Returns null and sets `why` when it is
 * not installed or lacks a required entry point. Loaded once; later calls return it.
 */
const Api *load_rdma_core(std::string *why);

/*
 * Loads the software device from `path` (empty: next to this provider library, then the
 * library search path). Loaded once; later calls return it.
 */
const Api *load_sim(const std::string &path, std::string *why);

/* Fills `api` from an already opened library handle. False (and `why`) if incomplete. */
bool fill_api(Api &api, void *verbs_handle, void *efa_handle, std::string *why);

} // namespace efa::verbs

#endif
