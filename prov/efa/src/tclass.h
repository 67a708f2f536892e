/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Traffic classes: which ones the provider serves, which one an endpoint uses, and the
 * device service level (`sl` of the SRD QP) it maps to. This is the one place where
 * FI_TC_* values meet the QP's `sl`; fi_getinfo, fi_domain, fi_endpoint and QP creation
 * of every endpoint kind ask here.
 *
 * Served: FI_TC_UNSPEC and FI_TC_BEST_EFFORT (service level 0) and FI_TC_LOW_LATENCY (the
 * device's low-latency service level 8, as upstream's provider maps it). An EFA QP has
 * no other class to offer: other labels and DSCP values are refused by fi_getinfo
 * (-FI_ENODATA) and, in an fi_info edited after fi_getinfo, by fi_domain and fi_endpoint
 * (-FI_EOPNOTSUPP). fi_endpoint(3): an endpoint's tx_attr->tclass overrides the domain's;
 * unset (FI_TC_UNSPEC), the endpoint uses the domain's.
 *
 * A device without service levels refuses a QP with sl != 0; QP creation then falls back
 * to sl 0 and says so (verbs/qp.cpp).
 */
#ifndef EFA_TCLASS_H
#define EFA_TCLASS_H

#include "log.h"

#include <rdma/fabric.h>
#include <rdma/fi_errno.h>

#include <cstdint>

namespace efa {

inline constexpr uint8_t kSlDefault = 0;
inline constexpr uint8_t kSlLowLatency = 8;

constexpr bool tclass_served(uint32_t tc)
{
	return tc == FI_TC_UNSPEC || tc == FI_TC_BEST_EFFORT || tc == FI_TC_LOW_LATENCY;
}

/* The class an endpoint uses: its own, else its domain's. */
constexpr uint32_t effective_tclass(uint32_t ep_tc, uint32_t dom_tc) { return ep_tc != uint32_t(FI_TC_UNSPEC) ? ep_tc : dom_tc; }

constexpr uint8_t tclass_sl(uint32_t tc) { return tc == uint32_t(FI_TC_LOW_LATENCY) ? kSlLowLatency : kSlDefault; }

/* The service level of an endpoint opened with `ep` in a domain opened with `dom`. */
inline uint8_t endpoint_sl(const fi_info *ep, const fi_info *dom)
{
	const uint32_t ep_tc = ep && ep->tx_attr ? ep->tx_attr->tclass : uint32_t(FI_TC_UNSPEC);
	const uint32_t dom_tc = dom && dom->domain_attr ? dom->domain_attr->tclass : uint32_t(FI_TC_UNSPEC);
	return tclass_sl(effective_tclass(ep_tc, dom_tc));
}

/* fi_domain's and fi_endpoint's check of the class in their fi_info: 0, or
 * -FI_EOPNOTSUPP with a warning that names the call and the field. */
inline int check_tclass(uint32_t tc, const char *call, const char *field)
{
	if (tclass_served(tc))
		return 0;
	EFA_WARN(Core,
		 "%s: %s %#x is not served by the efa provider; use FI_TC_UNSPEC, FI_TC_BEST_EFFORT or "
		 "FI_TC_LOW_LATENCY (and an fi_info from fi_getinfo)",
		 call, field, tc);
	return -FI_EOPNOTSUPP;
}

} // namespace efa

#endif
