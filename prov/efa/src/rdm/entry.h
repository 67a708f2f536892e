/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * What the objects layer (domain.cpp) calls in the efa fabric's RDM layer: nothing of
 * the endpoint's inside shows through.
 */
#ifndef EFA_RDM_ENTRY_H
#define EFA_RDM_ENTRY_H

#include "verbs/device.h"

#include <rdma/fi_atomic.h>
#include <rdma/fi_domain.h>

namespace efa::rdm {

/* fi_endpoint on an efa fabric domain. */
int ep_open(fid_domain *domain, fi_info *info, fid_ep **ep, void *context);
/* fi_query_atomic on an efa fabric domain. */
int query_atomic(const verbs::Device &dev, uint64_t caps, fi_datatype dt, fi_op op, fi_atomic_attr *attr,
		 uint64_t flags);
/* The bytes of one atomic on an endpoint with these caps (ShmPath::kMaxAtomic). */
size_t max_atomic(const verbs::Device &dev, uint64_t caps);

} // namespace efa::rdm

#endif
